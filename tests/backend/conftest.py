"""A store of small recorded traces shared by the API tests: the zoo gemm at its default sizes (the size
budget is stated for it), softmax at small sizes, a saved file, and a kernel context whose lowering failed; and
clients that pass the server's guard as its own page would (a loopback Host, the token)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from uopviz.backend.app import create_app
from uopviz.backend.security import Access
from uopviz.backend.store import TraceStore

import uopviz
from uopviz.dtype import dtypes
from uopviz.uop.ops import UOp
from uopviz.uop.pattern import PatternMatcher, UPat, graph_rewrite

TOKEN = "the-token-of-the-tests"
ACCESS = Access(TOKEN, 8000, loopback=True)
AUTH = {"Authorization": f"token {TOKEN}"}
BASE_URL = "http://127.0.0.1:8000"


def _failed_kernel_trace(path: Path) -> Path:
    """A trace with a kernel context whose only pass raised: it has no rendered program."""
    def boom(x: UOp) -> UOp:
        raise ValueError("no rule for this")

    with uopviz.trace() as tr, uopviz.trace.context("r_L3_R5", kind="kernel"), contextlib.suppress(ValueError):
        graph_rewrite(UOp.variable("a", 0, 9) + UOp.const(dtypes.index, 0), PatternMatcher([
            (UPat.var("x") + UPat.const(None, 0), boom)]), name="broken")
    tr.save(path)
    return path


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> TraceStore:
    s = TraceStore("CPU")
    s.record_zoo("gemm")
    s.record_zoo("softmax", small=True)
    s.load_file(_failed_kernel_trace(tmp_path_factory.mktemp("traces") / "broken.uopviz-trace.json"))
    return s


@pytest.fixture(scope="session")
def missing_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("no-frontend") / "dist"


@pytest.fixture
def token() -> str:
    """The tests' token, for servers the tests start themselves."""
    return TOKEN


@pytest.fixture
def make_client() -> Callable[..., TestClient]:
    """make_client(store, **create_app arguments): a client of that app as the server's own page uses it."""
    def make(store: TraceStore, raise_server_exceptions: bool = True, **kw: Any) -> TestClient:
        return TestClient(create_app(store, access=ACCESS, **kw), base_url=BASE_URL, headers=AUTH,
                          raise_server_exceptions=raise_server_exceptions)
    return make


@pytest.fixture
def client(store: TraceStore, missing_dist: Path, make_client: Callable[..., TestClient]) -> Iterator[TestClient]:
    with make_client(store, dist=missing_dist) as c:
        yield c
