"""The `prefetch` pass, measured: zoo kernels lowered with the CPU's software prefetches against the same kernels
lowered without them, with the heuristic's opts.

Each case's kernels are lowered twice, once for the CPU's Target and once for a copy with `prefetch=0` (the pass
then changes nothing), both answers checked against NumPy, then the two are timed in turns (bench/peers.py's
measure: each round runs each variant untimed for a moment, then times a burst). The table gives the medians, their
spread, how many prefetch statements the kernels hold, and `ratio`, the median of with/without over runs paired
within a round (so the load of a shared machine mostly cancels). A case with no prefetch shows how far noise
moves a ratio of equal kernels. `--device CPU:0` runs every kernel on one core.

    python bench/prefetch.py [--repeats 40] [--device CPU:0]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/prefetch.py` from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import check, spread
from support import measure
from uopviz.kernels import ZOO

CASES: dict[str, tuple[str, dict[str, int]]] = {
    "gemm 1000": ("gemm", {"M": 1000, "K": 1000, "N": 1000}),
    "gemm 1024 (packed)": ("gemm", {"M": 1024, "K": 1024, "N": 1024}),
    "gemm 48x1000x1000": ("gemm", {"M": 48, "K": 1000, "N": 1000}),
    "softmax 4096x1024": ("softmax", {"R": 4096, "C": 1024}),
    "softmax 4096x1000": ("softmax", {"R": 4096, "C": 1000}),
    "layernorm 4096x1024": ("layernorm", {"R": 4096, "C": 1024}),
    "attention 512x64": ("attention", {"S": 512, "D": 64}),
    "conv2d (none)": ("conv2d", {}),
}


def runner(out: Any, on: bool, device: str) -> tuple[Callable[[], None], Callable[[], np.ndarray], int]:
    """A function running out's kernels (heuristic opts) lowered with or without the pass, one reading the result,
    and the number of prefetch statements in their sources."""
    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.pipeline import kernels_of, lower, schedule
    from uopviz.pipeline import scheduler as scheduler_of
    from uopviz.runtime import buffer as buffers
    from uopviz.runtime import device as devices

    rt = devices.get(device)
    target = rt.target if on else dataclasses.replace(rt.target, prefetch=0)
    graph = schedule([out.uop])
    progs, count = [], 0
    for ast, bufs in kernels_of(graph):
        kernel = lower(ast, target, heuristic_opts(scheduler_of(ast, rt.target)))
        count += (kernel.source or "").count("__builtin_prefetch")
        progs.append((rt.compile(kernel), [buffers.handle(b) for b in bufs]))
    result = graph.src[0].src[0]

    def run() -> None:
        for prog, handles in progs:
            prog(handles)

    return run, lambda: buffers.to_numpy(result), count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--device", default="CPU", help="CPU (every core) or CPU:0 (one core)")
    ap.add_argument("cases", nargs="*", help=f"case names (default: all): {', '.join(CASES)}")
    args = ap.parse_args()
    from uopviz.tensor import Tensor

    print(f"{'case':22} {'prefetch ms':>14} {'without ms':>14} {'prefetches':>10} {'ratio':>6}")
    for label, (name, sizes) in CASES.items():
        if args.cases and label not in args.cases:
            continue
        z = ZOO[name]
        arrays = z.arrays(z.sizes(**sizes))
        want = z.reference(*arrays)
        runners: dict[str, Callable[[], Any]] = {}
        count = 0
        for variant in ("prefetch", "without"):
            run, read, n = runner(z.program(*(Tensor(a, device=args.device) for a in arrays)), variant == "prefetch",
                                  args.device)
            count = max(count, n)
            run()
            check(label, variant, read()[: want.size], want.reshape(-1), z.rtol)
            runners[variant] = run
        samples = measure(runners, args.repeats, budget_s=10.0)
        ratio = statistics.median(a / b for a, b in zip(samples["prefetch"], samples["without"], strict=True))
        cells = [f"{statistics.median(samples[k]) * 1e3:8.3f} ±{spread(samples[k]) * 100:2.0f}%"
                 for k in ("prefetch", "without")]
        print(f"{label:22} {cells[0]:>14} {cells[1]:>14} {count:>10} {ratio:6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
