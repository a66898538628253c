"""The one route table (backend/routes.py): the HTTP app's data routes, the JS clients' table and the widget's
argument checks are all made from it, so they cannot drift apart."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from uopviz.backend.routes import BY_METHOD, JS_ROUTES, ROUTES, RequestError, checked_args, js_module, key


def test_the_committed_js_table_is_what_the_route_table_writes() -> None:
    assert JS_ROUTES.read_text(encoding="utf-8") == js_module(), \
        "frontend/src/routes.js is stale: run python -m uopviz.backend.routes, then npm run build in frontend/"


def test_every_route_is_an_http_operation_with_its_arguments(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for route in ROUTES:
        op = paths[route.path][route.http.lower()]
        names = {p["name"]: p["in"] for p in op.get("parameters", [])}
        assert names == {a.name: a.where for a in route.args if a.where != "body"}, route.method
        assert ("requestBody" in op) == (route.body is not None), route.method
        assert str(route.status) in op["responses"], route.method


@pytest.mark.parametrize(("method", "args", "fits"), [
    ("step", ["t", 0, 1, 2], True), ("step", ["t", -1, 1, 2], False), ("step", ["t", 0, 1], False),
    ("python", ["t", 0, 1, 2, "00112233aabbccdd"], True), ("python", ["t", 0, 1, 2, "xyz"], False),
    ("searches", [], True), ("searches", ["abc", 5], True), ("searches", ["ABC"], False),
    ("searches", [None, 0], False), ("search", [2**63], False),
    ("startBeam", ["t", 1, 2, 3], True), ("startBeam", ["t", 1, 0, 3], False), ("startBeam", ["t", 1], False),
    ("applyOpts", ["t", 1, [{"op": "UPCAST", "axis": 0, "arg": 4}]], True), ("applyOpts", ["t", 1, "x"], False),
    ("stopBeam", ["j"], True), ("nope", [], False), ("meta", "x", False),
])
def test_the_widget_checks_arguments_as_the_http_route_does(client: TestClient, method: str, args: Any,
                                                             fits: bool) -> None:
    """The widget's check (checked_args) and the HTTP route's (FastAPI, from the same table) agree: a request
    either fits both or is a 422 in both."""
    try:
        checked_args(method, args)
        widget_fits = True
    except RequestError:
        widget_fits = False
    assert widget_fits == fits
    route = BY_METHOD.get(method)
    if route is None or not isinstance(args, list) or len(args) < route.required():
        return
    path, query, body = route.path, {}, {}
    for arg, value in zip(route.args, args):
        if arg.where == "path":
            path = path.replace(f"{{{arg.name}}}", str(value))
        elif arg.where == "query" and value is not None:
            query[arg.name] = value
        elif arg.where == "body":
            body[arg.name] = value
    sent = client.request(route.http, path, params=query, json=body if route.body is not None else None)
    assert (sent.status_code == 422) == (not fits), (method, args, sent.json())


def test_a_static_key_names_every_argument_of_its_route() -> None:
    assert key("searches", "abc") == "searches/abc/*/*"
    assert key("step", "t", 0, 1, 2) == "step/t/0/1/2"
    assert key("meta") == "meta"
