"""Issue 11: the API runs scripts and reads files, so every route wants the token `uopviz serve` makes at start
and prints in its URL, as JupyterLab does. It is accepted as the cookie the server sets, an `Authorization: token
X` (or `Bearer X`) header, or ?token=; opening the printed URL sets the cookie (HttpOnly, SameSite=Strict, named
per port) and sends the browser on to the same URL without the token. Without a valid token the API answers 401
JSON and the page says to open the printed URL. `--no-token` turns it off, only when asked, with a warning."""

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

from backend import security
from backend.app import create_app
from backend.child import base_and_token, served
from backend.recording import record_zoo
from backend.security import Access
from backend.store import TraceStore

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
                                  "/api/beam/nope/events", "/api/nothing", "/openapi.json"])
def test_api_routes_without_the_token_are_401_json(app: FastAPI, path: str) -> None:
    r = client(app).get(path)
    assert r.status_code == 401 and r.headers["content-type"] == "application/json", r.text
    assert "open the URL `uopviz serve` printed" in r.json()["detail"] and set(r.json()) == {"detail"}
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_state_changing_routes_without_the_token_do_nothing(app: FastAPI) -> None:
    r = client(app).post("/api/traces/max-small/contexts/1/opts", json={"opts": []})
    assert r.status_code == 401
    assert [t["id"] for t in client(app, headers={"Authorization": f"token {TOKEN}"}).get("/api/traces").json()] == \
        ["max-small"]


@pytest.mark.parametrize("path", ["/", "/docs", "/app.js", "/?x=1"])
def test_the_page_without_the_token_says_to_open_the_printed_url(app: FastAPI, path: str) -> None:
    r = client(app).get(path)
    assert r.status_code == 401 and r.headers["content-type"].startswith("text/html")
    assert "Open the URL that <code>uopviz serve</code> printed" in r.text and "the uopviz UI" not in r.text


@pytest.mark.parametrize("how", ["token", "Bearer", "bearer", "query", "cookie"])
def test_the_token_is_accepted_as_a_header_a_query_parameter_or_the_cookie(app: FastAPI, how: str) -> None:
    c = client(app)
    if how == "query":
        r = c.get("/api/traces", params={"token": TOKEN})
    elif how == "cookie":
        c.cookies.set(COOKIE, TOKEN)
        r = c.get("/api/traces")
    else:
        r = c.get("/api/traces", headers={"Authorization": f"{how} {TOKEN}"})
    assert r.status_code == 200 and r.json()[0]["id"] == "max-small"


@pytest.mark.parametrize("wrong", ["x", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), f" {TOKEN}x", "tøken-ü", "\x7f"])
def test_a_wrong_token_is_refused_whichever_way_it_comes(app: FastAPI, wrong: str) -> None:
    c = client(app)
    assert c.get("/api/traces", params={"token": wrong}).status_code == 401
    assert c.get("/api/traces", headers={"Authorization": f"token {wrong}".encode()}).status_code == 401
    assert c.get("/api/traces", headers={"Cookie": f"{COOKIE}={wrong}".encode()}).status_code == 401
    assert c.get("/", params={"token": wrong}).status_code == 401  # and no cookie for it
    assert "set-cookie" not in c.get("/", params={"token": wrong}).headers


def test_another_servers_cookie_or_another_scheme_is_no_token(app: FastAPI) -> None:
    c = client(app)
    c.cookies.set(f"uopviz-token-{PORT + 1}", TOKEN)  # cookies are per host, not per port
    assert c.get("/api/traces").status_code == 401
    assert client(app).get("/api/traces", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401


def test_opening_the_printed_url_sets_a_strict_cookie_and_drops_the_token_from_the_url(app: FastAPI) -> None:
    c = client(app)
    r = c.get(f"/?token={TOKEN}")
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={TOKEN};")
    attrs = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attrs
    assert c.get("/").text == "<!doctype html><title>the uopviz UI</title>"  # the cookie now does
    assert c.get("/api/traces").status_code == 200
    # the rest of the URL stays as it was (the view state the page keeps there)
    r = client(app).get(f"/docs?a=1&token={TOKEN}&b=%2Fx%20y&token=again&c")
    assert r.status_code == 303 and r.headers["location"] == "/docs?a=1&b=%2Fx%20y&c"


@pytest.mark.parametrize("path", ["//evil.example/", "/\\evil.example/", "/%2F%2Fevil.example"])
def test_the_redirect_stays_on_this_server(app: FastAPI, path: str) -> None:
    r = client(app).get(f"{path}?token={TOKEN}")
    assert r.status_code == 303
    where = r.headers["location"]
    assert where.startswith("/") and not where.startswith(("//", "/\\")), where


def test_tokens_are_compared_with_compare_digest(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = security.secrets.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(security.secrets, "compare_digest", spy)
    assert client(app).get("/api/traces", params={"token": "guess"}).status_code == 401
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
