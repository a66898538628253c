"""Issue 31 item 4: a node says which Tensor op and which user line made it, in the inspector and in the listing;
a gradient's node names the forward op it differentiates ("gradient of relu at file:line")."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from uopviz.backend.child import base_and_token, served

import uopviz
from tests.browser.conftest import log_in
from tests.browser.support import api, wait_drawn
from uopviz import Tensor

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.slow
LINES: dict[str, int] = {}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`uopviz serve` of a saved trace of a forward (matmul, relu, sum) and its backward."""
    rng = np.random.default_rng(1)
    x = Tensor(rng.random((8, 16), dtype=np.float32), device="CPU")
    w = Tensor(rng.random((16, 4), dtype=np.float32), requires_grad=True, device="CPU")
    with uopviz.trace() as tr:
        LINES["relu"] = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        loss = (x @ w).relu().sum()
        loss.backward()
        assert w.grad is not None
        w.grad.realize()
    path = tmp_path_factory.mktemp("provenance") / "grads.json"
    tr.save(path)
    with served(str(tmp_path_factory.mktemp("cache")), str(path)) as url:
        yield url


def test_the_inspector_and_the_listing_name_the_tensor_op_and_line(browser: Browser, recorded: str,
                                                                   shots: Path) -> None:
    server = base_and_token(recorded)[0]
    page = browser.new_page(viewport={"width": 1600, "height": 950})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    log_in(page, recorded, server)
    detail = api(page, server, "traces/grads")
    schedule = next(c for c in detail["contexts"] if c["kind"] == "schedule")
    step = api(page, server, f"traces/grads/contexts/{schedule['index']}/passes/0/steps/0")
    grad = next(n for n in step["nodes"] if (n.get("origin") or {}).get("grad_of", {}) and
                n["origin"]["grad_of"]["op"] == "Tensor.relu")
    page.goto(f"{server}#/t/grads/c/{schedule['index']}/p/0/s/0/n/{grad['id']}")
    wait_drawn(page, f"grads/{schedule['index']}/0/0")
    origin = page.locator(".uv-inspector .uv-origin")
    assert origin.inner_text() == f"gradient of relu at test_provenance_ui.py:{LINES['relu']}"
    assert "loss.backward()" in (origin.get_attribute("title") or "")
    page.screenshot(path=shots / "provenance-gradient.png")

    kernel = next(c for c in detail["contexts"] if c["kind"] == "kernel")
    linear = next(p for p in kernel["passes"] if p["name"] == "linearize")
    page.goto(f"{server}#/t/grads/c/{kernel['index']}/p/{linear['index']}/s/{linear['steps']}")
    wait_drawn(page, f"grads/{kernel['index']}/{linear['index']}/{linear['steps']}")
    comments = page.locator(".uv-listing .uv-line-origin").all_inner_texts()
    assert comments and all(c.startswith("// ") and " at test_provenance_ui.py:" in c for c in comments)
    page.screenshot(path=shots / "provenance-listing.png")
    assert not errors, errors
    page.close()
