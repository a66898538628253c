"""Issue 31 item 5: a trace that recorded a `uopviz.profile()` block shows its kernel launches in the Profile tab, as
a timeline and a table (time, share, GFLOP/s, GB/s, roofline), and a click opens the kernel that ran."""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`uopviz serve` of a saved trace whose program ran inside `uopviz.profile()`: a matmul, then a row sum."""
    a, b = (Tensor(np.full((64, 64), v, np.float32), device="CPU") for v in (1.0, 2.0))
    with uopviz.trace() as tr, uopviz.profile():
        ((a @ b).relu() + 1).sum(axis=1).realize()
    path = tmp_path_factory.mktemp("profiled") / "profiled.json"
    tr.save(path)
    with served(str(tmp_path_factory.mktemp("cache")), str(path)) as url:
        yield url


def test_the_profile_tab_draws_the_launches_and_opens_a_kernel(browser: Browser, profiled: str, shots: Path) -> None:
    server = base_and_token(profiled)[0]
    page = browser.new_page(viewport={"width": 1600, "height": 950})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    log_in(page, profiled, server)
    detail = api(page, server, "traces/profiled")
    launches = detail["profiles"][0]["launches"]
    assert len(launches) >= 2 and all(l["context"] is not None for l in launches)
    assert abs(sum(l["share"] for l in launches) - 1) < 1e-9
    assert all(l["origin"]["file"].endswith("test_profile_ui.py") for l in launches)  # the line that made each
    first = launches[0]["context"]
    page.goto(f"{server}#/t/profiled/c/{first}/p/0/s/0/v/profile")
    wait_drawn(page, f"profiled/{first}/0/0")

    rows = page.locator(".uv-launch-row")
    assert rows.count() == len(launches) and page.locator(".uv-timeline .uv-launch").count() == len(launches)
    slowest = max(range(len(launches)), key=lambda i: launches[i]["time_s"])
    assert rows.first.get_attribute("data-launch") == str(slowest)  # most time first
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[0].splitlines() == [launches[slowest]["kernel"], "tune"]  # the name, its tune button under it
    assert cells[3] == f"{launches[slowest]['share'] * 100:.1f}%"
    made = launches[slowest]["origin"]
    assert cells[1] == f"{made['op'].removeprefix('Tensor.')} at test_profile_ui.py:{made['line']}"
    assert cells[6].strip() == f"{launches[slowest]['roof'] * 100:.0f}%"
    lines = page.locator(".uv-line-row")  # the launches by Tensor line: here all one line's
    assert lines.count() == len({(l["origin"]["line"], bool(l["origin"]["grad_of"])) for l in launches}) >= 1
    assert lines.first.locator("td").first.inner_text().startswith(f"test_profile_ui.py:{made['line']}")

    other = next(i for i, l in enumerate(launches) if l["context"] != first)
    page.click(f".uv-launch-row[data-launch='{other}']")  # a click opens the kernel it ran, in the same tab
    ci = launches[other]["context"]
    wait_drawn(page, f"profiled/{ci}/0/0")
    assert page.url.endswith(f"#/t/profiled/c/{ci}/p/0/s/0/v/profile")
    assert "uv-active" in (page.get_attribute(f".uv-timeline .uv-launch[data-launch='{other}']", "class") or "")
    assert launches[other]["kernel"] in page.inner_text(".uv-crumbs")
    page.screenshot(path=shots / "profile-tab.png")
    tune = page.locator(f".uv-launch-row[data-launch='{slowest}'] .uv-tune-kernel")  # a button tunes the kernel
    tune.click()
    ci = launches[slowest]["context"]
    page.wait_for_function(f"location.hash.endsWith('/c/{ci}/p/0/s/0/v/beam')")
    page.wait_for_selector(".uv-beam-start")
    page.close()
    assert not errors, errors
