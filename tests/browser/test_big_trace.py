"""Issue 31: a trace of hundreds of kernels opens lazily. The page draws its first graph from the outline and that
one step (no pass replayed for the outline), and a kernel far down the list opens with its pass's folded steps,
which come with the step."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from uopviz.backend.child import base_and_token, served
from uopviz.backend.store import TraceStore

from tests.browser.conftest import log_in
from tests.browser.support import api, wait_drawn

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.slow
COPIES = 100  # the zoo gemm's kernels this many times over: 200 kernel contexts


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`uopviz serve` of a file holding the zoo gemm's kernel contexts COPIES times (a saved trace may name a node
    from any number of contexts); yields the printed URL."""
    doc = TraceStore("CPU").record_zoo("gemm").trace.to_dict()
    kernels = [c for c in doc["contexts"] if c["kind"] == "kernel"]
    doc["contexts"] = [c for c in doc["contexts"] if c["kind"] != "kernel"] + kernels * COPIES
    path = tmp_path_factory.mktemp("big") / "big.json"
    path.write_text(json.dumps(doc))
    with served(str(tmp_path_factory.mktemp("cache")), str(path)) as url:
        yield url


def test_a_big_trace_draws_from_its_outline_and_one_step(browser: Browser, big: str, shots: Path) -> None:
    server = base_and_token(big)[0]
    page = browser.new_page(viewport={"width": 1600, "height": 950})
    log_in(page, big, server)
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url.removeprefix(server)) if "/api/" in r.url else None)
    page.goto(server)
    page.wait_for_function("() => document.querySelector('.uv-app')?.dataset.drawn")
    detail = api(page, server, "traces/big")
    assert len(detail["contexts"]) == 1 + 2 * COPIES
    assert all("folded" not in p for c in detail["contexts"] for p in c["passes"])  # the outline replays nothing
    assert [u for u in asked if "/steps/" in u] == [f"api/traces/big/contexts/{detail['contexts'][2]['index']}"
                                                    "/passes/0/steps/0"]  # the view drawn, nothing before it

    # a kernel near the end, at a pass whose steps some are folded: the step label says so, from the step alone
    ci = len(detail["contexts"]) - 1
    passes = detail["contexts"][ci]["passes"]
    pi, folded = next((p["index"], f) for p in passes if p["steps"]
                      if (f := api(page, server, f"traces/big/contexts/{ci}/passes/{p['index']}/steps/0")["folded"]))
    page.evaluate(f"location.hash = '#/t/big/c/{ci}/p/{pi}/s/0'")
    wait_drawn(page, f"big/{ci}/{pi}/0")
    assert page.locator(".uv-step-label").get_attribute("data-folded") == str(len(folded))
    assert f"{len(folded)} folded" in page.inner_text(".uv-step-label")
    assert page.locator(".uv-ctx").count() == len(detail["contexts"])
    page.screenshot(path=shots / "big-trace-folded.png")
    page.close()
