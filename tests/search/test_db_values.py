"""A tuning database whose values are of the wrong type (SQLite's columns hold any type: text in a REAL column, a
blob, a fraction in an INTEGER column) is a damaged file, reported as a malformed JSON value is: one TuningDBError
naming the file, the column and `uopviz cache clear`, never a TypeError from whatever reads the value later."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from uopviz.cli import main
from uopviz.search.db import TuningDB, TuningDBError
from uopviz.search.keys import CacheKey, TargetInfo

KEY = CacheKey.of("k" * 16, TargetInfo("CPU", "Test CPU", "Linux x86_64", "cc -O2", "cc 1.0"), 1)


def _filled(path: Path) -> Path:
    """A finished search with two candidates and its result, and a running search with one (holding the lease)."""
    with TuningDB(path) as db:
        h = db.begin_search(KEY, "r_k", "AST", {"beam": 2})
        base = db.add_candidate(h.id, None, 0, [], "p0", 10, 0.5, None, [3e-3, 2e-3])
        db.finish_search(h.id, db.add_candidate(h.id, base, 1, [{"op": "UPCAST", "arg": 4}], "p1", 12, 0.2, None,
                                                [1e-3]))
        h = db.begin_search(KEY, "r_k", "AST", {"beam": 4})
        db.add_candidate(h.id, None, 0, [], "p0", 10, 0.5, None, [3e-3])
    return path


def _damage(path: Path, sql: str) -> None:
    with sqlite3.connect(path) as conn:
        for statement in sql.split(";"):
            assert conn.execute(statement).rowcount >= 1


Read = Callable[[TuningDB], Any]
CASES: list[tuple[str, str, Read]] = [
    ("UPDATE results SET median_s = 'abc'", "results.median_s is text \"abc\"", lambda db: db.results()),
    ("UPDATE results SET median_s = 'abc'", "results.median_s", lambda db: db.lookup(KEY)),
    ("UPDATE results SET created_at = x'00ff'", "results.created_at is a 2-byte blob", lambda db: db.results()),
    ("UPDATE candidates SET median_s = 'fast' WHERE id = 2", "candidates.median_s",
     lambda db: db.candidates(1)),
    ("UPDATE candidates SET median_s = 'fast' WHERE id = 2", "candidates.median_s", lambda db: db.searches()),
    ("UPDATE candidates SET round = 1.5", "candidates.round is float 1.5, not an integer",
     lambda db: db.candidates(1)),
    ("UPDATE candidates SET samples = '\"abc\"'", "candidates.samples is \"abc\", not a list of seconds",
     lambda db: db.candidates(1)),
    ("UPDATE candidates SET samples = '[1, \"x\"]'", "candidates.samples", lambda db: db.candidates(1)),
    ("UPDATE leases SET heartbeat_at = 0; UPDATE candidates SET samples = '[1, \"x\"]' WHERE id = 3",
     "candidates.samples", lambda db: db.begin_search(KEY, "r_k", "AST", {"beam": 4})),  # resuming reads them
    ("UPDATE searches SET started_at = 'yesterday'", "searches.started_at", lambda db: db.search(1)),
    ("UPDATE searches SET params = x'5b5d'", "searches.params is a 2-byte blob, not JSON text",
     lambda db: db.searches()),
    ("UPDATE kernels SET name = x'01'", "kernels.name is a 1-byte blob", lambda db: db.results()),
    ("UPDATE kernels SET ast = x'01'", "kernels.ast", lambda db: db.kernel_ast(KEY.kernel_hash)),
    ("UPDATE leases SET heartbeat_at = 'now'", "leases.heartbeat_at", lambda db: db.lease(KEY)),
    ("UPDATE leases SET pid = 'me', owner = 'other'", "leases.pid",
     lambda db: db.begin_search(KEY, "r_k", "AST", {"beam": 4})),
    ("UPDATE searches SET params = printf('%.*c', 5000, '[') || printf('%.*c', 5000, ']')", "nested too deeply",
     lambda db: db.searches()),
]


@pytest.mark.parametrize(("sql", "named", "read"), CASES)
def test_a_mistyped_value_is_a_named_database_error(tmp_path: Path, sql: str, named: str, read: Read) -> None:
    path = _filled(tmp_path / "t.db")
    _damage(path, sql)
    with TuningDB(path) as db, pytest.raises(TuningDBError) as e:
        read(db)
    message = str(e.value)
    assert message.startswith(f"the tuning database {path} holds a ") and named in message
    assert f"`uopviz cache clear --db {path}`" in message and "\n" not in message


def test_a_sound_database_reads_as_before(tmp_path: Path) -> None:
    with TuningDB(_filled(tmp_path / "t.db")) as db:
        [r] = db.results()
        assert (r.median_s, r.opts, db.lookup(KEY)) == (1e-3, [{"op": "UPCAST", "arg": 4}], r)
        assert [c.samples for c in db.candidates(1)] == [[3e-3, 2e-3], [1e-3]]
        assert [s.status for s in db.searches()] == ["running", "done"] and db.lease(KEY) is not None


@pytest.mark.parametrize(("args", "sql"), [
    (["cache", "ls"], "UPDATE results SET median_s = 'abc'"),
    (["cache", "ls"], "UPDATE candidates SET median_s = 'abc' WHERE id = 2"),
    (["cache", "show", "1"], "UPDATE candidates SET compile_s = 'slow'"),
    (["cache", "export", "-"], "UPDATE candidates SET samples = '{}'"),
])
def test_cache_commands_report_a_mistyped_value_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            args: list[str], sql: str) -> None:
    path = _filled(tmp_path / "t.db")
    _damage(path, sql)
    assert main([*args, "--db", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a malformed value" in err and "uopviz cache clear" in err


def test_beam_reports_a_mistyped_result_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.db"
    beam = ["beam", "sum", "--small", "--beam", "1", "--rounds", "1", "--db", str(path)]
    assert main(beam) == 0
    _damage(path, "UPDATE results SET median_s = 'abc'")
    capsys.readouterr()
    assert main(beam) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "results.median_s is text" in err and "uopviz cache clear" in err
