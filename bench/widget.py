"""The notebook widget in a real JupyterLab, in headless Chromium (no `uopviz serve`, no network), measured as
bench/ui.py measures the web UI:

(a) Time to first graph: from running a cell `uopviz.show(gemm)` (Shift+Enter; the zoo gemm's trace, recorded as
    `uopviz serve` records it, is made by an earlier cell) to the graph of its first step drawn. Budget: 1.5 s.
(b) Bytes per step: what the kernel sends the page over the widget's comm (websocket frames, as received) from a
    key press to the next step drawn, for every step of the gemm kernel's passes (→ within a pass, ↓ to the next).
    Budget: 200 KB.

    python bench/widget.py [--runs 5]

Needs Debian's Chromium (`chromium` on PATH), Python Playwright and JupyterLab (./dev setup installs them). Prints
medians (and maxima).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright
from support import find_chromium
from uopviz.backend.child import CHROMIUM_ARGS, jupyterlab

SETUP = "import uopviz\nfrom uopviz.backend.store import TraceStore\ngemm = TraceStore('CPU').record_zoo('gemm').trace"
SHOW = "uopviz.show(gemm)"
NEW_VIEW_DRAWN = "() => { const a = document.querySelector('.uv-app'); return a?.dataset.drawn && !a.dataset.seen; }"


def write_notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
             for s in (SETUP, SHOW)]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                                              "display_name": "Python 3"}},
                                "nbformat": 4, "nbformat_minor": 5}))


def run_cell(page: Page, index: int) -> float:
    """Run a cell (click, Shift+Enter); the page's clock when the key went down."""
    page.locator(".jp-Notebook .jp-Cell .cm-content").nth(index).click()
    t0 = page.evaluate("performance.now()")
    page.keyboard.press("Shift+Enter")
    return t0


def first_graph(page: Page, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = run_cell(page, 1)
        page.wait_for_function(NEW_VIEW_DRAWN, timeout=120_000)
        times.append(page.evaluate(f"performance.now() - {t0}"))
        page.evaluate("document.querySelector('.uv-app').dataset.seen = '1'")
    return times


def bytes_per_step(page: Page, received: list[int]) -> list[int]:
    app = ".uv-app"
    drawn = lambda: page.get_attribute(app, "data-drawn")  # noqa: E731
    trace = " ".join(page.inner_text(f"{app} .uv-crumbs").split())
    passes = page.locator(f"{app} .uv-pass").count()
    page.click(f"{app} .uv-graph-tools .uv-fit")  # the view takes the keys
    sizes = []

    def step(key: str) -> int:
        """Press the key; once the next view is drawn, note the bytes it took and answer its step."""
        was = drawn()
        received.clear()
        page.keyboard.press(key)
        page.wait_for_function("v => document.querySelector('.uv-app').dataset.drawn !== v", arg=was,
                               timeout=60_000)
        page.wait_for_timeout(50)  # the kernel's idle status after the answer
        sizes.append(sum(received))
        return int(drawn().split("/")[3])

    for pi in range(passes):
        k = step("ArrowDown") if pi else 0
        steps = int(page.inner_text(f"{app} .uv-step-label").split("/")[1].split()[0])
        while k < steps:  # → skips the steps folded out of the stepping
            k = step("ArrowRight")
    print(f"    ({trace}: {len(sizes)} steps over {passes} passes)")
    return sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs of the show cell")
    args = ap.parse_args()
    if (chromium := find_chromium(__file__)) is None:
        return 1
    root = Path(tempfile.mkdtemp(prefix="uopviz-bench-widget-"))
    write_notebook(root / "bench.ipynb")
    with jupyterlab(root) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        received: list[int] = []
        page.on("websocket", lambda ws: ws.on("framereceived", lambda f: received.append(len(f))))
        page.goto(f"{base}lab/tree/bench.ipynb")
        page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=120_000)
        run_cell(page, 0)
        page.locator(".jp-InputPrompt").first.filter(has_text="[1]").wait_for(timeout=120_000)
        print(f"JupyterLab at {base}, Chromium {browser.version}")
        times = first_graph(page, args.runs)
        print(f"(a) `{SHOW}` to its first graph drawn, {len(times)} runs: {statistics.median(times):.0f} ms median "
              f"(max {max(times):.0f}); budget 1500 ms")
        sizes = bytes_per_step(page, received)
        kb = 1 / 1024
        print(f"(b) comm bytes per step, kernel to page: {statistics.median(sizes) * kb:.1f} KB median "
              f"(max {max(sizes) * kb:.1f}); budget 200 KB")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
