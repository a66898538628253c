"""Issue 31 item 2: a schedule's graph is drawn by kernel. After "kernel split" each Call of the zoo gemm's schedule is
one box over its buffers, titled with its kernel's name and saying how big its kernel is; `k` draws the kernels'
bodies whole again."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.support import api, wait_drawn

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow


def drawn(page: Page) -> int:
    return int(page.inner_text(".uv-drawn").split()[0])


def test_each_call_is_a_box_and_k_draws_the_kernels(page: Page, server: str, shots: Path) -> None:
    passes = api(page, server, "traces/gemm")["contexts"][0]["passes"]
    pi = next(p["index"] for p in passes if p["name"] == "memory plan")
    step = api(page, server, f"traces/gemm/contexts/0/passes/{pi}/steps/0")
    calls = [n for n in step["nodes"] if n["op"] == "Call"]
    assert len(calls) == 2  # B packed into panels, then the matmul
    page.goto(f"{server}#/t/gemm/c/0/p/{pi}/s/0")
    wait_drawn(page, f"gemm/0/{pi}/0")
    boxes = page.locator(".uv-node", has_text="kernel of")
    assert boxes.count() == len(calls)
    kernels = [c["label"] for c in api(page, server, "traces/gemm")["contexts"] if c["kind"] == "kernel"]
    titles = page.eval_on_selector_all(".uv-node:has(.uv-node-expr)", "els => els.map(e => e.querySelector("
                                       "'.uv-node-title').textContent).filter(t => t.startsWith('Call'))")
    assert sorted(titles) == sorted(f"Call {k}" for k in kernels), titles  # each box names the kernel it runs
    assert page.locator(".uv-node", has_text="Store").count() == 0  # the kernels' bodies are folded into their Calls
    grouped = drawn(page)
    page.screenshot(path=shots / "gemm-schedule-calls.png")

    page.keyboard.press("k")
    page.wait_for_function("() => ![...document.querySelectorAll('.uv-node')].some(n => n.textContent.includes("
                           "'kernel of'))")
    assert drawn(page) > grouped
    assert page.locator(".uv-node", has_text="Store").count() >= len(calls)


def test_one_call_at_a_time_draws_its_kernel_from_the_inspector(page: Page, server: str, shots: Path) -> None:
    """The inspector of a Call box draws that Call's kernel in place, the other Call staying a box; it folds again."""
    passes = api(page, server, "traces/gemm")["contexts"][0]["passes"]
    pi = next(p["index"] for p in passes if p["name"] == "memory plan")
    page.goto(f"{server}#/t/gemm/c/0/p/{pi}/s/0")
    wait_drawn(page, f"gemm/0/{pi}/0")
    grouped = drawn(page)
    page.locator(".uv-node", has_text="kernel of").first.click()
    page.click(".uv-inspector .uv-open:text('draw its kernel here')")
    page.wait_for_function("() => document.querySelectorAll('.uv-node').length && [...document.querySelectorAll("
                           "'.uv-node')].filter(n => n.textContent.includes('kernel of')).length === 1")
    assert grouped < drawn(page) and page.locator(".uv-node", has_text="Store").count() >= 1
    page.screenshot(path=shots / "gemm-schedule-one-call.png")
    reopens_with_its_call_opened(page, f"gemm/0/{pi}/0", grouped)
    page.click(".uv-inspector .uv-open:text('fold its kernel')")
    page.wait_for_function("() => [...document.querySelectorAll('.uv-node')].filter(n => n.textContent.includes("
                           "'kernel of')).length === 2")
    assert drawn(page) == grouped and "/e/" not in page.url


def reopens_with_its_call_opened(page: Page, view: str, grouped: int) -> None:
    """The opened Call is in the URL (the Call selected is the one opened), and a reload draws it opened again."""
    call = page.url.split("/n/")[1].split("/")[0]
    assert page.url.endswith(f"/e/{call}"), page.url
    opened = drawn(page)
    page.reload()
    wait_drawn(page, view)
    assert drawn(page) == opened > grouped
    assert page.locator(".uv-node", has_text="kernel of").count() == 1
    assert page.locator(f".uv-node[data-ref='{call}']").count() == 1  # the Call, selected (the link's n part)
    page.wait_for_selector(".uv-inspector .uv-open:text('fold its kernel')")


def test_a_calls_inspector_opens_its_kernel(page: Page, server: str) -> None:
    """A Call box named by its kernel opens that kernel's context from its inspector."""
    contexts = api(page, server, "traces/gemm")["contexts"]
    pi = next(p["index"] for p in contexts[0]["passes"] if p["name"] == "memory plan")
    page.goto(f"{server}#/t/gemm/c/0/p/{pi}/s/0")
    wait_drawn(page, f"gemm/0/{pi}/0")
    box = page.locator(".uv-node", has_text="kernel of").first
    label = (box.locator(".uv-node-title").text_content() or "").removeprefix("Call ")
    box.click()
    page.click(f".uv-inspector .uv-open:text('open kernel {label}')")
    ci = next(c["index"] for c in contexts if c["label"] == label)
    wait_drawn(page, f"gemm/{ci}/0/0")
    assert page.url.endswith(f"#/t/gemm/c/{ci}/p/0/s/0"), page.url  # the opened Calls and node belong to the schedule
