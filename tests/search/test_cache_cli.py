"""`uopviz cache ls|show|clear|export|import` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from uopviz.cli import main
from uopviz.search.db import TuningDB
from uopviz.search.keys import CacheKey, TargetInfo

KEY = CacheKey.of("k" * 16, TargetInfo("CPU", "Test CPU", "Linux x86_64", "cc -O2", "cc 1.0"), 1)


def uopviz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "uopviz.cli", *args], capture_output=True, text=True)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A database with one finished search (three candidates over two rounds) and one unfinished."""
    path = tmp_path / "tuning.db"
    with TuningDB(path) as db:
        h = db.begin_search(KEY, "r_L64_L64_R64", "SINK(STORE(...))", {"beam": 2})
        base = db.add_candidate(h.id, None, 0, [], "p0", 40, 0.2, None, [2e-3, 3e-3, 2e-3])
        best = db.add_candidate(h.id, base, 1, [{"op": "UPCAST", "axis": 0, "arg": 4}], "p1", 52, 0.3, None,
                                [5e-4, 6e-4, 5e-4], built_on="w1 (ray node 1a2b3c4d)",
                                measured_on="w2 (ray node 5e6f7a8b)")
        db.add_candidate(h.id, base, 1, [{"op": "UNROLL", "axis": 1, "arg": 3}], None, None, 0.1,
                         "split of axis 1 (size 64) by 3: 64 is not divisible", [])
        db.finish_search(h.id, best)
        db.begin_search(KEY, "r_L64_L64_R64", "SINK(STORE(...))", {"beam": 8})
    return path


def test_ls_lists_results(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "ls", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["search", "kernel", "device", "median", "opts", "tuned", "measured", "on"]
    assert out[1].split()[:7] == ["1", "r_L64_L64_R64", "CPU", "(Test", "CPU)", "500.0", "µs"]
    assert "UPCAST axis=0 arg=4" in out[1] and out[1].endswith("w2 (ray node 5e6f7a8b)")
    assert out[2] == f"1 results, 2 searches (1 unfinished) in {db_path}"


def test_ls_on_the_default_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path))
    assert main(["cache", "ls"]) == 0
    assert capsys.readouterr().out == f"0 results, 0 searches (0 unfinished) in {tmp_path / 'tuning.db'}\n"


def test_show_prints_a_search_round_by_round(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "show", "1", "--ast", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("search 1: r_L64_L64_R64 on CPU (Test CPU), done\n")
    assert '  params   {"beam": 2}' in out and "  best     candidate 2, 500.0 µs" in out
    rows = out.split("round  ")[1].splitlines()
    assert rows[1].split() == ["0", "1", "-", "2.00", "ms", "3", "200.00", "ms", "40", "-", "(none)"]
    assert rows[2].split()[:3] == ["1", "*", "2"] and "w2 (ray node 5e6f7a8b)  UPCAST axis=0 arg=4" in rows[2]
    assert rows[3].split()[:2] == ["3", "1"] and "error: split of axis 1 (size 64) by 3" in rows[3]
    assert out.endswith("kernel AST:\nSINK(STORE(...))\n")
    assert main(["cache", "show", "9", "--db", str(db_path)]) == 1
    assert "no search 9" in capsys.readouterr().err


def test_export_clear_import(db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = tmp_path / "tuning.json"
    assert main(["cache", "export", str(exported), "--db", str(db_path)]) == 0
    assert "exported 2 searches (3 candidates) and 1 results" in capsys.readouterr().out
    doc = json.loads(exported.read_text())
    assert (doc["format"], doc["version"]) == ("uopviz-tuning-db", 1)
    assert main(["cache", "clear", "--yes", "--db", str(db_path)]) == 0
    assert "deleted 2 searches and 1 results" in capsys.readouterr().out
    assert main(["cache", "import", str(exported), "--db", str(db_path)]) == 0
    assert "imported 2 searches (3 candidates) and 1 results" in capsys.readouterr().out
    assert main(["cache", "import", str(exported), "--db", str(db_path)]) == 0
    assert "imported 0 searches (0 candidates) and 0 results" in capsys.readouterr().out
    with TuningDB(db_path) as db:
        assert db.lookup(KEY).opts == [{"op": "UPCAST", "axis": 0, "arg": 4}] and len(db.candidates(1)) == 3


def test_import_reports_bad_input(db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert main(["cache", "import", str(bad), "--db", str(db_path)]) == 1
    assert f"uopviz: {bad} is not JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"format": "uopviz-tuning-db", "version": 1, "kernels": [], "searches": [{}],
                               "results": []}))
    assert main(["cache", "import", str(bad), "--db", str(db_path)]) == 1
    assert "is not a valid uopviz tuning export: searches[0]: missing 'uid'" in capsys.readouterr().err
    assert main(["cache", "import", str(tmp_path / "missing.json"), "--db", str(db_path)]) == 1
    assert "No such file" in capsys.readouterr().err


def test_clear_asks_first(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = subprocess.run([sys.executable, "-m", "uopviz.cli", "cache", "clear", "--db", str(db_path)],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "pass --yes" in r.stderr
    with TuningDB(db_path) as db:
        assert len(db.searches()) == 2


def test_a_corrupt_database_is_one_line_and_clear_is_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "tuning.db"
    path.write_bytes(b"garbage" * 1000)
    r = uopviz("cache", "ls", "--db", str(path))
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
    assert f"uopviz cache clear --db {path}" in r.stderr
    r = uopviz("cache", "clear", "--yes", "--db", str(path))
    assert r.returncode == 0 and "not a readable tuning database" in r.stdout and not path.exists()
    assert uopviz("cache", "ls", "--db", str(path)).returncode == 0


def test_bad_usage_exits_2() -> None:
    for args in (["cache"], ["cache", "show", "one"], ["cache", "frobnicate"]):
        r = uopviz(*args)
        assert r.returncode == 2 and "usage: uopviz cache" in r.stderr
