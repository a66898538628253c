"""A static export (`uopviz export`) opens from a file in Chromium with the network off: the graph draws, the
keyboard steps it once the pointer is over it, its view is in the URL (a reload opens it again), the kernel's source
is there, and nothing is asked of any server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from uopviz.backend.store import TraceStore

from tests.browser.support import wait_drawn
from tests.browser.test_schedule_calls import drawn, reopens_with_its_call_opened

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from uopviz.trace import Trace

pytestmark = pytest.mark.slow


def test_the_exported_page_shows_the_trace_offline(browser: Browser, tmp_path: Path, shots: Path) -> None:
    trace = tmp_path / "gemm.uopviz-trace.json"
    recorded = TraceStore("CPU").record_zoo("gemm").trace
    recorded.save(trace)
    ci = next(i for i, c in enumerate(recorded.contexts) if c.name.startswith("r_"))  # the matmul, after B's packing
    out = tmp_path / "gemm.html"
    run = subprocess.run([sys.executable, "-m", "uopviz.cli", "export", str(trace), "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"wrote {out}" in run.stdout

    context = browser.new_context(offline=True, viewport={"width": 1600, "height": 950})
    page = context.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())
    # it opens on the matmul (the first kernel that reduces), not on the copy before it
    wait_drawn(page, f"gemm/{ci}/0/0")
    page.click(".uv-ctx[data-name^='E_']")
    wait_drawn(page, "gemm/1/0/0")
    page.click(f".uv-ctx[data-name='{recorded.contexts[ci].name}']")
    wait_drawn(page, f"gemm/{ci}/0/0")
    assert page.locator(".uv-node[data-op='Range']").count() > 0
    page.mouse.move(5, 5)
    page.hover(".uv-main")  # the pointer over the view gives it the keys: no click needed
    page.keyboard.press("ArrowRight")
    wait_drawn(page, f"gemm/{ci}/0/1")
    assert page.url.endswith(f"#/t/gemm/c/{ci}/p/0/s/1"), page.url  # a page of its own keeps its view in the URL
    page.reload()  # and a reload (or the link) opens that view
    wait_drawn(page, f"gemm/{ci}/0/1")
    assert page.inner_text(".uv-rewrite .uv-location")  # the rule of step 1
    page.click(".uv-tab[data-tab='kernel']")
    assert "void r_" in page.inner_text(".uv-kernel-source")
    assert page.locator(".uv-opt-form").count() == 0  # read-only: no opts to apply
    page.screenshot(path=shots / "export-gemm.png")
    page.click(".uv-tab[data-tab='rewrite']")
    a_call_opened_stays_opened(page, memory_plan(recorded))
    assert all(u.startswith(("file:", "blob:", "data:")) for u in requests), requests
    assert not errors, errors
    context.close()


def memory_plan(tr: Trace) -> int:
    """The schedule's pass where each Call is a box of its own (context 0)."""
    return next(i for i, p in enumerate(tr.contexts[0].passes) if p.name == "memory plan")


def a_call_opened_stays_opened(page: Page, pi: int) -> None:
    """In the export too, the Call opened from its inspector is in the URL, and a reload draws it opened."""
    page.goto(page.url.split("#")[0] + f"#/t/gemm/c/0/p/{pi}/s/0")
    wait_drawn(page, f"gemm/0/{pi}/0")
    grouped = drawn(page)
    page.locator(".uv-node", has_text="kernel of").first.click()
    page.click(".uv-inspector .uv-open:text('draw its kernel here')")
    page.wait_for_function("() => [...document.querySelectorAll('.uv-node')].filter(n => n.textContent.includes("
                           "'kernel of')).length === 1")
    reopens_with_its_call_opened(page, f"gemm/0/{pi}/0", grouped)
