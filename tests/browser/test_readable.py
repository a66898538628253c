"""Issue 17, on the zoo in a real browser: big graphs stay readable (search, index arithmetic folded into text,
copies collapsed, op-group filters, the minimap), every step frames what it changed at a readable scale, no-op steps
are folded, the diff is keyed by node identity, opts show their effect ("time it"), and the keys, legend and opts
offered behave. Screenshots of each go to test-artifacts/browser/."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.browser.support import api, gemm_context, wait_drawn

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow
READABLE = 0.85  # the smallest scale the view frames a step at (graph/view.js)


def open_view(page: Page, server: str, view: str) -> None:
    """Open trace/context/pass/step in a fresh load of the page."""
    tid, ci, pi, k = view.split("/")
    page.goto(f"{server}#/t/{tid}/c/{ci}/p/{pi}/s/{k}")
    wait_drawn(page, view)


def drawn_nodes(page: Page) -> int:
    """The nodes the graph draws, once the drawing is complete."""
    page.wait_for_function("() => document.querySelector('.uv-graph-svg')?.dataset.nodes")
    return int(page.get_attribute(".uv-graph-svg", "data-nodes") or 0)


def set_toggle(page: Page, name: str, on: bool) -> None:
    """Turn a graph view (index, lanes, listing) on or off, and wait for the graph drawn again."""
    button = page.locator(f".uv-graph-tools .uv-{name}")
    if ("uv-on" in (button.get_attribute("class") or "").split()) != on:
        page.evaluate("document.querySelector('.uv-graph-svg').removeAttribute('data-nodes')")
        button.click()
        if name != "listing" or not on:
            drawn_nodes(page)


def last_step(page: Page, server: str, tid: str) -> str:
    """The last step of the last pass of a trace's biggest kernel (its render)."""
    contexts = api(page, server, f"traces/{tid}")["contexts"]
    sizes = {c["index"]: len(api(page, server, f"traces/{tid}/contexts/{c['index']}/kernel")["linear"].splitlines())
             for c in contexts if c["kind"] == "kernel"}
    ci = max(sizes, key=lambda i: sizes[i])
    p = contexts[ci]["passes"][-1]
    return f"{tid}/{ci}/{p['index']}/{p['steps']}"


