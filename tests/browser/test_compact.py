"""Issue 31 at a real kernel's size and in half a notebook: the instruction listing says a run of alike
declarations (a kernel's registers) once and opens it on a click, operands wrap whole; the legend starts folded,
so it covers no node; a narrow view starts with its sidebar folded (☰ shows it), where pass names stay one line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.support import api, gemm_context, wait_drawn

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow


def alike_run(page: Page, server: str) -> tuple[str, int]:
    """A zoo kernel's linearize step ("trace/context/pass/step") whose program declares three or more alike
    registers in a row, and the longest such run."""
    best: tuple[str, int] = ("", 0)
    for t in api(page, server, "traces"):
        for c in api(page, server, f"traces/{t['id']}")["contexts"]:
            p = next((p for p in c["passes"] if p["name"] == "linearize" and p["steps"]), None)
            if c["kind"] != "kernel" or p is None:
                continue
            step = api(page, server, f"traces/{t['id']}/contexts/{c['index']}/passes/{p['index']}/steps/{p['steps']}")
            table = {n["id"]: n for n in step["nodes"]}
            lines = [table[s] for s in table[step["root"]]["src"] if table[s]["op"] != "Const"]
            run = longest = 0
            for a, b in zip([None, *lines], lines):
                same = a is not None and not b["src"] and not a["src"] and (a["op"], a["dtype"], a["shape"], a["arg"]) \
                    == (b["op"], b["dtype"], b["shape"], b["arg"])
                run = run + 1 if same else 1
                longest = max(longest, run)
            if longest > best[1]:
                best = (f"{t['id']}/{c['index']}/{p['index']}/{p['steps']}", longest)
    return best


def test_alike_declarations_are_one_line_that_opens(page: Page, server: str, shots: Path) -> None:
    view, n = alike_run(page, server)
    assert n >= 3, "no zoo kernel declares three alike registers in a row (a matmul's register tile did)"
    tid, ci, pi, k = view.split("/")
    page.goto(f"{server}#/t/{tid}/c/{ci}/p/{pi}/s/{k}")
    wait_drawn(page, view)
    button = page.locator(".uv-graph-tools .uv-listing")
    if "uv-on" not in (button.get_attribute("class") or "").split():  # late stages open on their listing
        button.click()
    heads = page.locator("details.uv-line-run > summary .uv-line-src").all_inner_texts()
    assert any(f"×{n} alike" in text for text in heads), heads
    run = page.locator("details.uv-line-run").first
    assert run.locator(":scope > .uv-line").first.is_hidden()
    run.locator("summary").click()
    assert run.locator(":scope > .uv-line").first.is_visible()
    # operands whole: no operand column cuts its text
    cut = page.eval_on_selector_all(".uv-listing .uv-line-src",
                                    "els => els.filter(e => e.scrollWidth > e.clientWidth + 1).length")
    assert cut == 0
    page.screenshot(path=shots / "listing-alike-run.png")


def test_the_legend_starts_folded_and_opens(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 1600, "height": 950})
    page.goto(f"{server}#/t/gemm/c/0/p/0/s/0")
    wait_drawn(page, "gemm/0/0/0")
    assert page.locator(".uv-legend-body").is_hidden()
    page.click(".uv-legend-toggle")
    assert page.locator(".uv-legend-body").is_visible()


def test_a_narrow_view_folds_its_sidebar_and_keeps_pass_names_on_one_line(page: Page, server: str,
                                                                          shots: Path) -> None:
    ci = gemm_context(page, server)
    page.set_viewport_size({"width": 560, "height": 600})
    page.goto(f"{server}#/t/gemm/c/{ci}/p/0/s/0")
    wait_drawn(page, f"gemm/{ci}/0/0")
    assert page.locator(".uv-side").is_hidden()
    page.click(".uv-side-button")
    assert page.locator(".uv-side").is_visible()
    heights = page.eval_on_selector_all(".uv-side .uv-pass-name",
                                        "els => els.map(e => e.getBoundingClientRect().height)")
    line = page.eval_on_selector(".uv-side .uv-pass-name", "e => parseFloat(getComputedStyle(e).lineHeight) || 18")
    assert heights and max(heights) <= line * 1.2, (max(heights), line)
    titles = page.eval_on_selector_all(".uv-side .uv-pass", "els => els.map(e => e.title)")
    assert all(titles), "a cut name keeps its whole text in its title"
    page.screenshot(path=shots / "narrow-sidebar.png")
    page.keyboard.press("b")
    assert page.locator(".uv-side").is_hidden()
