"""The tuning database: schema, round trips, resume after kill -9, concurrent writers, bad files, migrations."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from uopviz.search import db as dbmod
from uopviz.search.db import TuningDB, TuningDBError, UnreadableDBError, default_path
from uopviz.search.keys import CacheKey, TargetInfo, describe_target

KEY = CacheKey.of("k" * 16, TargetInfo("CPU", "Test CPU", "Linux x86_64", "cc -O2", "cc 1.0"), 1)
UPCAST4 = [{"op": "UPCAST", "axis": 0, "arg": 4}]

# a search process: resumes (or begins) the search for KEY and adds candidates, one line per stored candidate
WORKER = """
import json, sys
from uopviz.search.db import TuningDB
from uopviz.search.keys import CacheKey
path, key, tag, count = sys.argv[1], CacheKey(**json.loads(sys.argv[2])), sys.argv[3], int(sys.argv[4])
db = TuningDB(path)
h = db.begin_search(key, "r_k", "AST", {"beam": 2})
print("ready", flush=True)
sys.stdin.readline()
i = sum(c.opts[0]["op"] == tag for c in h.candidates)
while i != count:
    db.add_candidate(h.id, None, i // 10, [{"op": tag, "arg": i}], f"p{i}", 10, 0.01, None, [1e-3, 2e-3, 3e-3])
    i += 1
    print(i, flush=True)
"""


def worker(path: Path, tag: str, count: int, key: CacheKey = KEY) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-c", WORKER, str(path), json.dumps(dataclasses.asdict(key)), tag,
                          str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    return p


def integrity(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_schema_wal_and_foreign_keys(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "tuning.db"
    with TuningDB(path) as db:
        assert db._conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        with pytest.raises(sqlite3.IntegrityError):
            db._conn.execute("INSERT INTO candidates (search_id, round, opts, samples, created_at) "
                             "VALUES (99, 0, '[]', '[]', 0)")
    assert tables(path) == {"targets", "kernels", "searches", "candidates", "results", "leases"}
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (len(dbmod.MIGRATIONS),)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_default_path_follows_the_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path / "cache"))
    assert default_path() == tmp_path / "cache" / "tuning.db"
    with TuningDB() as db:
        assert db.path == default_path() and db.path.exists()


def test_search_round_trip_and_lookup(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        assert db.lookup(KEY) is None
        h = db.begin_search(KEY, "r_k", "SINK(...)", {"beam": 2, "shape": [4, 4]})
        assert not h.resumed and h.candidates == []
        base = db.add_candidate(h.id, None, 0, [], "p0", 10, 0.5, None, [3e-3, 2e-3, 4e-3])
        best = db.add_candidate(h.id, base, 1, UPCAST4, "p1", 12, 0.25, None, [1e-3, 5e-3, 1e-3])
        db.add_candidate(h.id, base, 1, [{"op": "UPCAST", "axis": 0, "arg": 3}], None, None, None,
                         "split of axis 0 (size 4) by 3: 4 is not divisible", [])
        res = db.finish_search(h.id, best)
        assert (res.opts, res.median_s, res.search_id, res.kernel_name, res.key) == (UPCAST4, 1e-3, h.id, "r_k", KEY)
        assert db.lookup(KEY) == res and db.results() == [res]
        for field in dataclasses.fields(CacheKey):  # every part of the key counts
            other = dataclasses.replace(KEY, **{field.name: 2 if field.name == "action_space_version" else "x"})
            assert db.lookup(other) is None
        [s] = db.searches()
        assert (s.status, s.best_candidate_id, s.best_median_s, s.n_candidates, s.params) == \
            ("done", best, 1e-3, 3, {"beam": 2, "shape": [4, 4]})
        assert db.search(h.id) == s and db.search(h.id + 1) is None and db.kernel_ast(KEY.kernel_hash) == "SINK(...)"
        cands = db.candidates(h.id)
        assert [(c.id, c.parent_id, c.round, c.median_s) for c in cands] == \
            [(base, None, 0, 3e-3), (best, base, 1, 1e-3), (best + 1, base, 1, None)]
        assert cands[1].opts == UPCAST4 and cands[1].samples == [1e-3, 5e-3, 1e-3] and "divisible" in cands[2].error


def test_begin_search_resumes_only_an_unfinished_search_with_the_same_params(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        h = db.begin_search(KEY, "r_k", "AST", {"beam": 2})
        cid = db.add_candidate(h.id, None, 0, UPCAST4, "p", 1, 0.1, None, [1e-3])
        again = db.begin_search(KEY, "r_k", "AST", {"beam": 2})
        assert again.resumed and again.id == h.id and [c.id for c in again.candidates] == [cid]
        assert again.measured([{"arg": 4, "axis": 0, "op": "UPCAST"}]).id == cid and again.measured([]) is None
        assert db.begin_search(KEY, "r_k", "AST", {"beam": 4}).id != h.id
        db.fail_search(h.id, "every candidate failed verification")
        assert db.search(h.id).status == "failed" and db.begin_search(KEY, "r_k", "AST", {"beam": 2}).id != h.id


def test_the_latest_finished_search_gives_the_result(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        for beam, opts in ((2, UPCAST4), (4, [])):
            h = db.begin_search(KEY, "r_k", "AST", {"beam": beam})
            db.finish_search(h.id, db.add_candidate(h.id, None, 0, opts, "p", 1, 0.1, None, [2e-3]))
        assert db.lookup(KEY).opts == [] and len(db.results()) == 1


def test_choose_makes_another_candidate_the_result_and_says_why(tmp_path: Path) -> None:
    """A finished search's result set to another of its timed candidates (whole-model tuning keeping a step's
    opts): the search's best, the key's result and the reason follow; the export carries the reason, and a search
    of an export from before it has none."""
    with TuningDB(tmp_path / "t.db") as db:
        h = db.begin_search(KEY, "r_k", "AST", {"beam": 2})
        base = db.add_candidate(h.id, None, 0, [], "p0", 10, 0.5, None, [3e-3])
        failed = db.add_candidate(h.id, base, 1, [{"op": "UPCAST", "axis": 0, "arg": 3}], None, None, None, "x", [])
        pick = db.add_candidate(h.id, base, 1, UPCAST4, "p1", 12, 0.25, None, [1e-3])
        with pytest.raises(ValueError, match="not done"):
            db.choose(h.id, base, "slower on the step's buffers")
        db.finish_search(h.id, pick)
        assert db.search(h.id).chosen is None  # type: ignore[union-attr]
        for cid, why, message in ((failed, "why", "not a timed candidate"), (base, "", "needs a reason"),
                                  (pick + 1, "why", "not a timed candidate")):
            with pytest.raises(ValueError, match=message):
                db.choose(h.id, cid, why)
        res = db.choose(h.id, base, "slower on the step's buffers")
        assert (res.opts, res.median_s, res.search_id) == ([], 3e-3, h.id) and db.lookup(KEY) == res
        s = db.search(h.id)
        assert s is not None and (s.best_candidate_id, s.best_median_s, s.leading_opts, s.chosen) == \
            (base, 3e-3, [], "slower on the step's buffers")
        doc = json.loads(json.dumps(db.export_doc()))
    assert doc["searches"][0]["chosen"] == "slower on the step's buffers"
    with TuningDB(tmp_path / "u.db") as other:
        other.import_doc(doc)
        assert other.searches()[0].chosen == "slower on the step's buffers" and other.lookup(KEY).opts == []
    del doc["searches"][0]["chosen"]
    with TuningDB(tmp_path / "v.db") as older:
        older.import_doc(doc)
        assert older.searches()[0].chosen is None


def test_a_database_from_before_choose_is_migrated(tmp_path: Path) -> None:
    """Schema 4 (no searches.chosen) gains the column: its searches are their own picks, and choose works."""
    path = tmp_path / "t.db"
    with sqlite3.connect(path, isolation_level=None) as conn:
        for statement in [s for m in dbmod.MIGRATIONS[:4] for s in m]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 4")
        conn.execute("INSERT INTO kernels (hash, name, ast) VALUES (?, 'r_k', 'AST')", (KEY.kernel_hash,))
        conn.execute("INSERT INTO targets (device, device_name, driver, compiler, compiler_version) "
                     "VALUES (?, ?, ?, ?, ?)", dataclasses.astuple(KEY.target))
        conn.execute("INSERT INTO searches (uid, kernel_id, target_id, action_space_version, uopviz_version, params, "
                     "status, started_at, finished_at) VALUES ('u', 1, 1, ?, ?, '{}', 'done', 0, 1)",
                     (KEY.action_space_version, KEY.uopviz_version))
        for opts, t in (("[]", 3e-3), (json.dumps(UPCAST4), 1e-3)):
            conn.execute("INSERT INTO candidates (search_id, round, opts, samples, median_s, created_at) "
                         "VALUES (1, 0, ?, ?, ?, 0)", (opts, json.dumps([t]), t))
        conn.execute("UPDATE searches SET best_candidate_id = 2")
        conn.execute("INSERT INTO results VALUES (1, 1, ?, ?, ?, 1e-3, 1, 1)",
                     (KEY.action_space_version, KEY.uopviz_version, json.dumps(UPCAST4)))
    with TuningDB(path) as db:
        [s] = db.searches()
        assert (s.best_candidate_id, s.chosen) == (2, None) and db.lookup(KEY).opts == UPCAST4
        assert db.choose(s.id, 1, "kept").opts == [] and db.searches()[0].chosen == "kept"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (len(dbmod.MIGRATIONS),) == (5,)


def test_misuse_is_a_value_error(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        h = db.begin_search(KEY, "r_k", "AST", {})
        failed = db.add_candidate(h.id, None, 0, [], None, None, None, "no", [])
        for bad in ({"opts": {1, 2}}, {"samples": [float("nan")]}, {"round": -1}, {"parent": 999},
                    {"compile_s": -1.0}):
            args = {"parent": None, "round": 0, "opts": [], "program_hash": None, "uop_count": None,
                    "compile_s": None, "error": None, "samples": [1e-3]} | bad
            with pytest.raises(ValueError):
                db.add_candidate(h.id, **args)
        with pytest.raises(ValueError, match="not a timed candidate"):
            db.finish_search(h.id, failed)
        with pytest.raises(ValueError, match="unknown"):
            db.add_candidate(999, None, 0, [], None, None, None, None, [])
        db.finish_search(h.id, db.add_candidate(h.id, None, 0, [], "p", 1, 0.1, None, [1e-3]))
        with pytest.raises(ValueError, match="is done, not running"):
            db.finish_search(h.id, failed)
        assert len(db.candidates(h.id)) == 2


def test_a_search_killed_mid_write_leaves_a_consistent_database_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    p = worker(path, "UPCAST", -1)  # adds candidates until killed
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("go\n")
    p.stdin.flush()
    while int(p.stdout.readline()) < 25:
        pass
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert integrity(path) == "ok"
    with TuningDB(path) as db:
        h = db.begin_search(KEY, "r_k", "AST", {"beam": 2})
        n = len(h.candidates)
        assert h.resumed and n >= 25
        assert sorted(c.opts[0]["arg"] for c in h.candidates) == list(range(n))  # none lost but the last, none torn
        assert all(c.median_s == 2e-3 and c.samples == [1e-3, 2e-3, 3e-3] for c in h.candidates)
        db.release(h.id)
    p = worker(path, "UPCAST", n + 5)  # the resumed search goes on from where it stopped
    assert p.communicate("go\n")[0].split() == [str(i) for i in range(n + 1, n + 6)] and p.returncode == 0
    with TuningDB(path) as db:
        assert [c.opts[0]["arg"] for c in db.candidates(h.id)] == list(range(n + 5))
        db.finish_search(h.id, db.candidates(h.id)[0].id)
        assert db.lookup(KEY) is not None


def test_two_processes_write_two_searches_at_once(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    keys = (KEY, dataclasses.replace(KEY, kernel_hash="j" * 16))
    procs = [worker(path, tag, 60, key) for tag, key in zip(("UPCAST", "UNROLL"), keys)]
    for p in procs:  # both are connected before either writes
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        p.communicate()
        assert p.returncode == 0
    assert integrity(path) == "ok"
    with TuningDB(path) as db:
        searches = db.searches()
        assert len(searches) == 2
        for s, tag in zip(reversed(searches), ("UPCAST", "UNROLL")):
            assert sorted(c.opts[0]["arg"] for c in db.candidates(s.id) if c.opts[0]["op"] == tag) == list(range(60))


def test_one_process_at_a_time_searches_a_kernel(tmp_path: Path) -> None:
    """The lease: a second process that begins the same kernel's search while the first runs is refused, naming
    the holder; once the holder ends (or dies) the search is free again."""
    path = tmp_path / "t.db"
    first = worker(path, "UPCAST", 3)
    with TuningDB(path) as db:
        with pytest.raises(dbmod.SearchBusyError, match=rf"r_k on CPU is being searched by process {first.pid} "):
            db.begin_search(KEY, "r_k", "AST", {"beam": 2})
        with pytest.raises(dbmod.SearchBusyError):  # whatever its params: the kernel is what is held
            db.begin_search(KEY, "r_k", "AST", {"beam": 8})
        assert db.lease(KEY).pid == first.pid
        first.kill()
        first.communicate()
        h = db.begin_search(KEY, "r_k", "AST", {"beam": 2})  # the holder died: its search is resumed here
        assert h.resumed and db.lease(KEY).pid == os.getpid()
        db.finish_search(h.id, db.add_candidate(h.id, None, 0, [], "p", 1, 0.1, None, [1e-3]))
        assert db.lease(KEY) is None


def test_a_holder_whose_lease_was_taken_over_must_stop(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as a, TuningDB(tmp_path / "t.db") as b:
        h = a.begin_search(KEY, "r_k", "AST", {})
        a._conn.execute("UPDATE leases SET heartbeat_at = 0")  # silent for ages
        assert b.begin_search(KEY, "r_k", "AST", {}).id == h.id
        with pytest.raises(ValueError, match="is not held by this connection"):
            a.add_candidate(h.id, None, 0, [], None, None, None, None, [])


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    path.write_bytes(b"this is not SQLite\n" * 300)
    with pytest.raises(UnreadableDBError, match=rf"not a readable uopviz tuning database.*cache clear --db {path}"):
        TuningDB(path)


def test_a_damaged_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with TuningDB(path) as db:
        h = db.begin_search(KEY, "r_k", "AST" * 1000, {})
        for i in range(200):
            db.add_candidate(h.id, None, i // 50, [{"op": "UPCAST", "arg": i}], "p", 1, 0.1, None, [1e-3] * 10)
    with open(path, "r+b") as f:  # closed: the WAL is checkpointed into the file, so this hits real pages
        f.seek(3 * 4096)
        f.write(b"\xa5" * 2 * 4096)
    with pytest.raises(UnreadableDBError, match="cache clear --db"):
        TuningDB(path)


def test_another_programs_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(TuningDBError, match="not a uopviz tuning database") as info:
        TuningDB(path)
    assert not isinstance(info.value, UnreadableDBError) and tables(path) == {"notes"}


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    TuningDB(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {len(dbmod.MIGRATIONS) + 1}")
    with pytest.raises(UnreadableDBError, match=r"schema version \d+, newer than this uopviz.*upgrade uopviz"):
        TuningDB(path)


def test_an_unwritable_place_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(TuningDBError, match=r"cannot create the directory.*UOPVIZ_CACHE_DIR"):
        TuningDB(tmp_path / "file" / "tuning.db")
    with pytest.raises(TuningDBError, match=r"cannot write the tuning database.*UOPVIZ_CACHE_DIR"):
        TuningDB(tmp_path)  # a directory


def test_an_empty_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    path.write_bytes(b"")  # version 0: what `touch` or an interrupted first open leaves
    TuningDB(path).close()
    assert "results" in tables(path)


def test_a_later_migration_upgrades_an_existing_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.db"
    with TuningDB(path) as db:
        h = db.begin_search(KEY, "r_k", "AST", {})
        db.finish_search(h.id, db.add_candidate(h.id, None, 0, UPCAST4, "p", 1, 0.1, None, [1e-3]))
    v = len(dbmod.MIGRATIONS)
    monkeypatch.setattr(dbmod, "MIGRATIONS", [*dbmod.MIGRATIONS, ("ALTER TABLE candidates ADD COLUMN note TEXT",)])
    with TuningDB(path) as db:
        assert db.lookup(KEY).opts == UPCAST4
        assert db._conn.execute("SELECT note FROM candidates").fetchall() == [(None,)]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (v + 1,)


def test_a_database_from_before_where_was_recorded_keeps_working(tmp_path: Path) -> None:
    """Schema 3 (no built_on / measured_on) is migrated: its candidates say nowhere; new ones say where; an export
    without those fields (from an older uopviz) still imports."""
    path = tmp_path / "t.db"
    with sqlite3.connect(path, isolation_level=None) as conn:
        for statement in [s for m in dbmod.MIGRATIONS[:3] for s in m]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 3")
    with TuningDB(path) as db:
        h = db.begin_search(KEY, "r_k", "AST", {})
        db._conn.execute("INSERT INTO candidates (search_id, round, opts, samples, median_s, created_at) "
                         "VALUES (?, 0, '[]', '[0.002]', 0.002, 0)", (h.id,))
        new = db.add_candidate(h.id, None, 1, UPCAST4, "p", 1, 0.1, None, [1e-3], built_on="a", measured_on="b")
        db.finish_search(h.id, new)
        old_c, new_c = db.candidates(h.id)
        assert (old_c.built_on, old_c.measured_on, new_c.built_on, new_c.measured_on) == (None, None, "a", "b")
        assert db.lookup(KEY).measured_on == "b"  # type: ignore[union-attr]
        doc = db.export_doc()
    for c in doc["searches"][0]["candidates"]:
        del c["built_on"], c["measured_on"]
    doc["searches"][0]["uid"] = "older"
    with TuningDB(tmp_path / "u.db") as other:
        assert other.import_doc(doc)["candidates"] == 2
        assert [c.measured_on for c in other.candidates(other.searches()[0].id)] == [None, None]


def test_export_clear_import_round_trip(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        h = db.begin_search(KEY, "r_k", "AST", {"beam": 2})
        base = db.add_candidate(h.id, None, 0, [], "p0", 10, 0.5, None, [3e-3])
        db.finish_search(h.id, db.add_candidate(h.id, base, 1, UPCAST4, "p1", 12, 0.25, None, [1e-3, 2e-3]))
        db.add_candidate(db.begin_search(KEY, "r_k", "AST", {"beam": 8}).id, None, 0, [], None, None, None, "x", [])
        doc = json.loads(json.dumps(db.export_doc()))
        db.clear()
        assert db.searches() == [] and db.results() == [] and db.lookup(KEY) is None
        assert db.import_doc(doc) == {"searches": 2, "candidates": 3, "results": 1, "skipped": 0}
        assert db.import_doc(doc) == {"searches": 0, "candidates": 0, "results": 0, "skipped": 2}
        again = db.export_doc()
        assert {k: v for k, v in again.items() if k != "exported_at"} == \
            {k: v for k, v in doc.items() if k != "exported_at"}
        assert db.lookup(KEY).opts == UPCAST4 and db.begin_search(KEY, "r_k", "AST", {"beam": 8}).resumed


def test_import_keeps_the_newer_result(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        h = db.begin_search(KEY, "r_k", "AST", {})
        db.finish_search(h.id, db.add_candidate(h.id, None, 0, UPCAST4, "p", 1, 0.1, None, [1e-3]))
        doc = db.export_doc()
    older, newer = json.loads(json.dumps(doc)), json.loads(json.dumps(doc))
    older["results"][0] |= {"opts": ["old"], "created_at": 1.0}
    newer["results"][0] |= {"opts": ["new"], "created_at": doc["results"][0]["created_at"] + 1}
    with TuningDB(tmp_path / "t.db") as db:
        assert db.import_doc(older)["results"] == 0 and db.lookup(KEY).opts == UPCAST4
        assert db.import_doc(newer)["results"] == 1 and db.lookup(KEY).opts == ["new"]


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(format="zip"), "not a uopviz tuning export"),
    (lambda d: d.update(version=99), "export version 99.*upgrade uopviz"),
    (lambda d: d.pop("kernels"), "document: missing 'kernels'"),
    (lambda d: d["searches"][0]["candidates"][1].update(round="one"), r"searches\[0\].candidates\[1\].round: expected"),
    (lambda d: d["searches"][0]["candidates"][0].update(parent=7), r"candidates\[0\].*parent 7 is not an earlier"),
    (lambda d: d["searches"][0]["candidates"][0].update(samples=[-1]), r"candidates\[0\].samples: expected"),
    (lambda d: d["searches"][0].update(status="paused"), r"searches\[0\].status: expected one of"),
    (lambda d: d["results"][0]["key"].update(kernel_hash="nope"), r"results\[0\].key.kernel_hash: 'nope' is not in"),
    (lambda d: d["results"][0]["key"].pop("driver"), r"results\[0\].key: missing 'driver'"),
])
def test_import_reports_the_first_bad_field_and_changes_nothing(tmp_path: Path, change, message: str) -> None:
    with TuningDB(tmp_path / "t.db") as db:
        h = db.begin_search(KEY, "r_k", "AST", {})
        base = db.add_candidate(h.id, None, 0, [], "p0", 10, 0.5, None, [3e-3])
        db.finish_search(h.id, db.add_candidate(h.id, base, 1, UPCAST4, "p1", 12, 0.25, None, [1e-3]))
        doc = db.export_doc()
        db.clear()
        change(doc)
        with pytest.raises(ValueError, match=message):
            db.import_doc(doc)
        assert db.searches() == [] and db.results() == []


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_describe_target_asks_the_runtime(device: str) -> None:
    t = describe_target(device)
    assert t.device == device and t.compiler and t.compiler_version
    if device == "CPU":
        assert t.device_name and "-march=native" in t.compiler
