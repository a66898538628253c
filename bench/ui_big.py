"""The web UI on a big trace: a recorded GPT training step (examples/models/gpt.py, its @jit step as
bench/kernel_profile.py builds it: ~600 contexts, ~20 MB), served by `uopviz serve FILE` in a child process and
opened in headless Chromium (issue 31's targets in brackets):

- the server's start (until it prints its URL: the file loaded);
- from navigating to the page to its first graph drawn [<= 2 s], and within it the first `GET /api/traces` and
  `GET /api/traces/<id>` (the browser's resource timing);
- opening kernels by their link (`#/t/ID/c/CI/p/0/s/0`) in that page, spread over the whole trace: the time from
  the hash change to the graph drawn [<= 0.5 s each];
- the server's memory (VmRSS, and VmHWM: its peak) against the file's size, and what the trace adds to a server
  holding a trace of one small kernel [<= 3x] (that server is ~70 MB: the interpreter, NumPy, FastAPI and the CPU
  runtime; the devices are listed by a child process, backend/device_list.py).

    python bench/ui_big.py [--trace PATH] [--runs 3] [--kernels 20]

Without --trace (or where its file is missing) a GPT step is recorded first (about 30 s): two calls of the step
(the first runs eagerly, the second captures the @jit graph) and a third inside `uopviz.profile()`, so the trace also
carries a profile. Needs Debian's Chromium and Python Playwright. Prints medians (and maxima) and the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright
from support import find_chromium
from uopviz.backend.child import CHROMIUM_ARGS, base_and_token, served_process

DEFAULT_TRACE = Path(tempfile.gettempdir()) / "uopviz-bench-gpt-step.json"


def record_gpt_step(path: Path) -> None:
    """Record the example GPT's training step (compile, capture, one profiled call) into `path`."""
    from kernel_profile import gpt_step

    import uopviz
    step, x, y = gpt_step("CPU")
    t0 = time.perf_counter()
    with uopviz.trace() as tr:
        step(x, y)
        step(x, y)
        with uopviz.profile():
            step(x, y)
    tr.save(path)
    print(f"recorded {len(tr.contexts)} contexts in {time.perf_counter() - t0:.1f} s: {path} "
          f"({path.stat().st_size / 1e6:.1f} MB)")


def tiny_trace(path: Path) -> None:
    """A trace of one small elementwise kernel: a server holding it is the baseline of the memory figure."""
    import numpy as np

    import uopviz
    from uopviz import Tensor
    with uopviz.trace() as tr:
        (Tensor(np.ones(16, np.float32), device="CPU") + 1).realize()
    tr.save(path)


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in kB (Linux)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def drawn(page: Page, view: str, timeout: float = 60_000) -> None:
    page.wait_for_function("v => document.querySelector('.uv-app')?.dataset.drawn === v", arg=view, timeout=timeout)


def resource_s(page: Page, suffix: str) -> float:
    """The duration of the page's first request whose URL ends with suffix (resource timing), in seconds."""
    ms = page.evaluate("s => performance.getEntriesByType('resource').find(e => e.name.split('?')[0].endsWith(s))"
                       "?.duration ?? NaN", suffix)
    return float(ms) / 1000


def one_run(chromium: str, trace: Path, kernels: int) -> dict[str, float | list[float]]:
    t0 = time.perf_counter()
    with served_process(tempfile.mkdtemp(prefix="uopviz-bench-"), str(trace)) as (printed, proc), \
            sync_playwright() as pw:
        started = time.perf_counter() - t0
        base, _ = base_and_token(printed)
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 950})
        page.goto(printed)
        page.wait_for_function("() => document.querySelector('.uv-app')?.dataset.drawn", timeout=120_000)
        first_drawn = page.evaluate("performance.now()") / 1000
        tid = page.evaluate("document.querySelector('.uv-app').dataset.drawn").split("/")[0]
        listed, outline = resource_s(page, "/api/traces"), resource_s(page, f"/api/traces/{tid}")
        contexts = page.evaluate(f"fetch('{base}api/traces/{tid}', {{headers: {{Authorization: "
                                 "`token ${localStorage.getItem('uopviz-token')}`}}).then(r => r.json())"
                                 ".then(t => t.contexts.filter(c => c.kind === 'kernel').map(c => c.index))")
        picked = [contexts[round(i * (len(contexts) - 1) / max(1, kernels - 1))] for i in range(kernels)]
        opened = []
        for ci in dict.fromkeys(picked):
            view = f"{tid}/{ci}/0/0"
            page.evaluate("h => { window.t0 = performance.now(); location.hash = h; }", f"#/t/{tid}/c/{ci}/p/0/s/0")
            drawn(page, view)
            opened.append((page.evaluate("performance.now() - window.t0")) / 1000)
        mem = memory_kb(proc.pid)
        browser.close()
    size_kb = trace.stat().st_size / 1024
    return {"start": started, "first_drawn": first_drawn, "list": listed, "outline": outline, "kernels": opened,
            "rss_x": mem["VmRSS"] / size_kb, "hwm_x": mem["VmHWM"] / size_kb, "rss_mb": mem["VmRSS"] / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--trace", type=Path, default=DEFAULT_TRACE, help=f"the trace file (default {DEFAULT_TRACE}; "
                    "recorded when missing)")
    ap.add_argument("--runs", type=int, default=3, help="fresh servers and pages (medians are printed)")
    ap.add_argument("--kernels", type=int, default=20, help="kernels opened per run, spread over the trace")
    args = ap.parse_args()
    if (chromium := find_chromium(__file__)) is None:
        return 1
    if not args.trace.exists():
        record_gpt_step(args.trace)
    runs = [one_run(chromium, args.trace, args.kernels) for _ in range(args.runs)]
    tiny = Path(tempfile.mkdtemp(prefix="uopviz-bench-")) / "tiny.json"
    tiny_trace(tiny)
    base_mb = float(one_run(chromium, tiny, 1)["rss_mb"])

    def med(key: str) -> float:
        return statistics.median(float(r[key]) for r in runs)  # type: ignore[arg-type]

    opened = [t for r in runs for t in r["kernels"]]  # type: ignore[union-attr]
    print(f"{args.trace} ({args.trace.stat().st_size / 1e6:.1f} MB), {args.runs} runs, load {os.getloadavg()[0]:.1f}")
    print(f"  server start (file loaded)     {med('start'):6.2f} s")
    print(f"  first GET /api/traces          {med('list'):6.3f} s")
    print(f"  first GET /api/traces/<id>     {med('outline'):6.3f} s")
    print(f"  page to first graph drawn      {med('first_drawn'):6.2f} s   (target <= 2 s)")
    print(f"  open a kernel (hash to drawn)  {statistics.median(opened):6.3f} s median, {max(opened):.3f} s max over "
          f"{len(opened)}   (target <= 0.5 s)")
    print(f"  server memory                  {med('rss_mb'):6.0f} MB = {med('rss_x'):.2f}x the file "
          f"(peak {med('hwm_x'):.2f}x)")
    added = med("rss_mb") - base_mb
    print(f"  what the trace adds            {added:6.0f} MB = {added / (args.trace.stat().st_size / 2**20):.2f}x "
          f"the file (a server of one small kernel: {base_mb:.0f} MB)   (target <= 3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
