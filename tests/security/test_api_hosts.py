"""Issue 11: DNS rebinding on every loopback address. A server listening on a loopback address (127.0.0.1,
127.0.0.2, ::1, localhost) answers only requests whose Host names a loopback address (localhost, 127.x.x.x,
[::1], with or without a port): a page whose DNS name is rebound to 127.0.0.1 sends its own name. A server on
another address keeps its warning instead."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from uopviz.backend.app import create_app
from uopviz.backend.child import base_and_token
from uopviz.backend.recording import record_zoo
from uopviz.backend.security import Access, loopback_host
from uopviz.backend.store import TraceStore

TOKEN = "the-token-of-the-host-tests"
LOOPBACK_HOSTS = ["localhost", "localhost:8000", "LocalHost:1", "127.0.0.1", "127.0.0.1:8000", "127.0.0.2:8000",
                  "127.255.255.254", "[::1]", "[::1]:8000", "[0:0:0:0:0:0:0:1]:80"]
OTHER_HOSTS = ["", "evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil.example",
               "evil.example#127.0.0.1", "::1", "[::1", "[::2]:8000", "[127.0.0.1]", "0.0.0.0",
               "10.0.0.1:8000", "127.0.0.1:", "127.0.0.1:8000:1", "localhost:８０", "127.1", "[::1]x"]


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_loopback_names_and_addresses_are_loopback(host: str) -> None:
    assert loopback_host(host)


@pytest.mark.parametrize("host", OTHER_HOSTS)
def test_other_hosts_are_not(host: str) -> None:
    assert not loopback_host(host)


@pytest.fixture(scope="module")
def store() -> TraceStore:
    s = TraceStore("CPU")
    s.record_zoo("max", small=True)
    return s


def get(app: FastAPI, host: str) -> tuple[int, dict[str, str]]:
    r = TestClient(app, base_url="http://127.0.0.1:8000").get(
        "/api/traces", headers={"Host": host, "Authorization": f"token {TOKEN}"})
    return r.status_code, r.json()


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "[::2]:8000", "127.0.0.1.evil.example"])
def test_a_loopback_server_refuses_other_hosts_with_400_json(store: TraceStore, host: str) -> None:
    status, body = get(create_app(store, access=Access(TOKEN, 8000, loopback=True)), host)
    assert status == 400 and "loopback" in body["detail"]


@pytest.mark.parametrize("host", ["[::1]:8000", "127.0.0.2:8000", "localhost:8000"])
def test_a_loopback_server_answers_loopback_hosts(store: TraceStore, host: str) -> None:
    assert get(create_app(store, access=Access(TOKEN, 8000, loopback=True)), host)[0] == 200


def test_a_server_on_another_address_takes_any_host(store: TraceStore) -> None:
    assert get(create_app(store, access=Access(TOKEN, 8000, loopback=False)), "uopviz.lan:8000")[0] == 200


def _can_listen(host: str) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family) as s:
            s.bind((host, 0))
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "max.uopviz-trace.json"
    record_zoo("max", small=True).save(path)
    return path


Start = Callable[[str], tuple[str, subprocess.Popen[str]]]


@pytest.fixture
def serve(trace_file: Path, tmp_path: Path) -> Iterator[Start]:
    """serve(host): start `uopviz serve --host HOST --port 0 FILE`; (its printed line, its process)."""
    procs: list[subprocess.Popen[str]] = []

    def start(host: str) -> tuple[str, subprocess.Popen[str]]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "UOPVIZ_CACHE_DIR": str(tmp_path / "cache")}
        proc = subprocess.Popen([sys.executable, "-m", "uopviz.cli", "serve", "--no-browser", "--port", "0", "--host",
                                 host, str(trace_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        procs.append(proc)
        return (proc.stdout.readline() if proc.stdout else ""), proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)


def raw_get(address: str, port: int, host: str, token: str) -> int:
    """The status of GET /api/traces sent to address:port with this Host header (as a rebound page would)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as s:
        s.settimeout(10)
        s.connect((address, port))
        s.sendall(f"GET /api/traces HTTP/1.1\r\nHost: {host}\r\nAuthorization: token {token}\r\n"
                  "Connection: close\r\n\r\n".encode())
        head = s.recv(64).decode("latin-1")
    return int(head.split()[1])


@pytest.mark.parametrize("address", ["::1", "127.0.0.2"])
def test_serve_on_any_loopback_address_refuses_rebound_hosts(serve: Start, address: str) -> None:
    if not _can_listen(address):
        pytest.skip(f"this machine cannot listen on {address}")
    line, _ = serve(address)
    m = re.search(r"http://\S+", line)
    assert m, line
    base, token = base_and_token(m.group(0))
    assert token is not None
    port = int(base.rstrip("/").rsplit(":", 1)[1])
    shown = f"[{address}]" if ":" in address else address
    assert raw_get(address, port, f"{shown}:{port}", token) == 200
    assert raw_get(address, port, f"localhost:{port}", token) == 200
    assert raw_get(address, port, f"rebound.evil.example:{port}", token) == 400


def test_serve_on_another_address_warns(serve: Start) -> None:
    line, proc = serve("0.0.0.0")
    assert "serving 1 trace at http://127.0.0.1:" in line, line
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert "warning: listening on 0.0.0.0: whoever reaches this address" in err
