"""The web UI in a real browser against `uopviz serve` (the zoo): pick the gemm kernel, step through its passes
with the keyboard, Range nodes filled with their AxisType colours, an UPCAST opt that changes the source (and an
illegal one that says why), and a reload or a shared link that lands on the same view. Screenshots of each are
saved under test-artifacts/browser/."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from uopviz.backend.child import base_and_token

from tests.browser.support import api, auth, gemm_context, wait_drawn

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow
STEPS_PER_PASS = 4  # steps taken one key at a time in each pass before jumping to its last (End)


def graph_key(page: Page) -> str:
    """What the main view shows: the graph drawn, or (Linearize and later) the instruction listing."""
    return page.evaluate("() => { const l = document.querySelector('.uv-listing');"
                         " const g = document.querySelector('.uv-graph-svg');"
                         " return (l.hidden ? g.dataset.key : l.dataset.key) ?? ''; }")


def rgb(hex_colour: str) -> str:
    n = int(hex_colour.lstrip("#"), 16)
    return f"rgb({n >> 16}, {(n >> 8) & 255}, {n & 255})"


def gemm_kernel(page: Page, server: str) -> dict[str, Any]:
    """The zoo gemm's matmul kernel context."""
    kernel = api(page, server, "traces/gemm")["contexts"][gemm_context(page, server)]
    assert kernel["kind"] == "kernel"
    return kernel


def test_pick_the_gemm_kernel_and_step_through_its_passes_with_the_keyboard(page: Page, server: str,
                                                                            shots: Path) -> None:
    ci = gemm_context(page, server)
    kernel = gemm_kernel(page, server)
    page.goto(server)
    page.click(".uv-trace[data-tid='gemm']")
    wait_drawn(page, f"gemm/{ci}/0/0")  # a trace opens on its matmul, not on the copy of B packed before it
    page.click(f".uv-ctx[data-name='{kernel['name']}']")
    wait_drawn(page, f"gemm/{ci}/0/0")
    assert page.url.endswith(f"#/t/gemm/c/{ci}/p/0/s/0")
    assert kernel["name"] in page.inner_text(".uv-crumbs")
    passes = kernel["passes"]

    changed = added = 0
    for p in passes:
        pi, steps = p["index"], p["steps"]
        assert page.get_attribute(".uv-pass.uv-active", "data-pi") == str(pi)
        first = api(page, server, f"traces/gemm/contexts/{ci}/passes/{pi}/steps/0")
        root = first["root"]
        shown = [k for k in range(1, steps + 1) if k not in first["folded"]]  # → skips folded steps
        for k in shown[:STEPS_PER_PASS]:
            before = graph_key(page)
            page.keyboard.press("ArrowRight")
            wait_drawn(page, f"gemm/{ci}/{pi}/{k}")
            assert page.inner_text(".uv-step-label").startswith(f"step {k} / {steps}")
            assert page.inner_text(".uv-rewrite .uv-location")  # the rule that matched, with its source location
            step = api(page, server, f"traces/gemm/contexts/{ci}/passes/{pi}/steps/{k}")
            if step["root"] != root:  # the step changed the graph: the drawing changes with it
                assert graph_key(page) != before, f"step {k} of pass {p['name']} drew the graph before it"
                changed += 1
            root = step["root"]
            added += page.locator(".uv-node.uv-added").count()
            if (pi, k) == (0, 4):
                page.screenshot(path=shots / "gemm-rangeify-step-4.png")
        if steps:
            page.keyboard.press("End")
            wait_drawn(page, f"gemm/{ci}/{pi}/{steps}")
            page.keyboard.press("ArrowLeft")
            wait_drawn(page, f"gemm/{ci}/{pi}/{max([0, *(k for k in shown if k < steps)])}")
        if pi + 1 < len(passes):
            page.keyboard.press("ArrowDown")
            wait_drawn(page, f"gemm/{ci}/{pi + 1}/0")
            assert page.url.endswith(f"#/t/gemm/c/{ci}/p/{pi + 1}/s/0")
    assert changed > 5 and added > 0, (changed, added)
    page.keyboard.press("ArrowUp")
    wait_drawn(page, f"gemm/{ci}/{len(passes) - 2}/0")
    page.screenshot(path=shots / "gemm-last-passes.png")


