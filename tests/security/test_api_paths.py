"""Issue 11: requests that gave a 500 (a 100 KB URL path: "File name too long"; a NUL byte in a static path) and
their kin are 4xx JSON; and whatever a request carries in the headers the guard reads (cookies, Authorization,
Host, Origin, Content-Type), the answer is a 4xx, never a 500."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_to_bytes

import anyio
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from uopviz.backend.app import create_app
from uopviz.backend.security import Access
from uopviz.backend.store import TraceStore

TOKEN = "the-token-of-the-path-tests"
LONG = "a" * 100_000


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    dist = tmp_path_factory.mktemp("dist")
    (dist / "index.html").write_text("<!doctype html><title>uopviz</title>")
    (dist / "app.js").write_text("console.log(1)")
    allowed = tmp_path_factory.mktemp("allowed")
    return create_app(TraceStore("CPU"), dist=dist, access=Access(TOKEN, 8000, loopback=True), allow_dirs=[allowed])


@pytest.fixture(scope="module")
def client(app: FastAPI) -> TestClient:
    return TestClient(app, base_url="http://127.0.0.1:8000", headers={"Authorization": f"token {TOKEN}"},
                      raise_server_exceptions=False)


def get(app: FastAPI, raw_path: str, query: str = "", token: bool = True) -> tuple[int, dict[str, str], bytes]:
    """GET raw_path (percent-encoded, of any length: HTTP clients refuse long URLs) as the server hands it to the app;
    (status, headers, body)."""
    headers = [(b"host", b"127.0.0.1:8000")] + ([(b"authorization", f"token {TOKEN}".encode())] if token else [])
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": unquote_to_bytes(raw_path).decode("utf-8", "replace"), "raw_path": raw_path.encode(),
             "query_string": query.encode(), "root_path": "", "headers": headers, "client": ("127.0.0.1", 9),
             "server": ("127.0.0.1", 8000)}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(app, scope, receive, send)
    start = sent[0]
    return (start["status"], {k.decode(): v.decode() for k, v in start["headers"]},
            b"".join(m.get("body", b"") for m in sent[1:]))


@pytest.mark.parametrize("path", [f"/{LONG}", f"/{LONG}.js", f"/x/{LONG}/y", "/" + "/".join(["a" * 255] * 400),
                                  "/%00", "/app%00.js", "/%00/app.js", "/app.js%00", f"/api/traces/{LONG}",
                                  "/api/traces/%00", f"/api/tuning/searches/{LONG}", f"/api/beam/{LONG}/events",
                                  "/api/beam/%00/events"])
def test_strange_paths_are_4xx_json(app: FastAPI, path: str) -> None:
    status, headers, body = get(app, path)
    assert status in (400, 404, 422) and headers["content-type"] == "application/json", (status, body[:200])
    assert isinstance(json.loads(body)["detail"], str) and len(body) < 200_000


@pytest.mark.parametrize("body", [{"path": LONG}, {"script": LONG + ".py"}, {"path": "\x00"}, {"script": "a\x00.py"},
                                  {"path": "/" + "/".join(["a" * 255] * 400)}])
def test_strange_file_names_are_4xx_json(client: TestClient, body: dict[str, str]) -> None:
    r = client.post("/api/traces", json=body)
    assert 400 <= r.status_code < 500 and r.json()["detail"], r.status_code


@pytest.mark.parametrize("headers", [
    {"Cookie": "uopviz-token-8000"}, {"Cookie": "=;;=;\x7f"}, {"Cookie": "uopviz-token-8000=\"x"},
    {"Authorization": "token"}, {"Authorization": "token "}, {"Authorization": ""}, {"Authorization": "Bearer \t"},
    {"Authorization": "token \xff\xfe"}])
def test_strange_credentials_are_401(app: FastAPI, headers: dict[str, str]) -> None:
    c = TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
    assert c.get("/api/traces", headers={k: v.encode("latin-1") for k, v in headers.items()}).status_code == 401


@pytest.mark.parametrize("query", ["token=%ff%fe", "token", "token=&token=", "%00=%00", "token=" + LONG, "&&=&"])
def test_strange_token_parameters_are_no_token(app: FastAPI, query: str) -> None:
    assert get(app, "/api/traces", query, token=False)[0] == 401
    status, headers, _ = get(app, "/no-such-file", query, token=False)  # past the guard: the page's files need none
    assert status == 404 and "set-cookie" not in headers


@pytest.mark.parametrize("headers", [
    {"Host": "\xff"}, {"Host": "[::1]:99999999"}, {"Host": "[" * 1000}, {"Origin": "http://[::1"},
    {"Origin": "http://127.0.0.1:99999999"}, {"Referer": "\xff"}, {"Content-Type": "\xff"},
    {"Sec-Fetch-Site": "\xff"}])
def test_strange_guard_headers_are_4xx(client: TestClient, headers: dict[str, str]) -> None:
    r = client.post("/api/traces", content=b'{"zoo": "nope"}', headers={
        "Content-Type": "application/json", **{k: v.encode("latin-1") for k, v in headers.items()}})  # type: ignore[dict-item]
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
