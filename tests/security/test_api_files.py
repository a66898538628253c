"""Issue 11: `POST /api/traces` reads files and runs scripts only from the directories the command line allowed
(the directories of the files served, and each --allow-dir), judged after resolving symlinks; scripts must be .py
files; with no directory allowed (the zoo default) such requests are a 403 saying how to allow one. A failure
never echoes a file's contents: a script's failure is its exception's type, message and line, never its stderr or
the source line a traceback quotes."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from uopviz.backend.app import create_app
from uopviz.backend.recording import record_zoo
from uopviz.backend.script_runner import failure
from uopviz.backend.security import Access
from uopviz.backend.serve import allowed_dirs
from uopviz.backend.store import TraceStore

from uopviz.cli import main

TOKEN = "the-token-of-the-file-tests"
SECRET = "machine example.com login me password hunter2"  # a ~/.netrc line

Client = Callable[[Sequence[Path]], TestClient]


@pytest.fixture
def client(tmp_path: Path) -> Client:
    """client(allowed directories): a client of a server that allows those (resolved)."""
    def make(dirs: Sequence[Path]) -> TestClient:
        app = create_app(TraceStore("CPU"), dist=tmp_path / "no-dist", access=Access(TOKEN, 8000, loopback=True),
                         allow_dirs=[d.resolve() for d in dirs])
        return TestClient(app, base_url="http://127.0.0.1:8000", headers={"Authorization": f"token {TOKEN}"})
    return make


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """An allowed directory holding a trace and a script, and a directory beside it holding secrets (0600)."""
    allowed, private = tmp_path / "allowed", tmp_path / "private"
    allowed.mkdir()
    private.mkdir()
    record_zoo("max", small=True).save(allowed / "max.uopviz-trace.json")
    (allowed / "ok.py").write_text("from uopviz import Tensor\nTensor([1.0, 2.0], device='PYTHON').sum().numpy()\n")
    for name in ("secret.py", "secret.txt", "secret.uopviz-trace.json"):
        (private / name).write_text(f"{SECRET}\n")
        (private / name).chmod(0o600)
    return allowed, private


@pytest.mark.parametrize("body", [{"path": "max.uopviz-trace.json"}, {"script": "ok.py"},
                                  {"path": "/etc/passwd"}, {"script": "/nonexistent/x.py"}])
def test_with_no_directory_allowed_files_and_scripts_are_403_saying_how(client: Client, body: dict[str, str]) -> None:
    r = client([]).post("/api/traces", json=body)
    assert r.status_code == 403 and "--allow-dir DIR" in r.json()["detail"], r.json()


def test_the_zoo_needs_no_directory(client: Client) -> None:
    assert client([]).post("/api/traces", json={"zoo": "max", "small": True}).status_code == 201


def test_files_and_scripts_under_an_allowed_directory_are_served(client: Client, dirs: tuple[Path, Path]) -> None:
    allowed, _ = dirs
    c = client([allowed])
    assert c.post("/api/traces", json={"path": str(allowed / "max.uopviz-trace.json")}).status_code == 201
    assert c.post("/api/traces", json={"path": str(allowed / "sub" / ".." / "max.uopviz-trace.json")}).json()["id"] \
        == "max-2"
    r = c.post("/api/traces", json={"script": str(allowed / "ok.py")})
    assert r.status_code == 201 and r.json()["source"] == "script", r.json()
    r = c.post("/api/traces", json={"path": str(allowed / "gone.json")})
    assert r.status_code == 404 and "no such trace file" in r.json()["detail"]


def _escapes(allowed: Path, private: Path) -> list[str]:
    (allowed / "link.uopviz-trace.json").symlink_to(private / "secret.uopviz-trace.json")
    (allowed / "link.py").symlink_to(private / "secret.py")
    (allowed / "linked-dir").symlink_to(private, target_is_directory=True)
    return [str(private / "secret.uopviz-trace.json"), str(allowed / ".." / "private" / "secret.py"),
            str(allowed / "link.uopviz-trace.json"), str(allowed / "link.py"),
            str(allowed / "linked-dir" / "secret.py"), str(private / "missing.json"),
            os.path.relpath(private / "secret.py")]


def test_paths_outside_the_allowed_directories_are_403_even_through_symlinks(client: Client,
                                                                            dirs: tuple[Path, Path]) -> None:
    allowed, private = dirs
    c = client([allowed])
    for path in _escapes(allowed, private):
        for kind in ("path", "script"):
            r = c.post("/api/traces", json={kind: path})
            assert r.status_code == 403, (kind, path, r.json())
            assert "hunter2" not in r.text and "may read" in r.json()["detail"]  # a missing file too: no oracle


def test_scripts_must_be_py_files_even_through_a_symlink(client: Client, dirs: tuple[Path, Path]) -> None:
    allowed, _ = dirs
    (allowed / "notes.txt").write_text(f"{SECRET}\n")
    (allowed / "notes.py").symlink_to(allowed / "notes.txt")
    c = client([allowed])
    for name in ("notes.txt", "notes.py"):
        r = c.post("/api/traces", json={"script": str(allowed / name)})
        assert r.status_code == 403 and "must be .py files" in r.json()["detail"] and "hunter2" not in r.text


def test_a_path_no_file_can_have_is_422(client: Client, tmp_path: Path) -> None:
    r = client([tmp_path]).post("/api/traces", json={"script": f"{tmp_path}/a\x00b.py"})
    assert r.status_code == 422 and "not a usable path" in r.json()["detail"]


@pytest.mark.parametrize(("source", "detail"), [
    (f"{SECRET}\n", r"SyntaxError: [^\n]+ \(line 1\)"),  # the message is Python's own, not the source text
    (f"x = 1\n{SECRET} = 2\n", r"SyntaxError: [^\n]+ \(line 2\)"),
    (f"import sys\nsys.stderr.write({SECRET!r})\nraise SystemExit(3)\n", r"SystemExit: 3 \(line 3\)"),
    (f"def f():\n    return {{}}[{SECRET!r}[:0]]\n\nf()\n", r"KeyError: '' \(line 2\)"),
    ("import os\nos._exit(7)\n", r"its process ended with exit status 7 without saying why"),
])
def test_a_failing_script_reports_type_message_and_line_never_its_source(client: Client, tmp_path: Path,
                                                                         source: str, detail: str) -> None:
    script = tmp_path / "failing.py"
    script.write_text(source)
    script.chmod(0o600)
    r = client([tmp_path]).post("/api/traces", json={"script": str(script)})
    assert r.status_code == 422 and re.fullmatch(f"{re.escape(str(script))}: the script failed: {detail}",
                                                 r.json()["detail"]), r.json()
    assert "hunter2" not in r.text


def test_the_runner_leaves_a_syntax_errors_text_out(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text(f"ok = 1\nprint({SECRET!r}\n")
    with pytest.raises(SyntaxError) as e:
        compile(script.read_text(), str(script), "exec")
    assert SECRET in (e.value.text or "")  # what a traceback would have shown
    what = failure(e.value, str(script))
    assert what == {"type": "SyntaxError", "message": e.value.msg, "line": 2} and SECRET not in str(what)


def test_the_command_line_allows_the_served_files_directories_and_each_allow_dir(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "b", target_is_directory=True)
    assert allowed_dirs([str(tmp_path / "a" / "t.uopviz-trace.json"), str(tmp_path / "a" / "s.py")],
                        [str(tmp_path / "link")]) == [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]
    assert allowed_dirs([], []) == []


def test_an_allow_dir_that_is_no_directory_stops_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--no-browser", "--allow-dir", str(tmp_path / "gone")]) == 2
    assert f"--allow-dir {tmp_path / 'gone'}: no such directory" in capsys.readouterr().err
