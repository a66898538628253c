"""A tuning database value of the wrong type (text in a REAL column) answers the tuning routes as any damaged
database does: a 503 whose detail names the file, the column and `uopviz cache clear`, not an internal error."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from uopviz.backend.store import TraceStore

from uopviz.search.db import TuningDB
from uopviz.search.keys import CacheKey, TargetInfo

KEY = CacheKey.of("k" * 16, TargetInfo("CPU", "Test CPU", "Linux x86_64", "cc -O2", "cc 1.0"), 1)


@pytest.mark.parametrize(("url", "sql", "column"), [
    ("/api/tuning/results", "UPDATE results SET median_s = 'abc'", "results.median_s"),
    ("/api/tuning/searches", "UPDATE searches SET started_at = 'then'", "searches.started_at"),
    ("/api/tuning/searches/1", "UPDATE candidates SET samples = '[\"x\"]'", "candidates.samples"),
])
def test_a_mistyped_value_is_503_naming_the_column(tmp_path: Path, missing_dist: Path,
                                                   make_client: Callable[..., TestClient],
                                                   url: str, sql: str, column: str) -> None:
    db = tmp_path / "tuning.db"
    with TuningDB(db) as t:
        h = t.begin_search(KEY, "r_k", "AST", {"beam": 2})
        t.finish_search(h.id, t.add_candidate(h.id, None, 0, [], "p0", 10, 0.5, None, [1e-3]))
    with make_client(TraceStore("CPU"), db=db, dist=missing_dist, raise_server_exceptions=False) as c:
        assert c.get(url).status_code == 200
        with sqlite3.connect(db) as conn:
            conn.execute(sql)
        r = c.get(url)
    detail = r.json()["detail"]
    assert r.status_code == 503 and str(db) in detail and column in detail and "uopviz cache clear" in detail
