"""The web UI in headless Chromium against `uopviz serve` (the zoo): what opening a step costs, and a big graph.

(a) Every step of every pass of the zoo gemm kernel, opened from a link in a fresh page (nothing cached): the
    bytes transferred by the API requests (and by everything, the bundle included), and the time from
    navigation to the graph drawn. Then the same steps reached by the keyboard (→, ↓) in one page: the API bytes
    and the time from the key press to the graph drawn. Targets: at most 200 KB and 1 s per step.
(b) A synthetic graph of 2,000 nodes, served to the same bundle by an in-page data source (the interface of
    frontend/src/data.js), in an early stage (nothing folded or collapsed): the time to its first view, then to all
    of it drawn after "fit", and how long the main thread was blocked meanwhile (the longest gap between animation
    frames, the longest task). Target: drawn within 5 s, the page responsive.
(c) The last step (render) of the biggest kernel of gemm, conv2d and attention, as a graph (its main view is the
    instruction listing; the graph is one key away): the nodes drawn and the time to draw them (the app's
    "uopviz:draw" measure: data, layout in the worker, the first frame painted) before the big-graph views (index
    arithmetic as text, copies collapsed: both off) and after (both on, as the app opens a late stage), each in a
    fresh page, with a screenshot of each in bench-artifacts/ui/ (ui-KERNEL-before.png, ui-KERNEL-after.png).

    python bench/ui.py [--runs 3] [--opts JSON]

--opts times the steps of the gemm kernel lowered again with those opts (a bigger graph: UPCAST copies the body).

Needs Debian's Chromium (`chromium` on PATH) and Python Playwright. Prints medians (and maxima).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from playwright.sync_api import Browser, Page, sync_playwright
from support import find_chromium
from uopviz.backend.child import CHROMIUM_ARGS, base_and_token, served

ZOO_TRACE, ZOO_CONTEXT = "gemm", 1  # the zoo gemm and its kernel context


@contextmanager
def serve() -> Iterator[str]:
    """`uopviz serve --no-browser --port 0` (the zoo) in a child process; yields the URL it printed (its token)."""
    with served(tempfile.mkdtemp(prefix="uopviz-bench-")) as url:
        yield url


def log_in(browser: Browser, printed: str) -> dict[str, Any]:
    """The storage state (the token's cookie) a page has after opening the printed URL: fresh pages start with it,
    so they need not load the UI once more to log in (which would also fill their cache)."""
    page = browser.new_page()
    page.goto(printed)
    state = page.context.storage_state()
    page.close()
    return cast(dict[str, Any], state)


class Traffic:
    """Bytes on the wire (encoded, headers included) of a page's requests, from the DevTools protocol."""

    def __init__(self, page: Page) -> None:
        self.urls: dict[str, str] = {}
        self.bytes: list[tuple[str, int]] = []
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.on("Network.requestWillBeSent", lambda e: self.urls.__setitem__(e["requestId"], e["request"]["url"]))
        cdp.on("Network.loadingFinished",
               lambda e: self.bytes.append((self.urls.get(e["requestId"], ""), int(e["encodedDataLength"]))))

    def take(self) -> tuple[int, int]:
        """(API bytes, all bytes) since the last take."""
        got, self.bytes = self.bytes, []
        return sum(n for u, n in got if "/api/" in u), sum(n for _, n in got)


def wait_drawn(page: Page, view: str, timeout: float = 30_000) -> None:
    page.wait_for_function("v => document.querySelector('.uv-app')?.dataset.drawn === v", arg=view, timeout=timeout)


def steps_of(page: Page, url: str, tid: str, ci: int) -> list[tuple[int, int]]:
    """(pass, step) of every view of a context's passes, but the steps folded out of the stepping (→ skips them)."""
    trace = page.request.get(f"{url}api/traces/{tid}").json()
    out = []
    for p in trace["contexts"][ci]["passes"]:
        folded = page.request.get(f"{url}api/traces/{tid}/contexts/{ci}/passes/{p['index']}/steps/0").json()["folded"]
        out += [(p["index"], k) for k in range(p["steps"] + 1) if k not in folded]
    return out


def kernel_with(page: Page, url: str, opts: list[dict]) -> str:
    """The trace of the zoo gemm's kernel lowered again with `opts` (its one context is that kernel)."""
    r = page.request.post(f"{url}api/traces/{ZOO_TRACE}/contexts/{ZOO_CONTEXT}/opts", data={"opts": opts})
    if not r.ok:
        raise SystemExit(f"the opts do not apply: {r.text()}")
    return r.json()["trace_id"]


def bench_steps(browser: Browser, url: str, state: dict[str, Any], opts: list[dict] | None) -> None:
    page = browser.new_page(viewport={"width": 1600, "height": 950}, storage_state=state)
    tid, ci = (kernel_with(page, url, opts), 0) if opts is not None else (ZOO_TRACE, ZOO_CONTEXT)
    steps = steps_of(page, url, tid, ci)
    page.close()

    cold_api, cold_all, cold_ms = [], [], []
    for pi, k in steps:
        page = browser.new_page(viewport={"width": 1600, "height": 950}, storage_state=state)
        traffic = Traffic(page)
        page.goto(f"{url}#/t/{tid}/c/{ci}/p/{pi}/s/{k}")
        wait_drawn(page, f"{tid}/{ci}/{pi}/{k}")
        cold_ms.append(page.evaluate("performance.now()"))
        api, total = traffic.take()
        cold_api.append(api)
        cold_all.append(total)
        page.close()

    page = browser.new_page(viewport={"width": 1600, "height": 950}, storage_state=state)
    traffic = Traffic(page)
    page.goto(f"{url}#/t/{tid}/c/{ci}/p/0/s/0")
    wait_drawn(page, f"{tid}/{ci}/0/0")
    traffic.take()
    warm_api, warm_ms = [], []
    for (pi, k), (prev_pi, _) in zip(steps[1:], steps):
        key = "ArrowRight" if pi == prev_pi else "ArrowDown"
        t0 = page.evaluate("performance.now()")
        page.keyboard.press(key)
        wait_drawn(page, f"{tid}/{ci}/{pi}/{k}")
        warm_ms.append(page.evaluate(f"performance.now() - {t0}"))
        warm_api.append(traffic.take()[0])
    page.close()

    kb = 1 / 1024
    what = f"zoo {ZOO_TRACE}, kernel context {ZOO_CONTEXT}" if opts is None else f"zoo {ZOO_TRACE} with opts {opts}"
    print(f"(a) {what}: {len(steps)} steps over "
          f"{len({p for p, _ in steps})} passes")
    print(f"    opened from a link, fresh page: API {statistics.median(cold_api) * kb:.1f} KB median "
          f"(max {max(cold_api) * kb:.1f}), everything incl. the bundle {statistics.median(cold_all) * kb:.1f} KB "
          f"(max {max(cold_all) * kb:.1f}); drawn {statistics.median(cold_ms):.0f} ms after navigation "
          f"(max {max(cold_ms):.0f})")
    print(f"    by keyboard in one page: API {statistics.median(warm_api) * kb:.1f} KB median "
          f"(max {max(warm_api) * kb:.1f}); drawn {statistics.median(warm_ms):.0f} ms after the key "
          f"(max {max(warm_ms):.0f})")


# A data source (frontend/src/data.js) serving one pass whose graph has `n` nodes, like an expanded kernel:
# index math over three ranges, loads, ALU chains stored every 24 values, a Sink over everything unused.
SYNTHETIC_PAGE = """<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="./app.css">
<link rel="icon" href="data:,"></head><body class="uv-page"><div id="uopviz"></div><script type="module">
import { mount } from "./app.js";
const N = %(n)d;
const meta = await (await fetch("./api/meta")).json();
const colors = Object.fromEntries(meta.op_groups.flatMap(g => g.ops.map(op => [op, [g.name, g.color]])));
const axis = Object.fromEntries(meta.axis_types.map(t => [t.name, t.color]));
const nodes = [];
const add = (op, src, extra = {}) => {
  const [group, color] = colors[op] ?? [null, meta.other_color];
  const id = String(nodes.length).padStart(16, "0");
  nodes.push({ id, op, dtype: "float32", arg: "", src, shape: [], group, axis_type: null, color, ...extra });
  return id;
};
let seed = 7;
const rand = (n) => ((seed = (seed * 1103515245 + 12345) %% 2147483648) %% n);
const bounds = [add("Const", [], { arg: "256" }), add("Const", [], { arg: "64" }), add("Const", [], { arg: "512" })];
const ranges = [["GLOBAL", 0], ["UPCAST", 1], ["REDUCE", 2]].map(([t, i]) =>
  add("Range", [bounds[i]], { arg: `r${i} ${t}`, axis_type: t, color: axis[t], group: "Ordering" }));
const params = [0, 1, 2].map((slot) => add("Param", [], { arg: `slot ${slot}` }));
const consts = [1, 2, 4, 8, 16].map((v) => add("Const", [], { arg: String(v) }));
let lane = [];
while (nodes.length < N - 8) {
  const idx = add("Add", [ranges[rand(3)], add("Mul", [ranges[rand(3)], consts[rand(5)]])]);
  const load = add("Load", [add("Index", [params[1 + rand(2)], idx])]);
  const acc = lane.length ? lane[lane.length - 1 - rand(Math.min(lane.length, 3))] : consts[0];
  lane.push(add(["Mul", "Add", "Max"][rand(3)], [load, acc]));
  if (lane.length === 24) {
    add("Store", [add("Index", [params[0], idx]), lane[lane.length - 1]]);
    lane = [];
  }
}
while (nodes.length < N - 1) add("Const", [], { arg: String(nodes.length) });
const used = new Set(nodes.flatMap((n) => n.src));
const root = add("Sink", nodes.filter((n) => !used.has(n.id)).map((n) => n.id), { dtype: "void" });
const step = { root, steps: 0, nodes, added: [], removed: [], rebuilt: [], rule: null, match: null, replacement: null,
  changes: [], changed: 0, folded: [], summary: [] };
const source = {
  meta: async () => meta,
  traces: async () => [{ id: "synthetic", name: "synthetic", source: "bench", contexts: 1 }],
  trace: async () => ({ id: "synthetic", name: "synthetic", source: "bench", device: null, origin: null, output: null,
    contexts: [{ index: 0, name: "r_g256_u64_R512", label: "r_g256_u64_R512", kind: "kernel", axes: [], opts: [],
      stack: [], time_ns: 0, passes: [{ index: 0, name: "rangeified", stage: "Rangeify", depth: 0, parent: null,
        steps: 0, error: null, time_ns: 0, rules: [], opt: null }] }] }),
  step: async () => step,
  kernel: async () => { throw new Error("no kernel"); },
  applyOpts: async () => { throw new Error("no opts"); },
};
// the main thread's health from mount() until the graph is drawn: gaps between animation frames, long tasks
window.gaps = []; window.longTasks = [];
window.t0 = performance.now();
new PerformanceObserver((list) => window.longTasks.push(
  ...list.getEntries().filter((e) => e.startTime >= window.t0).map((e) => e.duration))).observe({ type: "longtask" });
let last = window.t0;
const frame = (now) => { window.gaps.push(now - last); last = now; requestAnimationFrame(frame); };
requestAnimationFrame(frame);
window.nodeCount = nodes.length;
mount(document.getElementById("uopviz"), source, { hash: false });
</script></body></html>"""


def bench_synthetic(browser: Browser, url: str, state: dict[str, Any], runs: int, n: int = 2000) -> None:
    first, whole, gaps, tasks, shown, total = [], [], [], [], 0, 0
    for _ in range(runs):
        page = browser.new_page(viewport={"width": 1600, "height": 950}, storage_state=state)
        page.route(f"{url}bench.html", lambda route: route.fulfill(content_type="text/html",
                                                                    body=SYNTHETIC_PAGE % {"n": n}))
        page.goto(f"{url}bench.html")
        wait_drawn(page, "synthetic/0/0/0", timeout=60_000)
        first.append(page.evaluate("performance.now() - window.t0"))
        shown = page.locator(".uv-node").count()
        # then all of it: "fit" frames the whole graph, and every node is drawn
        t0 = page.evaluate("performance.now()")
        page.click(".uv-fit")
        page.wait_for_function("() => document.querySelectorAll('.uv-node').length == "
                               "document.querySelector('.uv-graph-svg').dataset.nodes", timeout=60_000)
        whole.append(page.evaluate(f"performance.now() - {t0}"))
        page.wait_for_timeout(300)  # let the observers see the last frames
        stats = page.evaluate("({gaps: window.gaps, longTasks: window.longTasks, nodes: window.nodeCount,"
                              " total: document.querySelectorAll('.uv-node').length})")
        assert stats["nodes"] == n, stats["nodes"]
        total = stats["total"]
        gaps.append(max(stats["gaps"]))
        tasks.append(max(stats["longTasks"], default=0))
        page.close()
    print(f"(b) synthetic graph of {n} nodes ({total} drawn: shared nodes once per use), {runs} runs:")
    print(f"    first view ({shown} nodes near the root) drawn {statistics.median(first):.0f} ms after mount "
          f"(max {max(first):.0f}); the whole graph drawn {statistics.median(whole):.0f} ms after \"fit\" "
          f"(max {max(whole):.0f})")
    print(f"    main thread meanwhile: longest gap between frames {statistics.median(gaps):.0f} ms "
          f"(max {max(gaps):.0f}), longest task {statistics.median(tasks):.0f} ms (max {max(tasks):.0f})")


BIG = ("gemm", "conv2d", "attention")
ARTIFACTS = Path(__file__).resolve().parents[1] / "bench-artifacts" / "ui"


def biggest_last_step(page: Page, url: str, tid: str) -> str:
    """trace/context/pass/step of the last step of the trace's kernel with the longest Linear program."""
    contexts = page.request.get(f"{url}api/traces/{tid}").json()["contexts"]
    size = {c["index"]: len(page.request.get(f"{url}api/traces/{tid}/contexts/{c['index']}/kernel").json()["linear"]
                            .splitlines()) for c in contexts if c["kind"] == "kernel"}
    ci = max(size, key=lambda i: size[i])
    last = contexts[ci]["passes"][-1]
    return f"{tid}/{ci}/{last['index']}/{last['steps']}"


def draw_as_graph(browser: Browser, url: str, state: dict[str, Any], view: str, views_on: bool, shot: Path
                  ) -> tuple[int, int, float]:
    """A fresh page at the step before `view`, switched from the listing to the graph, with the big-graph views on
    (as a late stage opens) or off; then the step `view` by the keyboard, whose draw is measured (its data, its layout
    in the warm worker, its first frame): (drawn nodes, the graph's distinct nodes, ms)."""
    page = browser.new_page(viewport={"width": 1600, "height": 1000}, storage_state=state)
    tid, ci, pi, k = view.split("/")
    before = f"{tid}/{ci}/{pi}/{int(k) - 1}"
    page.goto(f"{url}#/t/{tid}/c/{ci}/p/{pi}/s/{int(k) - 1}")
    wait_drawn(page, before, timeout=120_000)
    for name in ["listing"] + ([] if views_on else ["index", "lanes"]):
        page.evaluate("document.querySelector('.uv-app').removeAttribute('data-drawn')")
        page.click(f".uv-graph-tools .uv-{name}")
        wait_drawn(page, before, timeout=120_000)
    page.evaluate("performance.clearMeasures()")
    page.keyboard.press("ArrowRight")
    wait_drawn(page, view, timeout=120_000)
    page.wait_for_function("() => document.querySelector('.uv-graph-svg')?.dataset.nodes", timeout=120_000)
    ms = page.evaluate("performance.getEntriesByType('measure').filter(m => m.name.startsWith('uopviz:draw'))"
                       ".at(-1).duration")
    drawn = int(page.get_attribute(".uv-graph-svg", "data-nodes") or 0)
    total = int(page.inner_text(".uv-drawn").split("·")[1].split()[0])
    page.screenshot(path=shot)
    page.close()
    return drawn, total, ms


def bench_collapsing(browser: Browser, url: str, state: dict[str, Any], runs: int) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(storage_state=state)
    views = {tid: biggest_last_step(page, url, tid) for tid in BIG}
    page.close()
    print("(c) the last step of each big kernel as a graph, at 1600x1000: before (index arithmetic and copies drawn "
          f"as nodes) and after (folded into text, collapsed), {runs} runs, screenshots in {ARTIFACTS}")
    for tid, view in views.items():
        row = {}
        for on, label in ((False, "before"), (True, "after")):
            got = [draw_as_graph(browser, url, state, view, on, ARTIFACTS / f"ui-{tid}-{label}.png")
                   for _ in range(runs)]
            row[label] = (got[0][0], got[0][1], statistics.median(g[2] for g in got), max(g[2] for g in got))
        (b_drawn, total, b_ms, b_max), (a_drawn, _, a_ms, a_max) = row["before"], row["after"]
        print(f"    {tid:9s} {view:12s} {total:5d} nodes: before {b_drawn:5d} drawn in {b_ms:5.0f} ms "
              f"(max {b_max:.0f}); after {a_drawn:4d} drawn in {a_ms:5.0f} ms (max {a_max:.0f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of the synthetic graph")
    ap.add_argument("--opts", type=json.loads, default=None, metavar="JSON",
                    help='time the gemm kernel lowered with these opts instead, e.g. '
                         '\'[{"op": "SPLIT", "axis": 1, "arg": [16, "UPCAST", false]}]\'')
    args = ap.parse_args()
    if (chromium := find_chromium(__file__)) is None:
        return 1
    with serve() as printed, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            url = base_and_token(printed)[0]
            state = log_in(browser, printed)
            print(f"uopviz serve at {url}, Chromium {browser.version}")
            bench_steps(browser, url, state, args.opts)
            bench_synthetic(browser, url, state, args.runs)
            bench_collapsing(browser, url, state, args.runs)
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
