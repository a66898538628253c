"""Issue 28, item 4: Ctrl-C (SIGINT) stops `uopviz serve` at any time, within seconds, leaving no process of its own
behind: while a request waits for a compiler that never ends (here a "compiler" that sleeps, with a child of its
own, as gcc's driver has cc1), while a BEAM search runs, and with OpenCL's compile worker started."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from devices_here import needs_cl
from uopviz.backend.child import base_and_token
from uopviz.backend.recording import record_zoo

STOPS_WITHIN_S = 10.0
# A C compiler that answers --version and otherwise never ends: it writes down its pid and its child's.
HUNG_CC = """#!/bin/sh
case "$1" in --version) echo "hungcc 1.0"; exit 0;; esac
echo $$ >> "{pids}"
sleep 600 &
echo $! >> "{pids}"
wait
"""


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a zombie has ended; it waits only to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def cmdline(pid: int) -> bytes:
    """A process's command line; empty once it has ended (the server's device-listing child ends soon after the
    server starts: between listing the processes and reading their command lines, say)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def tree(pid: int) -> list[int]:
    """The processes under pid, from /proc."""
    kids: dict[int, list[int]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):  # it has ended
            ppid = int(Path(f"/proc/{name}/stat").read_text().rpartition(")")[2].split()[1])
            kids.setdefault(ppid, []).append(int(name))
    out, todo = [], list(kids.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


@contextmanager
def serving(tmp_path: Path, trace: Path, **env: str) -> Iterator[tuple[subprocess.Popen[str], str, dict[str, str]]]:
    """`uopviz serve --no-browser --port 0 TRACE` with env added: the server, its base URL and the token header."""
    proc = subprocess.Popen([sys.executable, "-m", "uopviz.cli", "serve", "--no-browser", "--port", "0", "--db",
                             str(tmp_path / "tuning.db"), str(trace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1",
                                            "UOPVIZ_CACHE_DIR": str(tmp_path / "cache"), **env})
    timer = threading.Timer(300, proc.kill)  # a test that goes wrong fails instead of hanging
    timer.start()
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        m = re.search(r"http://\S+", line)
        assert m, (line, proc.stderr and proc.stderr.read())
        base, token = base_and_token(m.group(0))
        yield proc, base, {"Authorization": f"token {token}"}
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def interrupt(proc: subprocess.Popen[str]) -> tuple[float, str]:
    """Send Ctrl-C; how long the server took to exit, and its stdout."""
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("uopviz serve did not stop within 60 s of Ctrl-C")
    return time.monotonic() - start, out


def ask_in_background(url: str, headers: dict[str, str]) -> None:
    """GET url from a thread of its own; a server that stops before answering is what the test wants."""
    def get() -> None:
        with contextlib.suppress(httpx.HTTPError):
            httpx.get(url, headers=headers, timeout=300)
    threading.Thread(target=get, daemon=True).start()


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("traces")
    record_zoo("max", "CPU", small=True).save(folder / "max.uopviz-trace.json")
    record_zoo("gemm", "CPU").save(folder / "gemm.uopviz-trace.json")
    return folder


def test_ctrl_c_stops_the_server_while_a_request_waits_for_a_compiler_and_kills_it(traces: Path,
                                                                                   tmp_path: Path) -> None:
    pids = tmp_path / "compiler-pids"
    cc = tmp_path / "hungcc"
    cc.write_text(HUNG_CC.format(pids=pids))
    cc.chmod(0o755)
    with serving(tmp_path, traces / "max.uopviz-trace.json", CC=str(cc), UOPVIZ_COMPILE_TIMEOUT="600") as (
            proc, base, auth):
        ask_in_background(base + "api/traces/max/contexts/1/machine-code", auth)
        end = time.monotonic() + 120
        while len(pids.read_text().split() if pids.exists() else []) < 2:
            assert time.monotonic() < end and proc.poll() is None, "the compiler never started"
            time.sleep(0.05)
        compilers = [int(p) for p in pids.read_text().split()]
        under = tree(proc.pid)
        assert set(compilers) <= set(under)
        took, out = interrupt(proc)
    assert took < STOPS_WITHIN_S, f"took {took:.1f} s"
    assert proc.returncode == 0 and "stopped" in out
    time.sleep(0.2)
    assert not [p for p in under if alive(p)], "processes of the server outlived it"


def test_ctrl_c_stops_the_server_during_a_beam_search(traces: Path, tmp_path: Path) -> None:
    with serving(tmp_path, traces / "gemm.uopviz-trace.json") as (proc, base, auth):
        gemm = httpx.get(base + "api/traces/gemm", headers=auth, timeout=30).json()
        ci = next(c["index"] for c in gemm["contexts"] if c["kind"] == "kernel" and c["name"].startswith("r_"))
        r = httpx.post(base + f"api/traces/gemm/contexts/{ci}/beam", headers=auth, timeout=300,
                       json={"width": 8, "max_rounds": 16})
        assert r.status_code == 202, r.text
        with httpx.stream("GET", base + f"api/beam/{r.json()['job']}/events", headers=auth, timeout=300) as s:
            for line in s.iter_lines():
                if line.startswith("data:") and json.loads(line[5:])["event"] == "candidate":
                    break
        under = tree(proc.pid)
        assert under, "the search runs in a process of the server's"
        took, out = interrupt(proc)
    assert took < STOPS_WITHIN_S, f"took {took:.1f} s"
    assert proc.returncode == 0 and "stopped" in out
    time.sleep(0.2)
    assert not [p for p in under if alive(p)], "processes of the server outlived it"


@needs_cl
def test_ctrl_c_stops_the_server_and_kills_its_compile_worker(tmp_path: Path) -> None:
    """OpenCL programs are compiled in a worker process of the server's (uopviz/runtime/compile_worker.py): it goes
    with the server."""
    trace = tmp_path / "max.uopviz-trace.json"
    record_zoo("max", "CL", small=True).save(trace)
    with serving(tmp_path, trace) as (proc, base, auth):
        r = httpx.get(base + "api/traces/max/contexts/1/machine-code", headers=auth, timeout=120)
        assert r.status_code == 200 and r.json()["device"] == "CL", r.text
        under = tree(proc.pid)
        workers = [p for p in under if b"compile_worker_main.py" in cmdline(p)]
        assert len(workers) == 1, "the program binary came from no compile worker of the server's"
        took, out = interrupt(proc)
    assert took < STOPS_WITHIN_S, f"took {took:.1f} s"
    assert proc.returncode == 0 and "stopped" in out
    time.sleep(0.2)
    assert not [p for p in under if alive(p)], "processes of the server outlived it"
