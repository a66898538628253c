"""A @uopviz.function in the web UI: the program's schedule shows one Call of the function, and its inspector opens
the context where the function's body was scheduled. The server runs a script, as `uopviz serve script.py` does."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.support import auth, served_script

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import numpy as np
    import uopviz
    from uopviz import Tensor

    @uopviz.function
    def layer(x, w):
        return (x @ w).relu() * 2

    w = Tensor(np.ones((4, 3), np.float32))
    print(layer(Tensor(np.ones((5, 4), np.float32)), w).numpy())
""")


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`uopviz serve` of a script that calls a @function (its folder is the one the server may read)."""
    with served_script(tmp_path_factory, "calls_a_function.py", SCRIPT) as url:
        yield url


def test_a_call_of_a_function_opens_its_context(page: Page, server: str, shots: Path) -> None:
    trace = page.request.get(f"{server}api/traces/calls_a_function", headers=auth(page, server)).json()
    kinds = [(c["name"], c["kind"]) for c in trace["contexts"]]
    assert ("function layer", "function") in kinds
    plan = next(p for p in trace["contexts"][0]["passes"] if p["name"] == "memory plan")
    view = f"calls_a_function/0/{plan['index']}/{plan['steps']}"
    page.goto(f"{server}#/t/calls_a_function/c/0/p/{plan['index']}/s/{plan['steps']}")
    page.wait_for_function("v => document.querySelector('.uv-app')?.dataset.drawn === v", arg=view)
    page.locator(".uv-node[data-op='Call']").first.click()
    page.wait_for_selector(".uv-inspector .uv-open")
    assert page.inner_text(".uv-inspector .uv-open") == "open function layer"
    page.screenshot(path=shots / "function-call-inspector.png")
    page.click(".uv-inspector .uv-open")
    fn = kinds.index(("function layer", "function"))
    page.wait_for_function("v => document.querySelector('.uv-app')?.dataset.drawn === v",
                           arg=f"calls_a_function/{fn}/0/0")
    assert "function layer" in page.inner_text(".uv-crumbs")
