"""Issue 28, safe on a shared machine, shown with two real users: the test runs as root and starts `uopviz serve`
(with a browser to open: its launch page); the other user is uid 65534 (nobody), whose probes (other_user.py) run in
child processes started with that uid, that gid and no other groups. The other user finds the token on no command
line or environment of any process, in no file it can read and in no API answer; its own server on another port
of 127.0.0.1 receives no cookie and no token from the browser that holds this server's page; and a kernel library
it plants in a cache folder it made in a shared sticky folder is refused (CacheTrustError), never loaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import other_user
import pytest
from planted import evil_library, one
from recorded_browser import serve_with_browser
from uopviz.backend.child import base_and_token

from uopviz.runtime.cpu import CPURuntime
from uopviz.runtime.trust import CacheTrustError

NOBODY = 65534
PROBE = Path(other_user.__file__).read_text()  # run with -c: no file of this checkout need be readable to nobody
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}  # nothing of root's environment
TEMP_FOLDERS = ["/tmp", "/var/tmp", "/dev/shm"]  # shared folders where a server's files could be
PROBE_SECONDS = 300  # the file walk reads a shared /tmp whole: minutes where it holds millions of entries
PARAMS = {"trace_id": "max", "ci": 1, "pi": 0, "k": 0, "sid": 1, "job": "nope"}  # to fill the API's route paths

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.isdir("/proc"),
                                reason="the two-user probe needs root, to run the other user's code as uid 65534 "
                                       "(nobody), and Linux's /proc (the tests run as root here and in CI)")


def as_nobody(python: str, *args: str) -> list[str]:
    return [python, "-I", "-c", PROBE, *args]


NOBODY_PROCESS: dict[str, Any] = {"user": NOBODY, "group": NOBODY, "extra_groups": [], "cwd": "/", "env": ENV}


@pytest.fixture(scope="module")
def python() -> str:
    """A Python that uid 65534 can run (this one, unless it lies in a folder only root may enter); skip where
    none can be started with that uid (os.setuid refused, as in a user namespace without it)."""
    why = "no Python found"
    for exe in dict.fromkeys([sys.executable, getattr(sys, "_base_executable", sys.executable), "/usr/bin/python3",
                              shutil.which("python3") or "/usr/bin/python3"]):
        try:
            r = subprocess.run([exe, "-I", "-c", "import os; print(os.getuid(), os.getgid(), os.getgroups())"],
                               capture_output=True, text=True, timeout=30, **NOBODY_PROCESS)
        except (OSError, subprocess.SubprocessError) as e:
            why = f"{exe}: {e}"
            continue
        if r.returncode == 0 and r.stdout.split() == [str(NOBODY), str(NOBODY), "[]"]:
            return exe
        why = f"{exe} as uid {NOBODY}: exit {r.returncode}, {r.stdout.strip()} {r.stderr.strip()[-300:]}"
    pytest.skip(f"cannot start a process as uid {NOBODY} here (setuid/setgid to it refused, as in a user namespace "
                f"that does not map it): {why}")


Probe = Callable[[str, dict[str, Any]], dict[str, Any]]


@pytest.fixture(scope="module")
def probe(python: str) -> Probe:
    """probe(action, request): other_user.py's answer to the action, run as uid 65534; the request (which may
    hold the token, for the probe to say where it found it) goes on stdin, never on the command line."""
    def run(action: str, request: dict[str, Any]) -> dict[str, Any]:
        r = subprocess.run(as_nobody(python, action), input=json.dumps(request) + "\n", capture_output=True,
                           text=True, timeout=PROBE_SECONDS, **NOBODY_PROCESS)
        assert r.returncode == 0, r.stderr
        answer = json.loads(r.stdout)
        assert answer["uid"] == NOBODY
        return answer
    return run


@dataclass
class Server:
    seen: dict[str, Any]  # what the browser was started with (recorded_browser.RECORDER)
    base: str
    token: str
    proc: subprocess.Popen[str]
    since: float  # time.time() before it started


@pytest.fixture(scope="module")
def server(python: str, trace_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`uopviz serve` of root's on a free loopback port, the browser opened on its launch page and left open (its
    command line is one of those the other user reads)."""
    since = time.time() - 1
    with serve_with_browser(trace_file, tmp_path_factory.mktemp("serve"), linger=True) as (seen, printed, proc):
        base, token = base_and_token(printed)
        assert token is not None
        yield Server(seen, base, token, proc, since)


def test_the_other_user_finds_the_token_on_no_command_line_or_environment(server: Server, probe: Probe) -> None:
    """Every process's /proc/PID/cmdline (the server's, the browser's and its opener's included) and every
    /proc/PID/environ the other user can read: none holds the token, and the server's environment is unreadable."""
    seen = probe("proc", {"token": server.token, "server_pid": server.proc.pid})
    assert "uopviz.cli serve" in seen["server_cmdline"] and seen["cmdlines_read"] > 1  # it reads command lines
    assert seen["cmdline_hits"] == {}
    assert seen["own_environ_read"]  # it reads an environment it may read: its own
    assert seen["environ_hits"] == []
    assert seen["server_environs"][str(server.proc.pid)] == "unreadable", seen["server_environs"]


@pytest.fixture
def canary() -> Iterator[tuple[Path, str]]:
    """A file in the temporary folder that every user may read, and a text in it: the file walk must find it."""
    folder = Path(tempfile.mkdtemp(prefix="uopviz-two-users-"))
    folder.chmod(0o755)
    text = f"canary-{os.getpid()}-{time.time_ns()}"
    (folder / "canary").write_text(text)
    (folder / "canary").chmod(0o644)
    yield folder / "canary", text
    shutil.rmtree(folder)


