"""Issue 11: a page on another site must not change anything through the API, whatever the framework's defaults.
Every state-changing request whose Origin (else Referer) is not this server's own, or whose Sec-Fetch-Site says
it came from elsewhere, is a 403; a body that is not sent as application/json is a 415 (a cross-site text/plain
POST is a "simple request", sent without a CORS preflight). Nothing is done for a refused request."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from uopviz.backend.app import create_app
from uopviz.backend.security import Access
from uopviz.backend.store import TraceStore

TOKEN = "the-token-of-the-origin-tests"
PORT = 8124
OWN = f"http://127.0.0.1:{PORT}"
OPTS = "/api/traces/max-small/contexts/1/opts"
BODY = '{"opts": [{"op": "SPLIT", "axis": 0, "arg": [2, "UPCAST", false]}]}'


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    store = TraceStore("CPU")
    store.record_zoo("max", small=True)
    return create_app(store, dist=tmp_path_factory.mktemp("no-dist"), access=Access(TOKEN, PORT, loopback=True))


def post(app: FastAPI, headers: dict[str, str], content_type: str | None = "application/json") -> int:
    """POST the opts route with the token, as the page does; its status."""
    c = TestClient(app, base_url=OWN, headers={"Authorization": f"token {TOKEN}"})
    if content_type is not None:
        headers = {"Content-Type": content_type, **headers}
    return c.post(OPTS, content=BODY, headers=headers).status_code


def traces(app: FastAPI) -> list[str]:
    return [t["id"] for t in TestClient(app, base_url=OWN, headers={"Authorization": f"token {TOKEN}"})
            .get("/api/traces").json()]


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"}, {"Origin": "null"}, {"Origin": f"http://localhost:{PORT}"},
    {"Origin": f"http://127.0.0.1:{PORT + 1}"}, {"Origin": f"https://127.0.0.1:{PORT}"}, {"Origin": "garbage"},
    {"Referer": "http://evil.example/page.html"}, {"Referer": f"http://127.0.0.1:{PORT + 1}/"},
    {"Origin": "http://evil.example", "Referer": f"{OWN}/"},
    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "cross-site", "Origin": OWN}])
def test_state_changing_requests_from_another_site_are_403_and_do_nothing(app: FastAPI,
                                                                         headers: dict[str, str]) -> None:
    before = traces(app)
    assert post(app, headers) == 403
    assert traces(app) == before


@pytest.mark.parametrize("headers", [
    {}, {"Origin": OWN}, {"Origin": OWN.upper()}, {"Referer": f"{OWN}/#/t/max-small/c/1/p/0/s/0"},
    {"Sec-Fetch-Site": "same-origin", "Origin": OWN}])
def test_the_servers_own_pages_and_other_clients_may(app: FastAPI, headers: dict[str, str]) -> None:
    assert post(app, headers) == 200


@pytest.mark.parametrize("content_type", [None, "text/plain", "text/plain;charset=UTF-8",
                                          "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                          "application/json-patch+json"])
def test_bodies_not_sent_as_json_are_415(app: FastAPI, content_type: str | None) -> None:
    before = traces(app)
    assert post(app, {"Origin": OWN}, content_type) == 415
    assert traces(app) == before


def test_json_with_a_charset_is_json(app: FastAPI) -> None:
    assert post(app, {}, "application/json; charset=utf-8") == 200


def test_a_text_plain_post_from_another_site_is_refused_even_without_cookies(app: FastAPI) -> None:
    """What a cross-site form or `fetch(..., {mode: "no-cors"})` sends: refused before anything else is looked at."""
    c = TestClient(app, base_url=OWN)
    r = c.post(OPTS, content=BODY, headers={"Content-Type": "text/plain", "Origin": "http://evil.example",
                                            "Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403 and "another site" in r.json()["detail"]
