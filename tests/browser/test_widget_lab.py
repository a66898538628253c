"""The notebook widget in a real JupyterLab (token-less, 127.0.0.1, a free port; no `uopviz serve`, no network):
a cell shows the zoo gemm's kernel; the graph draws with AxisType-filled Range nodes; the keyboard steps it while
the widget has focus, and no key reaches JupyterLab; an UPCAST opt applied from the panel changes the source and
the widget's `opts` traitlet. A screenshot is saved under test-artifacts/browser/."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from uopviz.backend.child import jupyterlab

from uopviz.uop.ops import AxisType

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = pytest.mark.slow
SHOW_GEMM = """import uopviz
from uopviz.kernels import get
z = get("gemm")
gemm, _ = z.build(z.sizes(small=True), "CPU")
w = uopviz.show(gemm)
w"""
DRAWN = ".uv-app[data-drawn]"


def notebook(path: Path, *sources: str) -> None:
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
             for s in sources]
    path.write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                                              "display_name": "Python 3"}},
                                "nbformat": 4, "nbformat_minor": 5}))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("lab")
    with jupyterlab(root) as base:
        yield base, root


def run_cell(page: Page, index: int) -> None:
    """Run the index-th cell as a person does: click its editor, Shift+Enter."""
    page.locator(".jp-Notebook .jp-Cell .cm-content").nth(index).click()
    page.keyboard.press("Shift+Enter")


def open_notebook(browser: Browser, base: str, name: str) -> Page:
    page = browser.new_page(viewport={"width": 1500, "height": 1000})
    page.goto(f"{base}lab/tree/{name}?reset")  # a fresh workspace: an earlier test's notebook is not reopened
    page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content", timeout=60_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=120_000)  # the kernel is up and connected
    return page


def save_and_close(page: Page, base: str, path: Path) -> dict[str, Any]:
    """Save the notebook open in the page (Ctrl+S), close the page and shut its kernel down: the saved notebook."""
    page.locator(".jp-Notebook .jp-Cell .cm-content").first.click()  # the notebook, not a widget, takes the keys
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')")
    page.close()
    with urllib.request.urlopen(f"{base}api/sessions") as r:
        for s in json.load(r):
            urllib.request.urlopen(urllib.request.Request(f"{base}api/sessions/{s['id']}", method="DELETE")).close()
    return json.loads(path.read_text())


def test_the_widget_draws_steps_and_applies_an_opt_in_jupyterlab(browser: Browser, lab: tuple[str, Path],
                                                                 shots: Path) -> None:
    base, root = lab
    notebook(root / "gemm.ipynb", SHOW_GEMM, "print(w.opts, w.step)")
    page = open_notebook(browser, base, "gemm.ipynb")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    run_cell(page, 0)
    page.wait_for_selector(DRAWN, timeout=120_000)
    app = page.locator(".uv-app")
    first = app.get_attribute("data-drawn")
    tid, ci, pi, k = first.split("/")
    assert k == "0"

    # Range nodes filled with their AxisType colours, and the legend that says so
    fills = page.eval_on_selector_all(".uv-app .uv-node[data-op='Range']",
                                      "els => els.map(e => [e.dataset.axisType, getComputedStyle(e.firstChild).fill])")
    assert fills
    for axis_type, fill in fills:
        n = int(AxisType[axis_type].colour.lstrip("#"), 16)
        assert fill == f"rgb({n >> 16}, {(n >> 8) & 255}, {n & 255})", (axis_type, fill)
    assert "GLOBAL" not in page.inner_text(".uv-app .uv-legend")  # folded in a view this low: one button
    page.click(".uv-app .uv-legend-toggle")
    assert "GLOBAL" in page.inner_text(".uv-app .uv-legend")

    # the keyboard steps the view while it has focus; no key reaches JupyterLab (no cell added or selected)
    page.click(".uv-app .uv-graph")  # JupyterLab makes the widget's cell the active one; the widget takes the keys
    cells = page.locator(".jp-Notebook .jp-Cell").count()
    active = page.eval_on_selector(".jp-Notebook", "nb => [...nb.querySelectorAll('.jp-Cell')]"
                                                   ".findIndex(c => c.classList.contains('jp-mod-active'))")
    for key in ("ArrowRight", "ArrowRight"):
        page.keyboard.press(key)
    page.wait_for_function("v => document.querySelector('.uv-app').dataset.drawn === v", arg=f"{tid}/{ci}/{pi}/2")
    assert page.inner_text(".uv-app .uv-step-label").startswith("step 2 /")
    for key in ("ArrowDown", "b", "a", "j"):
        page.keyboard.press(key)
    page.wait_for_function("v => document.querySelector('.uv-app').dataset.drawn === v",
                           arg=f"{tid}/{ci}/{int(pi) + 1}/0")
    assert page.locator(".jp-Notebook .jp-Cell").count() == cells
    assert page.eval_on_selector(".jp-Notebook", "nb => [...nb.querySelectorAll('.jp-Cell')]"
                                                 ".findIndex(c => c.classList.contains('jp-mod-active'))") == active

    # an UPCAST opt from the Kernel tab: lowered again in the kernel, the source changes, w.opts follows
    page.click(".uv-app .uv-tab[data-tab='kernel']")
    page.wait_for_selector(".uv-app .uv-kernel-source")
    before = page.inner_text(".uv-app .uv-kernel-source")
    loops = page.eval_on_selector_all(
        ".uv-app .uv-axis", "els => els.filter(e => e.dataset.type === 'LOOP').map(e => [e.dataset.axis, "
                            "Number(e.dataset.size)])")
    axis, size = next((a, n) for a, n in loops if n > 1)
    factor = next(f for f in range(2, size + 1) if size % f == 0)  # the smallest split that divides the axis
    page.click(f".uv-app .uv-axis[data-axis='{axis}']")
    page.select_option(".uv-app .uv-opt-op", label="UPCAST")
    page.fill(".uv-app .uv-opt-amount", str(factor))
    page.click(".uv-app .uv-opt-apply")
    page.wait_for_selector(".uv-app .uv-opt-reset", timeout=60_000)
    page.wait_for_function("b => document.querySelector('.uv-app .uv-kernel-source')?.innerText !== b", arg=before)
    assert page.locator(".uv-app .uv-opt-error").count() == 0
    assert page.locator(".uv-app .uv-applied .uv-opt-chip").last.inner_text() == f"UPCAST a{axis} ×{factor}"
    page.screenshot(path=shots / "jupyterlab-widget.png")

    run_cell(page, 1)
    printed = page.locator(".jp-OutputArea-output pre").filter(has_text="SPLIT")
    printed.wait_for(timeout=60_000)
    assert f"'axis': {axis}, 'arg': [{factor}, 'UPCAST', False]" in printed.inner_text()
    assert not errors, errors
    page.close()
    page.close()


def test_two_widgets_side_by_side_each_draw_their_variant(browser: Browser, lab: tuple[str, Path],
                                                          shots: Path) -> None:
    """examples/04-compare-opts.ipynb's first two cells: two widgets of one trace in an HBox, each set to a kernel
    and opts from Python before it is shown; both draw a graph, and no page error."""
    base, root = lab
    example = json.loads((Path(__file__).resolve().parents[2] / "examples" / "04-compare-opts.ipynb").read_text())
    code = ["".join(c["source"]) for c in example["cells"] if c["cell_type"] == "code"]
    notebook(root / "compare.ipynb", *code[:2])
    page = open_notebook(browser, base, "compare.ipynb")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    run_cell(page, 0)
    page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea-output").wait_for(timeout=120_000)
    run_cell(page, 1)
    page.wait_for_function("() => document.querySelectorAll('.uv-app[data-drawn]').length === 2", timeout=180_000)
    boxes = [page.locator(".uv-app").nth(i).bounding_box() for i in range(2)]
    assert all(b and b["width"] > 300 and b["height"] > 300 for b in boxes), boxes
    page.screenshot(path=shots / "jupyterlab-compare-opts.png")
    assert not errors, errors

    # saved and reopened without its kernel: each view of the HBox shows static, side by side, and no error
    page.wait_for_selector(".uopviz-statics .uopviz-static", state="attached")
    assert not page.is_visible(".uopviz-statics") and page.locator(".uopviz-static .uv-app").count() == 0
    saved = save_and_close(page, base, root / "compare.ipynb")
    assert [sorted(o["data"]) for o in saved["cells"][1]["outputs"]] == [
        ["application/vnd.jupyter.widget-view+json", "text/plain"], ["text/html"]]
    page = open_notebook(browser, base, "compare.ipynb")
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.wait_for_function("() => document.querySelectorAll('.uopviz-static .uv-app[data-drawn]').length === 2",
                           timeout=60_000)
    left, right = (page.locator(".uopviz-static .uv-app").nth(i).bounding_box() for i in range(2))
    assert left and right and left["width"] > 300 and abs(left["y"] - right["y"]) < 2 < right["x"] - left["x"]
    assert not page.get_by_text("Error displaying widget").is_visible()
    page.screenshot(path=shots / "jupyterlab-compare-opts-reopened.png")
    assert not errors, errors
    page.close()


def test_a_saved_notebook_reopened_shows_the_static_view(browser: Browser, lab: tuple[str, Path],
                                                         shots: Path) -> None:
    """A widget's cell run, the notebook saved, its kernel shut down, the notebook opened again (a new kernel, in
    which the widget's model is not): the cell shows the view, static, in the widget's place, not JupyterLab's
    "Error displaying widget: model not found". While the widget lives, its fallback is hidden and not drawn."""
    base, root = lab
    notebook(root / "saved.ipynb", SHOW_GEMM)
    page = open_notebook(browser, base, "saved.ipynb")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    run_cell(page, 0)
    page.wait_for_selector(f".uv-widget{DRAWN}", timeout=120_000)
    page.wait_for_selector(".uopviz-static", state="attached")
    assert not page.is_visible(".uopviz-static") and page.locator(".uopviz-static .uv-app").count() == 0
    outputs = save_and_close(page, base, root / "saved.ipynb")["cells"][0]["outputs"]
    assert [sorted(o["data"]) for o in outputs] == [["application/vnd.jupyter.widget-view+json", "text/plain"],
                                                    ["text/html"]]

    page = open_notebook(browser, base, "saved.ipynb")
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.wait_for_selector(f".uopviz-static {DRAWN}", timeout=60_000)
    box = page.locator(".uopviz-static .uv-app").bounding_box()
    assert box and box["width"] > 600 and box["height"] > 500, box
    assert page.locator(".uopviz-static .uv-node").count() > 0
    assert not page.get_by_text("Error displaying widget").is_visible()
    assert page.locator(".uv-widget").count() == 0
    page.screenshot(path=shots / "jupyterlab-reopened.png")
    assert not errors, errors
    page.close()
