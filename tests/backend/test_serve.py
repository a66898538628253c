"""`uopviz serve` as a user runs it: it prints its URL, answers, stops cleanly on Ctrl-C, and refuses files it
cannot serve with exit status 2 and the file's name."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from devices_here import HAS_CL
from test_api import GEMM_KERNEL
from uopviz.backend.child import base_and_token

from uopviz.cli import main
from uopviz.runtime import device as devices
from uopviz.search.db import TuningDB
from uopviz.search.keys import CacheKey, TargetInfo


def test_serve_records_the_zoo_answers_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    env = {**os.environ, "UOPVIZ_CACHE_DIR": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
    with TuningDB(tmp_path / "picked.db") as db:  # --db: the tuning routes read this file, not the default one
        h = db.begin_search(CacheKey.of("8ce5c084a69fcaaa", TargetInfo("CPU"), 1), "r_L4", "ast", {"beam": 3})
        db.finish_search(h.id, db.add_candidate(h.id, None, 0, [], "p0", 12, 0.1, None, [1e-6]))
    proc = subprocess.Popen([sys.executable, "-m", "uopviz.cli", "serve", "--no-browser", "--port", "0", "--db",
                             "picked.db"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=tmp_path)
    timer = threading.Timer(180, proc.kill)  # a server that never comes up fails the test instead of hanging it
    timer.start()
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert "serving 12 traces at http://127.0.0.1:" in line, (line, proc.stderr and proc.stderr.read())
        url, token = base_and_token(line.split(" at ")[1].split()[0])
        assert token is not None and len(token) >= 40  # secrets.token_urlsafe(32)
        assert httpx.get(url + "api/traces", timeout=10).status_code == 401
        auth = {"Authorization": f"token {token}"}
        r = httpx.get(url + "api/traces", headers=auth, timeout=10)
        assert r.status_code == 200
        assert [t["id"] for t in r.json()][:3] == ["gemm", "batched_gemm", "conv2d"] and len(r.json()) == 12
        gemm = httpx.get(url + "api/traces/gemm", headers=auth, timeout=10).json()
        assert GEMM_KERNEL in [c["name"] for c in gemm["contexts"]]
        searches = httpx.get(url + "api/tuning/searches", headers=auth, timeout=10).json()["searches"]
        assert [(s["kernel_name"], s["width"], s["status"]) for s in searches] == [("r_L4", 3, "done")]
        meta = httpx.get(url + "api/meta", headers=auth, timeout=60).json()
        assert meta["devices"] == devices.available()  # listed by a child process (backend/device_list.py)...
        if HAS_CL:  # ...so the OpenCL driver it started is not in the server
            assert "opencl" not in Path(f"/proc/{proc.pid}/maps").read_text().lower()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "stopped" in out


@pytest.mark.parametrize("content", ["{not json", '{"format": "uopviz-trace", "version": 1}'])
def test_serve_exits_2_naming_a_malformed_trace_file(tmp_path: Path, content: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.uopviz-trace.json"
    bad.write_text(content)
    assert main(["serve", "--no-browser", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"uopviz: {bad}: not a uopviz trace") or err.startswith(f"uopviz: {bad}: trace:"), err


def test_serve_exits_2_for_a_missing_file_a_failing_script_or_an_unknown_device(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--no-browser", str(tmp_path / "gone.uopviz-trace.json")]) == 2
    assert "gone.uopviz-trace.json: no such trace file" in capsys.readouterr().err
    script = tmp_path / "oops.py"
    script.write_text("1 / 0\n")
    assert main(["serve", "--no-browser", str(script)]) == 2
    assert "oops.py: the script failed: ZeroDivisionError: division by zero (line 1)" in capsys.readouterr().err
    assert main(["serve", "--no-browser", "--device", "TPU"]) == 2
    assert "unknown device 'TPU'" in capsys.readouterr().err


def test_serve_says_when_the_port_is_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from uopviz.backend.recording import record_zoo
    trace = tmp_path / "t.uopviz-trace.json"
    record_zoo("max", small=True).save(trace)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--no-browser", "--port", str(port), str(trace)]) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