def test_search_finds_a_node_by_op_id_range_and_arg(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    open_view(page, server, f"gemm/{ci}/0/0")
    step = api(page, server, f"traces/gemm/contexts/{ci}/passes/0/steps/0")
    reduce = next(n for n in step["nodes"] if n["op"] == "Reduce")
    for query, want in (("reduce", reduce["id"]), (reduce["id"][:10], reduce["id"]), ("r1 loop", None), ("1024", None)):
        page.fill(".uv-search", query)
        page.wait_for_function("() => /^\\d+ \\/ \\d+$/.test(document.querySelector('.uv-hits').textContent)")
        hits = page.locator(".uv-node.uv-found")
        assert hits.count() >= 1, query
        if want:
            assert want in hits.evaluate_all("els => els.map(e => e.dataset.ref)")
        # the hit shown is in the middle of the view
        box = page.locator(".uv-node.uv-found").first.bounding_box()
        view = page.locator(".uv-graph").bounding_box()
        assert box and view and view["x"] < box["x"] + box["width"] / 2 < view["x"] + view["width"], query
    page.screenshot(path=shots / "search-1024.png")
    total = int(page.inner_text(".uv-hits").split("/")[1])
    page.keyboard.press("Enter")  # the next hit
    assert page.inner_text(".uv-hits") == f"{min(2, total)} / {total}"
    page.fill(".uv-search", "no such node anywhere")
    page.wait_for_function("() => document.querySelector('.uv-hits').textContent === 'none'")
    assert page.locator(".uv-node.uv-found").count() == 0


def test_the_index_toggle_cuts_the_drawn_nodes_of_gemms_last_step(page: Page, server: str, shots: Path) -> None:
    view = last_step(page, server, "gemm")
    open_view(page, server, view)
    assert page.locator(".uv-listing:not([hidden]) .uv-line").count() > 300  # a Linear program: its listing first
    page.screenshot(path=shots / "gemm-last-step-listing.png")
    # the graph, one click away: a button among the others above the view (not laid out as the listing is)
    button = page.locator(".uv-graph-tools .uv-listing")
    box, fit, tools = (page.locator(sel).bounding_box() for sel in (".uv-graph-tools .uv-listing",
                                                                     ".uv-graph-tools .uv-fit", ".uv-graph-tools"))
    assert box and fit and tools and button.inner_text() == "listing" and box["height"] == fit["height"]
    assert tools["y"] <= box["y"] and box["y"] + box["height"] <= tools["y"] + tools["height"]
    set_toggle(page, "listing", False)
    counts = {}
    for lanes in (False, True):
        set_toggle(page, "lanes", lanes)
        for index in (False, True):
            set_toggle(page, "index", index)
            counts[lanes, index] = drawn_nodes(page)
            page.screenshot(path=shots / f"gemm-last-step-index-{index}-copies-{lanes}.png")
    assert counts[False, True] * 3 <= counts[False, False] * 2, counts  # index arithmetic folded: a third fewer
    assert counts[True, True] * 2 <= counts[True, False], counts
    assert counts[True, True] < 100, counts  # both on: ~500 nodes read as a few dozen


def test_every_instruction_selection_step_of_gemm_draws_its_change_or_is_folded(page: Page, server: str,
                                                                                 shots: Path) -> None:
    ci = gemm_context(page, server)
    kernel = api(page, server, "traces/gemm")["contexts"][ci]
    passes = [p for p in kernel["passes"] if p["stage"] == "Instruction Selection" and p["steps"]]
    assert passes
    open_view(page, server, f"gemm/{ci}/{passes[0]['index']}/0")
    seen = folded = 0
    for p in passes:
        pi = p["index"]
        page.evaluate(f"location.hash = '#/t/gemm/c/{ci}/p/{pi}/s/0'")
        wait_drawn(page, f"gemm/{ci}/{pi}/0")
        folded_steps = api(page, server, f"traces/gemm/contexts/{ci}/passes/{pi}/steps/0")["folded"]
        for k in range(1, p["steps"] + 1):
            if k in folded_steps:  # folded out of the stepping, and said so
                folded += 1
                assert "folded" in page.inner_text(".uv-step-label")
                continue
            page.keyboard.press("ArrowRight")
            wait_drawn(page, f"gemm/{ci}/{pi}/{k}")
            svg = page.locator(".uv-graph-svg")
            assert svg.get_attribute("data-focus") == "true", (p["name"], k)  # what it changed is in view...
            assert float(svg.get_attribute("data-scale") or 0) >= READABLE, (p["name"], k)  # ...at a readable scale
            marked = ".uv-node.uv-added, .uv-node.uv-removed, .uv-node.uv-rebuilt, .uv-node.uv-replacement"
            assert page.locator(marked).count() > 0, (p["name"], k)
            seen += 1
        page.screenshot(path=shots / f"gemm-instruction-selection-{pi}.png")
    assert seen > 20 and folded >= 1, (seen, folded)


@pytest.mark.parametrize("size", [(1600, 1000), (1280, 720)])
def test_devectorize_of_big_kernels_is_framed_readably_at_both_sizes(page: Page, server: str, shots: Path,
                                                                     size: tuple[int, int]) -> None:
    """The devectorize step of the zoo's biggest kernels (the context of each last step): framed on its change."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    for tid in ("gemm", "conv2d", "attention"):
        view = last_step(page, server, tid)
        ci = view.split("/")[1]
        devectorize = next(p for p in api(page, server, f"traces/{tid}")["contexts"][int(ci)]["passes"]
                           if p["name"] == "devectorize")
        open_view(page, server, f"{tid}/{ci}/{devectorize['index']}/1")
        assert drawn_nodes(page) < 300  # folded and collapsed (the graph before it beside): framed on the change
        assert float(page.get_attribute(".uv-graph-svg", "data-scale") or 0) >= READABLE
        page.screenshot(path=shots / f"{tid}-devectorize-{size[0]}x{size[1]}.png")


def test_an_operand_swap_lists_one_node_in_its_diff(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    kernel = api(page, server, "traces/gemm")["contexts"][ci]
    for p in kernel["passes"]:
        for k in range(1, p["steps"] + 1):
            step = api(page, server, f"traces/gemm/contexts/{ci}/passes/{p['index']}/steps/{k}")
            swap = [c for c in step["changes"] if c["kind"] == "changed"]
            if swap and "symbolic.py" in step["rule"]["location"]:
                before = swap[0]["before_text"].partition(" (")[2].rstrip(")").split(", ")
                after = swap[0]["text"].partition(" (")[2].rstrip(")").split(", ")
                if len(before) == 2 and before == after[::-1]:
                    open_view(page, server, f"gemm/{ci}/{p['index']}/{k}")
                    rows = page.locator(".uv-rewrite .uv-changes > .uv-change:not(.uv-change-rebuilt)")
                    rows.first.wait_for()
                    assert rows.count() == 1 and rows.first.get_attribute("data-kind") == "changed"
                    summary = page.inner_text(".uv-rewrite .uv-rebuilt summary")
                    assert summary.startswith(f"{len(step['rebuilt'])} ancestors rebuilt")
                    page.screenshot(path=shots / "operand-swap-diff.png")
                    return
    raise AssertionError("no operand swap in the zoo gemm")


def test_operands_of_ordered_ops_are_numbered(page: Page, server: str) -> None:
    ci = gemm_context(page, server)
    open_view(page, server, f"gemm/{ci}/0/0")
    labels = page.eval_on_selector_all(".uv-operand", "els => els.map(e => e.textContent)")
    assert {"0", "1"} <= set(labels)


def test_an_opt_step_shows_the_opt_and_its_axes(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    kernel = api(page, server, "traces/gemm")["contexts"][ci]
    p = next(p for p in kernel["passes"] if p["opt"])
    open_view(page, server, f"gemm/{ci}/{p['index']}/1")
    assert page.inner_text(".uv-rewrite .uv-opt-text") == p["opt"]["text"] == "SPLIT a1 (L1024) → L64 × u16"
    assert page.locator(".uv-rewrite .uv-opt-axes").count() == 2
    assert not page.locator(".uv-rewrite details.uv-rule-source").get_attribute("open")  # apply_opt's code folded
    page.screenshot(path=shots / "opt-step.png")


def test_time_it_shows_a_time_with_gflops_and_gbs(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    page.goto(f"{server}#/t/gemm/c/{ci}/p/0/s/0/v/kernel")
    page.locator(".uv-kernel-source").wait_for()
    options = page.eval_on_selector_all(".uv-opt-op option", "els => els.map(e => e.textContent)")
    assert "UPCAST" in options and not {"LOCAL", "GROUP_REDUCE", "NOLOCALS"} & set(options)  # the CPU has none
    page.click(".uv-time-it")
    page.locator(".uv-timing").wait_for(timeout=120_000)
    assert re.fullmatch(r"[\d.]+ (µs|ms|s) · [\d.]+ GFLOP/s · [\d.]+ GB/s", page.inner_text(".uv-timing"))
    page.click(".uv-subtab-machine")
    page.locator(".uv-machine-note").wait_for(timeout=60_000)
    page.screenshot(path=shots / "time-it.png")


def test_keys_help_legend_filters_and_minimap(page: Page, server: str, shots: Path) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    open_view(page, server, "conv2d/1/0/0")
    assert page.locator(".uv-legend-body").is_hidden()  # folded by default: it covers no node
    page.keyboard.press("l")
    assert page.locator(".uv-legend-body").is_visible()
    page.keyboard.press("?")
    assert "search the graph" in page.inner_text(".uv-overlay")
    page.screenshot(path=shots / "keys-help.png")
    page.keyboard.press("Escape")
    assert page.locator(".uv-overlay").is_hidden()
    assert page.locator(".uv-minimap").is_visible()  # the graph is bigger than the view
    before = drawn_nodes(page)
    page.click(".uv-filter")
    page.evaluate("document.querySelector('.uv-graph-svg').removeAttribute('data-nodes')")
    page.click(".uv-filter-item input[data-group='Elementwise']")
    after = drawn_nodes(page)
    assert after < before and page.locator(".uv-node[data-op='Add']").count() == 0
    assert page.locator(".uv-edge.uv-bridged").count() > 0  # users wired past the hidden nodes
    page.screenshot(path=shots / "filter-elementwise.png")


def test_the_minimap_over_a_node_is_see_through_until_pointed_at(page: Page, server: str, shots: Path) -> None:
    """Dragged under the minimap, a node shows through it (it hid nodes in the corner); pointed at, it is solid."""
    page.set_viewport_size({"width": 1280, "height": 720})
    open_view(page, server, "conv2d/1/0/0")
    mini = page.locator(".uv-minimap")
    assert mini.is_visible()
    m = mini.bounding_box()
    n = page.locator(".uv-node").first.bounding_box()
    assert m and n
    start = (n["x"] + n["width"] / 2, n["y"] + n["height"] / 2)
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(m["x"] + m["width"] / 2, m["y"] + m["height"] / 2, steps=8)
    page.mouse.up()
    page.mouse.move(20, 300)  # away from the minimap
    opacity = "() => Number(getComputedStyle(document.querySelector('.uv-minimap')).opacity)"
    page.wait_for_function(f"({opacity})() < 0.5")
    under = page.evaluate("""() => { const m = document.querySelector('.uv-minimap').getBoundingClientRect();
        return [...document.querySelectorAll('.uv-node')].some(e => { const r = e.getBoundingClientRect();
        return r.right > m.left && r.left < m.right && r.bottom > m.top && r.top < m.bottom; }); }""")
    assert under
    page.screenshot(path=shots / "minimap-over-nodes.png")
    mini.hover()
    page.wait_for_function(f"({opacity})() > 0.8")


def test_a_graph_as_python_in_an_overlay(page: Page, server: str) -> None:
    ci = gemm_context(page, server)
    open_view(page, server, f"gemm/{ci}/1/2")
    page.click(".uv-rewrite .uv-python-graph")
    text = page.locator(".uv-overlay .uv-overlay-text")
    text.wait_for()
    lines = text.inner_text().splitlines()
    assert lines[0].startswith(("from uopviz", "import")) and lines[-1].startswith("root = ")
    step = api(page, server, f"traces/gemm/contexts/{ci}/passes/1/steps/2")
    assert sum(line.count(" = UOp(") for line in lines) == len(step["nodes"])  # one line per node
    page.keyboard.press("Escape")
    assert page.locator(".uv-overlay").is_hidden()


def test_an_applied_opt_nests_under_its_kernel_with_its_source_diff(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    page.goto(f"{server}#/t/gemm/c/{ci}/p/0/s/0/v/kernel")
    page.locator(".uv-kernel-source").wait_for()
    axes = page.eval_on_selector_all(".uv-axis", "els => els.map(e => [e.dataset.type, Number(e.dataset.size)])")
    axis = next(i for i, (t, size) in enumerate(axes) if t == "LOOP" and size % 2 == 0)
    page.click(f".uv-axis[data-axis='{axis}']")
    page.select_option(".uv-opt-op", label="UPCAST")
    page.fill(".uv-opt-amount", "2")  # the kernel's 8x2 tile has 16 body copies: x2 reaches the limit of 32
    page.click(".uv-opt-apply")
    page.wait_for_function("() => location.hash.includes('/o/')")
    variant = page.locator(".uv-ctx.uv-open + .uv-variants .uv-variant.uv-active")  # under its kernel...
    variant.wait_for()
    assert variant.locator(".uv-variant-opts").inner_text().endswith(f"UPCAST a{axis} ×2")
    top = {t["id"] for t in api(page, server, "traces") if t["origin"] is None}
    listed = set(page.eval_on_selector_all(".uv-side .uv-trace", "els => els.map(e => e.dataset.tid)"))
    assert listed == top and variant.get_attribute("data-tid") not in listed  # ...not a trace of its own
    page.click(".uv-subtab-diff")  # the source against the kernel without this opt
    page.locator(".uv-kernel-diff .uv-tok-diff-add").first.wait_for()
    header = page.inner_text(".uv-kernel-diff").splitlines()[:2]
    assert header[0].endswith("without the last opt") and header[1].endswith(f"with UPCAST a{axis} ×2"), header
    assert page.locator(".uv-kernel-diff .uv-tok-diff-del").count() > 0
    page.screenshot(path=shots / "opt-variant-diff.png")
    page.click(".uv-time-it")  # the variant, and the kernel as compiled beside it
    page.locator(".uv-speedup").wait_for(timeout=240_000)
    assert page.inner_text(".uv-timing-before").startswith("as compiled ")
    assert page.inner_text(".uv-time-row .uv-timing:not(.uv-timing-before)").startswith("with these opts ")
    assert re.fullmatch(r"\(([\d.]+× (faster|slower)|the same)\)", page.inner_text(".uv-speedup"))
    page.screenshot(path=shots / "opt-variant-times.png")


def test_the_panels_resize_by_dragging_their_edges(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    page.set_viewport_size({"width": 1280, "height": 720})
    open_view(page, server, f"gemm/{ci}/0/0")

    def width(selector: str) -> float:
        box = page.locator(selector).bounding_box()
        assert box
        return box["width"]

    for handle, column, sign in ((".uv-resizer-side", ".uv-side", 1), (".uv-resizer-panel", ".uv-panel", -1)):
        before, graph = width(column), width(".uv-main")
        box = page.locator(handle).bounding_box()
        assert box
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x + sign * 120, y, steps=4)
        page.mouse.up()
        assert abs(width(column) - before - 120) <= 2, handle  # the column follows the drag...
        assert abs(graph - width(".uv-main") - 120) <= 2, handle  # ...and the graph gives up the room
        # the view is framed anew for its width: the root (what this step shows first) stays in the middle
        page.wait_for_timeout(100)
        root, view = page.locator(".uv-node[data-op='Sink']").bounding_box(), page.locator(".uv-graph").bounding_box()
        assert root and view and abs(root["x"] + root["width"] / 2 - view["x"] - view["width"] / 2) < 4, handle
    page.screenshot(path=shots / "panels-resized-1280x720.png")