def test_range_nodes_are_filled_with_their_axistype_colours(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    colours = {t["name"]: t["color"] for t in api(page, server, "meta")["axis_types"]}
    kernel = gemm_kernel(page, server)
    simplify = next(p["index"] for p in kernel["passes"] if p["stage"] == "Rangeify" and p["name"] == "simplify")
    page.goto(f"{server}#/t/gemm/c/{ci}/p/{simplify}/s/0")
    wait_drawn(page, f"gemm/{ci}/{simplify}/0")
    fills = page.eval_on_selector_all(
        ".uv-node[data-op='Range']", "els => els.map(e => [e.dataset.axisType, getComputedStyle(e.firstChild).fill])")
    assert {t for t, _ in fills} == {"LOOP", "REDUCE"}  # the kernel as scheduled, before any opt
    for axis_type, fill in fills:
        assert fill == rgb(colours[axis_type]), (axis_type, fill)
    letters = page.eval_on_selector_all(".uv-ctx.uv-active .uv-kname-axis",
                                        "els => els.map(e => [e.textContent, getComputedStyle(e).color])")
    assert letters == [[f"{a['letter']}{a['size']}", rgb(colours[a["type"]])] for a in kernel["axes"]]
    page.click(".uv-legend-toggle")  # folded by default: it covers no node
    legend = page.inner_text(".uv-legend")
    assert all(name in legend for name in colours)
    page.screenshot(path=shots / "gemm-ranges-loop-reduce.png")

    # An UPCAST split gives the kernel an UPCAST range, drawn in its colour in the lowering with that opt.
    applied = page.request.post(f"{server}api/traces/gemm/contexts/{ci}/opts", headers=auth(page, server),
                                data={"opts": [{"op": "SPLIT", "axis": 1, "arg": [4, "UPCAST", False]}]})
    assert applied.ok, applied.text()
    tid = applied.json()["trace_id"]
    passes = api(page, server, f"traces/{tid}")["contexts"][0]["passes"]
    expand = next(p["index"] for p in passes if p["name"] == "expand")
    page.goto(f"{server}#/t/{tid}/c/0/p/{expand}/s/0")  # an opts trace opens as its kernel with those opts
    wait_drawn(page, f"gemm/{ci}/{expand}/0")
    assert page.url.endswith(f"#/t/gemm/c/{ci}/p/{expand}/s/0/o/SPLIT:1:4:UPCAST:0")
    fills = page.eval_on_selector_all(
        ".uv-node[data-op='Range']", "els => els.map(e => [e.dataset.axisType, getComputedStyle(e.firstChild).fill])")
    assert "UPCAST" in {t for t, _ in fills}
    for axis_type, fill in fills:
        assert fill == rgb(colours[axis_type]), (axis_type, fill)
    page.screenshot(path=shots / "gemm-upcast-range.png")


def splittable_axis(page: Page) -> tuple[int, int]:
    """An axis of the kernel shown that UPCAST may split by 2 (a GLOBAL or LOOP axis), and its size. By 2: the
    zoo gemm's 8x2 tile has 16 copies of the kernel body already, and 32 is the limit."""
    axes = page.eval_on_selector_all(".uv-axis", "els => els.map(e => [e.dataset.type, Number(e.dataset.size)])")
    return next((i, size) for i, (t, size) in enumerate(axes) if t in ("GLOBAL", "LOOP") and size % 2 == 0)


def test_apply_an_upcast_opt_and_see_the_source_change(page: Page, server: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    page.goto(f"{server}#/t/gemm/c/{ci}/p/0/s/0/v/kernel")
    source = page.locator(".uv-kernel-source")
    source.wait_for()
    before, name = source.inner_text(), page.inner_text(".uv-kernel-title .uv-kname")
    assert f"void {name}(" in before
    axis, size = splittable_axis(page)

    page.click(f".uv-axis[data-axis='{axis}']")
    page.select_option(".uv-opt-op", label="UPCAST")
    bad = next(f for f in (3, 5, 7, 11, 13) if size % f)
    page.fill(".uv-opt-amount", str(bad))
    page.click(".uv-opt-apply")
    error = page.locator(".uv-opt-error")
    error.wait_for()
    assert f"not divisible by {bad}" in error.inner_text()  # the server's 422 reason, shown inline
    assert source.inner_text() == before and "/o/" not in page.url
    page.screenshot(path=shots / "gemm-opt-illegal.png")

    page.fill(".uv-opt-amount", "2")
    page.click(".uv-opt-apply")
    page.wait_for_function("before => document.querySelector('.uv-kernel-source')?.innerText !== before", arg=before)
    new_name = page.inner_text(".uv-kernel-title .uv-kname")
    after = source.inner_text()
    assert new_name.split("_").count("u2") == name.split("_").count("u2") + 1 and f"void {new_name}(" in after
    assert page.locator(".uv-opt-error").count() == 0
    assert page.locator(".uv-applied .uv-opt-chip").last.inner_text() == f"UPCAST a{axis} ×2"
    assert f"SPLIT:{axis}:2:UPCAST:0" in page.url
    page.screenshot(path=shots / "gemm-opt-upcast.png")


def test_reload_and_a_shared_link_land_on_the_same_view(page: Page, server: str, printed: str, shots: Path) -> None:
    ci = gemm_context(page, server)
    page.goto(f"{server}#/t/gemm/c/{ci}/p/0/s/0")
    wait_drawn(page, f"gemm/{ci}/0/0")
    page.keyboard.press("ArrowDown")
    wait_drawn(page, f"gemm/{ci}/1/0")
    for k in (1, 2, 3):
        page.keyboard.press("ArrowRight")
        wait_drawn(page, f"gemm/{ci}/1/{k}")
    page.click(".uv-tab[data-tab='kernel']")
    page.locator(".uv-kernel-source").wait_for()
    axis, _ = splittable_axis(page)
    page.click(f".uv-axis[data-axis='{axis}']")
    page.select_option(".uv-opt-op", label="UPCAST")
    page.fill(".uv-opt-amount", "2")
    page.click(".uv-opt-apply")
    page.wait_for_function("() => location.hash.includes('/o/')")
    # the graph follows the opt: the step of the new kernel's lowering that applied it
    page.wait_for_function("() => document.querySelector('.uv-pass.uv-active .uv-pass-name')?.textContent"
                           ".includes('→')")
    at = page.evaluate("location.hash").split("/")  # #/t/gemm/c/{ci}/p/PI/s/K/o/...
    drawn = f"gemm/{ci}/{at[6]}/{at[8]}"
    assert page.inner_text(".uv-pass.uv-active .uv-pass-name").startswith(f"SPLIT a{axis} (")

    def view(p: Page) -> dict[str, Any]:
        wait_drawn(p, drawn)
        p.wait_for_selector(".uv-opt-reset")  # the kernel with the chosen opts is shown
        return {"url": p.url, "graph": graph_key(p), "step": p.inner_text(".uv-step-label"),
                "pass": p.get_attribute(".uv-pass.uv-active", "data-pi"),
                "tab": p.get_attribute(".uv-tab.uv-active", "data-tab"),
                "kernel": p.inner_text(".uv-kernel-title .uv-kname"), "source": p.inner_text(".uv-kernel-source")}

    shown = view(page)
    assert f"#/t/gemm/c/{ci}/p/" in shown["url"] and shown["url"].endswith(f"SPLIT:{axis}:2:UPCAST:0/v/kernel")
    page.reload()
    assert view(page) == shown
    page.screenshot(path=shots / "gemm-after-reload.png")

    browser = page.context.browser
    assert browser
    shared = browser.new_page(viewport={"width": 1600, "height": 950})  # another browser: no token yet
    fragment = shown["url"].partition("#")[2]
    shared.goto(f"{printed}#{fragment}")  # the printed URL with the view: the token goes, the view stays
    assert view(shared) == shown
    shared.close()


def test_another_server_on_this_host_receives_no_token(page: Page, server: str, printed: str) -> None:
    """Issue 28: cookies ignore ports, so a token kept in one would go to every server on 127.0.0.1, another user's
    included. A server on another port, visited by the browser that holds this server's page, gets neither a cookie
    nor the token; this server's page still works there after, reading its token from its own origin's storage."""
    seen: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(f"{self.requestline}\n{self.headers}")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>another server</title><img src='/pixel'>")

        def log_message(self, *args: object) -> None:
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        page.goto(server)
        page.wait_for_function("() => document.querySelector('.uv-app')?.dataset.drawn")  # it works: the token
        page.goto(f"http://127.0.0.1:{other.server_port}/")
        page.wait_for_load_state("networkidle")
        other_storage = page.evaluate("() => JSON.stringify(localStorage)")
    finally:
        other.shutdown()
        other.server_close()
    token = base_and_token(printed)[1]
    assert token and seen
    assert not [h for h in seen if token in h or "cookie:" in h.lower()], seen
    assert token not in other_storage  # the other origin's page cannot read this one's storage
    page.goto(server)
    page.wait_for_function("() => document.querySelector('.uv-app')?.dataset.drawn")
    assert "token" not in page.url


def test_the_selected_node_and_the_search_are_in_the_link(page: Page, server: str, printed: str,
                                                          shots: Path) -> None:
    """Issue 31 item 6: a link names the node selected and the search, and opens on them."""
    ci = gemm_context(page, server)
    page.goto(f"{server}#/t/gemm/c/{ci}/p/1/s/0")
    wait_drawn(page, f"gemm/{ci}/1/0")
    node = page.locator(".uv-node", has_text="Reduce").first
    ref = node.get_attribute("data-ref")
    node.click()
    page.wait_for_function("r => location.hash.endsWith('/n/' + r)", arg=ref)
    page.fill(".uv-search", "Range")
    page.wait_for_function("() => location.hash.endsWith('/q/range')")
    fragment = page.url.partition("#")[2]

    browser = page.context.browser
    assert browser
    other = browser.new_page(viewport={"width": 1600, "height": 950})  # another browser: the printed URL, the view
    other.goto(f"{printed}#{fragment}")
    wait_drawn(other, f"gemm/{ci}/1/0")
    other.wait_for_selector(".uv-inspector:not([hidden])")
    assert "Reduce" in other.inner_text(".uv-inspector-head")
    assert other.get_attribute(f".uv-node[data-ref='{ref}']", "class").count("uv-selected") == 1
    assert other.input_value(".uv-search") == "range" and other.locator(".uv-node.uv-found").count() > 0
    other.keyboard.press("Escape")  # unselected: the link names no node
    other.wait_for_function("() => !location.hash.includes('/n/')")
    other.screenshot(path=shots / "gemm-link-state.png")
    other.close()


def test_the_render_step_shows_the_source_it_wrote_above_its_listing(page: Page, server: str) -> None:
    """Issue 31 item 6: the step that renders a program shows the source, not only the listing."""
    ci = gemm_context(page, server)
    passes = api(page, server, "traces/gemm")["contexts"][ci]["passes"]
    pi = next(p["index"] for p in passes if p["name"] == "render")
    page.goto(f"{server}#/t/gemm/c/{ci}/p/{pi}/s/1")
    wait_drawn(page, f"gemm/{ci}/{pi}/1")
    source = api(page, server, f"traces/gemm/contexts/{ci}/kernel")["source"]
    page.wait_for_selector(".uv-listing-source")
    assert page.inner_text(".uv-listing-source pre").strip() == source.strip()
    assert page.locator(".uv-listing .uv-line").count() > 0  # the listing is still there, below


def test_a_view_moved_before_it_has_loaded_draws_where_it_was_sent(page: Page, server: str) -> None:
    """Issue 31 item 6 (01-tour's "reading 'some'"): a widget's traitlets can move the view before its first answers
    come; the view keeps the state and draws it once they have, with no error."""
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    ci = gemm_context(page, server)
    page.goto(server)  # the page of the server, which keeps the token in its storage
    page.wait_for_function("() => document.querySelector('.uv-app')?.dataset.drawn")
    page.evaluate("""async (ci) => {
      const { mount, httpSource } = await import(`${location.origin}/app.js`);
      const http = httpSource("", localStorage.getItem("uopviz-token"));
      const slow = { ...http, meta: () => new Promise((done) => setTimeout(() => done(http.meta()), 500)) };
      document.body.innerHTML = '<div id="late" style="height: 700px"></div>';
      mount(document.getElementById("late"), slow, { hash: false }).go({ tid: "gemm", ci, pi: 1, k: 2 });
    }""", ci)
    page.wait_for_function("v => document.getElementById('late').dataset.drawn === v", arg=f"gemm/{ci}/1/2")
    assert not errors, errors
