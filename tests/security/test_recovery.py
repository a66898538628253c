"""Recovery paths a careless user or a damaged disk takes: each ends in a named, one-line error with the way out,
or in the work done anyway, never in a traceback or a crash."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from uopviz.backend.recording import RecordError
from uopviz.backend.store import TraceStore

import uopviz
from uopviz.trace import TraceFormatError

REPO = Path(__file__).resolve().parents[2]


def uopviz_cli(*args: str, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "uopviz.cli", *args], capture_output=True, text=True, cwd=REPO,
                          env={**_env(cache), **env}, timeout=300)


def _env(cache: Path) -> dict[str, str]:
    import os
    return {**os.environ, "UOPVIZ_CACHE_DIR": str(cache)}


def python(code: str, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=_env(cache),
                          timeout=300)


SUM = """
import numpy as np
from uopviz import Tensor
x = np.arange(1000, dtype=np.float32)
print(float(Tensor(x).sum().item()) == float(x.sum()))
"""


# ---- a damaged tuning database ----
@pytest.fixture
def damaged_db(tmp_path: Path) -> Path:
    """A cache whose tuning database holds a result for the zoo's small sum, with its opts no longer JSON."""
    cache = tmp_path / "cache"
    assert uopviz_cli("beam", "sum", "--small", "--beam", "1", cache=cache).returncode == 0
    with sqlite3.connect(cache / "tuning.db") as conn:
        conn.execute("UPDATE results SET opts = '[{bad'")
        conn.execute("UPDATE candidates SET samples = '[1,' WHERE id = 1")
    return cache


def test_a_damaged_database_value_leaves_realize_working_with_one_warning(damaged_db: Path) -> None:
    r = python(SUM + "print(float(Tensor(x * 2).sum().item()) == float((x * 2).sum()))", damaged_db)
    assert r.returncode == 0 and r.stdout.split() == ["True", "True"], r.stderr
    assert r.stderr.count("holds a malformed JSON value") == 1 and "cache clear" in r.stderr


def test_a_damaged_database_value_is_one_line_in_ls_and_clear_is_the_way_out(damaged_db: Path) -> None:
    ls = uopviz_cli("cache", "ls", cache=damaged_db)
    assert ls.returncode == 1 and len(ls.stderr.splitlines()) == 1 and "uopviz cache clear" in ls.stderr
    clear = uopviz_cli("cache", "clear", "--yes", cache=damaged_db)
    assert clear.returncode == 0 and "deleted 1 searches and 1 results" in clear.stdout, clear.stderr
    assert uopviz_cli("cache", "ls", cache=damaged_db).returncode == 0


def test_the_server_starts_on_a_damaged_database(damaged_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`uopviz serve` records the zoo as realize() compiles it, reading the default database."""
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(damaged_db))
    st = TraceStore("CPU").record_zoo("sum", small=True)
    assert any(c.kind == "kernel" for c in st.trace.contexts)


# ---- the compiled-kernel cache ----
def test_a_truncated_cached_library_is_built_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert python(SUM, cache).stdout.strip() == "True"
    libs = list((cache / "cpu").glob("*.so"))
    assert libs and all(lib.with_suffix(".sha256").exists() for lib in libs)
    for lib in libs:  # as a full disk or a killed copy leaves it
        lib.write_bytes(lib.read_bytes()[: lib.stat().st_size // 2])
    r = python(SUM, cache)  # loading a truncated library was a bus error, on every later run
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr
    assert all(lib.with_suffix(".sha256").read_text() == __import__("hashlib").sha256(lib.read_bytes()).hexdigest()
               for lib in libs)


def test_an_unwritable_cache_falls_back_to_a_temporary_one_with_one_warning(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a file where the cache folder would be")
    r = python(SUM + "print(float(Tensor(x * 3).max().item()) == 2997.0)", tmp_path / "file" / "cache")
    assert r.returncode == 0 and r.stdout.split() == ["True", "True"], r.stderr
    assert r.stderr.count("cannot be written") == 1 and "UOPVIZ_CACHE_DIR" in r.stderr


# ---- trace files: nesting and size ----
@pytest.fixture(scope="module")
def saved_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from uopviz import Tensor
    path = tmp_path_factory.mktemp("traces") / "t.uopviz-trace.json"
    with uopviz.trace() as tr:
        (Tensor(np.arange(6, dtype=np.float32)) + 1).numpy()
    tr.save(path)
    return path


def _deep_tag(doc_path: Path, out: Path, depth: int) -> Path:
    """The trace with one node's tag nested `depth` lists deep (written as text: json.dumps would recurse)."""
    doc = json.loads(doc_path.read_text())
    next(e for e in doc["nodes"].values() if e["op"] == "Reshape")["tag"] = "DEEP"
    out.write_text(json.dumps(doc).replace('"DEEP"', "[" * depth + "1" + "]" * depth))
    return out


@pytest.mark.parametrize("kind", ["brackets", "an arg"])
def test_deeply_nested_json_is_a_trace_format_error_everywhere(kind: str, saved_trace: Path, tmp_path: Path) -> None:
    path = tmp_path / "deep.uopviz-trace.json"
    if kind == "brackets":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:  # JSON that json.loads reads, but that a walk over it would recurse through too deep
        _deep_tag(saved_trace, path, 990)
    with pytest.raises(TraceFormatError, match="nested too deeply"):
        uopviz.trace.load(path)
    with pytest.raises(RecordError, match="nested too deeply"):  # the server's file loader
        TraceStore("CPU").load_file(path)
    show = uopviz_cli("trace", "show", str(path), cache=tmp_path / "c")
    assert show.returncode == 1 and show.stderr.count("\n") == 1 and "nested too deeply" in show.stderr
    serve = uopviz_cli("serve", "--no-browser", "--port", "0", str(path), cache=tmp_path / "c")
    assert serve.returncode == 2 and "nested too deeply" in serve.stderr and "Traceback" not in serve.stderr


def test_deeply_nested_json_is_one_line_in_cache_import(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    r = uopviz_cli("cache", "import", str(path), cache=tmp_path / "c")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "nested too deeply" in r.stderr


def test_a_trace_over_the_size_limit_is_refused_before_it_is_read(saved_trace: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPVIZ_MAX_TRACE_MB", "0.001")
    with pytest.raises(TraceFormatError, match=r"MB, over the 0\.001 MB uopviz reads as a trace; set UOPVIZ_MAX"):
        uopviz.trace.load(saved_trace)
    monkeypatch.setenv("UOPVIZ_MAX_TRACE_MB", "1")
    assert uopviz.trace.load(saved_trace).contexts
