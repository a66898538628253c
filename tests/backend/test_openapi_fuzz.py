"""Schemathesis over /openapi.json: requests generated from the documented schema (valid and invalid) never
get a 5xx, and every answer has the status codes and body shapes the schema documents."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from backend.app import create_app
from backend.store import TraceStore

# the schema is read at import; the traces are recorded by the fixture, so a failure there is a test failure
_store = TraceStore("CPU")
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(_store, dist=Path(__file__).parent / "no-dist"))


@pytest.fixture(autouse=True)
def _traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few recorded traces, and an empty working directory, so that generated `path` and `script` strings
    open and run no real file."""
    monkeypatch.chdir(tmp_path)
    if not len(_store):
        _store.record_zoo("gemm")  # the id the schema's examples name
        _store.record_zoo("softmax", small=True)


@schema.parametrize()
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_answers_match_the_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=[schemathesis.checks.not_a_server_error, status_code_conformance,
                                   content_type_conformance, response_schema_conformance])
