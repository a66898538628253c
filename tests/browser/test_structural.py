"""Issue 31 item 3: a whole-graph pass that re-spells one node is said once. The zoo gemm's "hardware ids" step turns
the THREAD Range into a Special: the page names that change and the ancestors rebuilt over it, and draws no second
copy of the kernel beside the new one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.support import api, gemm_context, wait_drawn

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow


def test_hardware_ids_is_said_once(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    passes = api(page, server, "traces/gemm")["contexts"][ci]["passes"]
    pi = next(p["index"] for p in passes if p["name"] == "hardware ids")
    step = api(page, server, f"traces/gemm/contexts/{ci}/passes/{pi}/steps/1")
    nodes = len(step["nodes"])
    # the API: one Range re-spelled, the rest rebuilt (it reported every node removed and added)
    assert len(step["added"]) + len(step["removed"]) <= 4 and len(step["rebuilt"]) > nodes // 2, step["summary"]
    page.goto(f"{server}#/t/gemm/c/{ci}/p/{pi}/s/1")
    wait_drawn(page, f"gemm/{ci}/{pi}/1")
    lines = page.locator(".uv-step-summary li").all_inner_texts()
    assert lines[0] == "Range r0 THREAD → Special tidx0", lines
    assert any(line.startswith(f"{len(step['rebuilt'])} nodes rebuilt over") for line in lines), lines
    removed = page.locator(".uv-node.uv-removed").count()  # the removed nodes are drawn beside (on by default)
    assert removed <= len(step["removed"]), removed  # no second kernel beside the new one
    page.screenshot(path=shots / "gemm-hardware-ids-summary.png")


def test_linearize_diffs_as_listings(page: Page, server: str, shots: Path) -> None:
    """A step that makes or changes a Linear program shows its listing before and after, line by line (the node diff's
    Linear row was one paragraph of every operand), and no Linear row in the node diff."""
    ci = gemm_context(page, server)
    passes = api(page, server, "traces/gemm")["contexts"][ci]["passes"]
    p = next(p for p in passes if p["name"] == "linearize" and p["steps"])
    k = p["steps"]
    page.goto(f"{server}#/t/gemm/c/{ci}/p/{p['index']}/s/{k}")
    wait_drawn(page, f"gemm/{ci}/{p['index']}/{k}")
    diff = page.locator(".uv-listing-diff")
    page.wait_for_function("() => document.querySelector('.uv-listing-diff')?.textContent.startsWith('---')")
    lines = diff.inner_text().split("\n")
    added = [line for line in lines if line.startswith("+") and not line.startswith("+++")]
    assert added and any("Store" in line for line in lines), lines[:20]
    assert all(len(line) < 200 for line in lines)  # a line per instruction, not a paragraph of operands
    assert page.locator(".uv-changes .uv-change-text", has_text="Linear").count() == 0
    page.screenshot(path=shots / "gemm-linearize-listing-diff.png")
