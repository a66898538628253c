"""A store of small recorded traces shared by the API tests: the zoo gemm at its default sizes (the size
budget is stated for it), softmax at small sizes, a saved file, and a kernel context whose lowering failed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import uopviz
from backend.app import create_app
from backend.store import TraceStore
from uopviz.dtype import dtypes
from uopviz.uop.ops import UOp
from uopviz.uop.pattern import PatternMatcher, UPat, graph_rewrite


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
def client(store: TraceStore, missing_dist: Path) -> Iterator[TestClient]:
    with TestClient(create_app(store, dist=missing_dist)) as c:
        yield c