def test_the_other_user_reads_the_token_in_no_file(server: Server, probe: Probe, canary: tuple[Path, str]) -> None:
    """Every file changed since the server started, under the shared temporary folders, that the other user can
    read: none holds the token; the launch page's folder can be neither listed nor entered, the page not read."""
    assert "page" in server.seen, server.seen["argv"]  # the browser was opened on the launch page
    page = Path(server.seen["page"])
    folders = sorted(f for f in {tempfile.gettempdir(), str(page.parent.parent), *TEMP_FOLDERS} if os.path.isdir(f))
    assert server.token in page.read_text()  # the page is there while the server runs, and holds it
    seen = probe("files", {"texts": {"token": server.token, "canary": canary[1]}, "since": server.since,
                           "folders": folders})
    assert seen["hits"]["token"] == []
    assert seen["launch"][str(page.parent)] == {"listing": "unreadable", "page": "unreadable"}
    found = seen["hits"]["canary"]
    assert found == [str(canary[0])]  # what the other user can read, the walk reads


def test_the_api_answers_the_other_user_nothing_without_the_token(server: Server, probe: Probe) -> None:
    """Each route and method of the server's own schema, asked by the other user with no token, wrong ones and one
    a character off: 401 (or 403), no cookie, no token in the answer; the page and the schema hold no token."""
    seen = probe("api", {"token": server.token, "base": server.base, "params": PARAMS})
    routes = {tuple(r) for r in seen["routes"]}
    assert {("GET", "/api/traces"), ("POST", "/api/traces"), ("POST", "/api/traces/{trace_id}/contexts/{ci}/beam"),
            ("DELETE", "/api/beam/{job}"), ("GET", "/api/beam/{job}/events")} <= routes and len(routes) >= 16
    assert len(seen["answers"]) == 5 * (len(routes) + 2)
    assert not [a for a in seen["answers"] if a["status"] not in (401, 403) or a["cookies"] or a["token"]]
    assert [(p["status"], p["cookies"], p["token"]) for p in seen["pages"]] == [(200, [], False)] * 5
    auth = {"Authorization": f"token {server.token}"}  # the routes asked are there: with the token, they answer
    for path in ["api/traces", "api/traces/max", "api/traces/max/contexts/1/kernel"]:
        assert httpx.get(server.base + path, headers=auth, timeout=30).status_code == 200, path


def test_the_other_users_server_on_another_port_receives_no_cookie_and_no_token(server: Server, python: str) -> None:
    """Browsers send a host's cookies to every port of it. A client that keeps cookies so (httpx's jar, by host
    and not port) opens the printed URL, the page and the API as the browser would, then the other user's server
    (uid 65534) on another port of 127.0.0.1: it receives neither a cookie nor the token, and no answer set one."""
    listener = subprocess.Popen(as_nobody(python, "listen"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **NOBODY_PROCESS)
    try:
        assert listener.stdin and listener.stdout
        listener.stdin.write("{}\n")
        listener.stdin.flush()
        port = int(listener.stdout.readline())
        auth = {"Authorization": f"token {server.token}"}
        with httpx.Client(timeout=30) as browser:
            answers = [browser.get(f"{server.base}?token={server.token}"), browser.get(server.base + "app.js"),
                       *(browser.get(server.base + path, headers=auth) for path in
                         ["api/meta", "api/traces", "api/traces/max", "api/traces/max/contexts/1/kernel"]),
                       browser.get(server.base + "api/traces")]
            assert [r.status_code for r in answers] == [200] * 6 + [401]
            assert browser.get(f"http://127.0.0.1:{port}/other?from=uopviz").status_code == 200
            jar = list(browser.cookies.jar)
        out, err = listener.communicate(timeout=30)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.communicate()
    assert listener.returncode == 0, err
    answer = json.loads(out)
    assert answer["uid"] == NOBODY and len(answer["seen"]) == 1 and "/other?from=uopviz" in answer["seen"][0]
    assert not [h for h in answer["seen"] if server.token in h or "cookie:" in h.lower()], answer["seen"]
    assert not [r.headers.get_list("set-cookie") for r in answers if r.headers.get_list("set-cookie")]
    assert jar == []


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder every user may write, sticky, as /tmp is."""
    folder = Path(tempfile.mkdtemp(prefix="uopviz-shared-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder)


@pytest.mark.parametrize("mode", [0o755, 0o777], ids=["0755", "0777"])  # 0755: only its owner tells it from yours
def test_a_library_the_other_user_planted_is_refused_not_run(probe: Probe, shared: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, mode: int) -> None:
    """The other user makes the cache folder first in a shared sticky folder and puts its library there under
    the name of the victim's kernel, with a matching digest; the victim (this process, root) told to use that
    folder refuses it with CacheTrustError, loads nothing (the library's constructor writes a marker) and writes
    nothing there."""
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path / "own"))
    name = CPURuntime().kernel_library(one()).name  # the library's name in any cache (the same compiler, flags)
    data, marker = evil_library(tmp_path)
    (shared / "evil.so").write_bytes(data)
    (shared / "evil.so").chmod(0o644)  # for the other user to copy
    cache = shared / "cache"
    planted = probe("plant", {"cache": str(cache), "library": str(shared / "evil.so"), "name": name, "mode": mode})
    assert planted["owners"] == [NOBODY]
    files = sorted(p for p in cache.rglob("*"))
    assert cache / "cpu" / name in files
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(cache))  # the victim, told to use the folder the other user made
    with pytest.raises(CacheTrustError, match=rf"owned by .*uid {NOBODY}.*not by you"):
        CPURuntime().compile(one())
    assert not marker.exists()  # never loaded
    assert sorted(p for p in cache.rglob("*")) == files  # nothing written there either
