"""Issues 11 and 28: the API runs scripts and reads files, so every API route wants the token `uopviz serve` makes
at start and prints in its URL, as JupyterLab does. It is accepted only as an `Authorization: token X` (or `Bearer
X`) header: never as a cookie, which the browser would also send to every other server on the host (cookies ignore
ports), nor as ?token=, and no answer sets one. The page and its files hold no data and need no token (the page
takes it from the printed URL in the browser). Without a valid token the API answers 401 JSON. `--no-token` turns
it off, only when asked, with a warning."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from uopviz.backend import security
from uopviz.backend.app import create_app
from uopviz.backend.child import base_and_token, served
from uopviz.backend.recording import record_zoo
from uopviz.backend.security import Access
from uopviz.backend.store import TraceStore

TOKEN = "GDx0s3cr3t-token-for-the-security-tests_0123456789"
PORT = 8123
BASE = f"http://127.0.0.1:{PORT}"
COOKIE = f"uopviz-token-{PORT}"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    """A guarded app over the small zoo max, with a built UI (an index page and a script)."""
    dist = tmp_path_factory.mktemp("dist")
    (dist / "index.html").write_text("<!doctype html><title>the uopviz UI</title>")
    (dist / "app.js").write_text("console.log(1)")
    store = TraceStore("CPU")
    store.record_zoo("max", small=True)
    return create_app(store, dist=dist, access=Access(TOKEN, PORT, loopback=True))


def client(app: FastAPI, **kw: object) -> TestClient:
    return TestClient(app, base_url=BASE, follow_redirects=False, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", ["/api/traces", "/api/meta", "/api/traces/max-small", "/api/tuning/searches",
                                  "/api/beam/nope/events", "/api/nothing", "/api"])
def test_api_routes_without_the_token_are_401_json(app: FastAPI, path: str) -> None:
    r = client(app).get(path)
    assert r.status_code == 401 and r.headers["content-type"] == "application/json", r.text
    assert "open the URL `uopviz serve` printed" in r.json()["detail"] and set(r.json()) == {"detail"}
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_state_changing_routes_without_the_token_do_nothing(app: FastAPI) -> None:
    r = client(app).post("/api/traces/max-small/contexts/1/opts", json={"opts": []})
    assert r.status_code == 401
    assert client(app).delete("/api/beam/nope").status_code == 401
    assert client(app).post("/", json={}).status_code == 401  # not an API path, but it would change something
    assert [t["id"] for t in client(app, headers={"Authorization": f"token {TOKEN}"}).get("/api/traces").json()] == \
        ["max-small"]


@pytest.mark.parametrize("path", ["/", "/app.js", "/?x=1", f"/?token={TOKEN}", "/docs", "/openapi.json"])
def test_the_page_and_its_files_hold_no_data_and_need_no_token(app: FastAPI, path: str) -> None:
    r = client(app).get(path)
    assert r.status_code == 200, r.text
    assert "set-cookie" not in r.headers


@pytest.mark.parametrize("how", ["token", "Bearer", "bearer"])
def test_the_token_is_accepted_as_an_authorization_header(app: FastAPI, how: str) -> None:
    r = client(app).get("/api/traces", headers={"Authorization": f"{how} {TOKEN}"})
    assert r.status_code == 200 and r.json()[0]["id"] == "max-small"
    assert "set-cookie" not in r.headers


def test_a_token_in_a_cookie_or_the_query_is_no_token(app: FastAPI) -> None:
    """What a browser sends to every port of the host (a cookie) or writes into its history (?token=) opens
    nothing: another user's server on another port that received either could not replay it here."""
    c = client(app)
    c.cookies.set(COOKIE, TOKEN)
    assert c.get("/api/traces").status_code == 401
    assert client(app).get("/api/traces", params={"token": TOKEN}).status_code == 401
    r = client(app).get("/", params={"token": TOKEN})
    assert r.status_code == 200 and "set-cookie" not in r.headers  # the page, whose script takes the token


@pytest.mark.parametrize("wrong", ["x", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), f" {TOKEN}x", "tøken-ü", "\x7f"])
def test_a_wrong_token_is_refused(app: FastAPI, wrong: str) -> None:
    c = client(app)
    assert c.get("/api/traces", headers={"Authorization": f"token {wrong}".encode()}).status_code == 401
    assert c.get("/api/traces", headers={"Authorization": f"Bearer {wrong}".encode()}).status_code == 401


def test_another_scheme_is_no_token(app: FastAPI) -> None:
    assert client(app).get("/api/traces", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert client(app).get("/api/traces", headers={"Authorization": TOKEN}).status_code == 401


def test_tokens_are_compared_with_compare_digest(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = security.secrets.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(security.secrets, "compare_digest", spy)
    assert client(app).get("/api/traces", headers={"Authorization": "token guess"}).status_code == 401
    assert seen == [(b"guess", TOKEN.encode())]


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "max.uopviz-trace.json"
    record_zoo("max", small=True).save(path)
    return path


def test_serve_prints_a_new_token_each_start_and_wants_it(trace_file: Path, tmp_path: Path) -> None:
    tokens = []
    for _ in range(2):
        with served(str(tmp_path / "cache"), str(trace_file)) as printed:
            base, token = base_and_token(printed)
            assert token is not None and re.fullmatch(r"[A-Za-z0-9_-]{43}", token)  # 32 random bytes
            assert httpx.get(base + "api/traces", timeout=10).status_code == 401
            assert httpx.get(base + "api/traces", headers={"Authorization": f"token {token}"},
                             timeout=10).json()[0]["id"] == "max"
            tokens.append(token)
    assert tokens[0] != tokens[1]


@pytest.fixture
def no_token_server(trace_file: Path, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "UOPVIZ_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "uopviz.cli", "serve", "--no-browser", "--port", "0", "--no-token",
                             str(trace_file)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        yield line, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=30)


def test_no_token_turns_the_token_off_with_a_warning(no_token_server: tuple[str, subprocess.Popen[str]]) -> None:
    line, proc = no_token_server
    m = re.search(r"http://\S+", line)
    assert m and "token" not in m.group(0), line
    assert httpx.get(m.group(0) + "api/traces", timeout=10).status_code == 200
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert "warning: --no-token: every local user" in err
