"""Schemathesis over /openapi.json: requests generated from the documented schema (valid and invalid), with the
token and a loopback Host as the server's own page sends them, never get a 5xx, and every answer has the status
codes and body shapes the schema documents."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from uopviz.backend.app import create_app
from uopviz.backend.recording import record_zoo
from uopviz.backend.security import Access
from uopviz.backend.store import StoredTrace, TraceStore

from uopviz.search.db import TuningDB
from uopviz.search.keys import CacheKey, TargetInfo

# the schema is read at import; the traces are recorded by the fixture, so a failure there is a test failure
_TOKEN = "the-token-of-the-fuzz-test"
_HEADERS = {"Authorization": f"token {_TOKEN}", "Host": "127.0.0.1:8000"}
_store = TraceStore("CPU")
_app = create_app(_store, dist=Path(__file__).parent / "no-dist", access=Access(_TOKEN, 8000, loopback=True))
schema = schemathesis.openapi.from_asgi("/openapi.json", _app, headers=_HEADERS)


@pytest.fixture(autouse=True)
def _traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A few recorded traces, an empty working directory (so that generated `path` and `script` strings open and
    run no real file), and a tuning database of each test's own with one search (id 1, as the examples say). The
    gemm the examples name is the small one, so a BEAM search that a generated request starts ends in seconds;
    one left running is stopped."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path / "cache"))
    with TuningDB() as db:
        h = db.begin_search(CacheKey.of("8ce5c084a69fcaaa", TargetInfo("CPU"), 1), "r_L4", "ast", {"beam": 1})
        best = db.add_candidate(h.id, None, 0, [], "p0", 12, 0.1, None, [2e-6, 1e-6, 3e-6])
        db.add_candidate(h.id, best, 1, [{"op": "SPLIT", "axis": 0, "arg": [3, "UPCAST", False]}], None, None, 0.1,
                         "4 is not divisible by 3", [])
        db.finish_search(h.id, best)
    if not len(_store):
        _store.add(StoredTrace("gemm", "gemm", "zoo", "CPU", record_zoo("gemm", "CPU", small=True)))
        _store.record_zoo("softmax", small=True)
    yield
    _app.state.beams.stop()


@schema.parametrize()
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_answers_match_the_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(headers=_HEADERS, checks=[schemathesis.checks.not_a_server_error, status_code_conformance,
                                   content_type_conformance, response_schema_conformance])
