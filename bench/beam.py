"""BEAM against the unoptimized kernels, the heuristic's opts and NumPy, on the CPU, in one process and one run.

For the zoo's gemm (1024), sum (16M floats), softmax (4096x1024) and elementwise chain (16M floats): the median
time of the program's kernels unoptimized, with the heuristic's opts and with BEAM's (width 4), each against
NumPy doing the same work (the GFLOP/s or GB/s ratio, which is NumPy's time / ours), and the wall time of the
search on gemm; then the targets, PASS or MISS. Every variant's answer is checked against NumPy before it is
timed. Unless --db is given, a fresh temporary cache directory holds the tuning database and the compiled
kernels, so the search compiles and times everything it reports.

    python bench/beam.py [KERNEL ...] [--db PATH] [--beam 4] [--repeats 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from uopviz.kernels import ZOO

SIZES = {"gemm": {"M": 1024, "K": 1024, "N": 1024}, "sum": {"N": 16 * 1024 * 1024}, "softmax": {"R": 4096, "C": 1024},
         "elementwise": {"N": 16 * 1024 * 1024}}
TARGETS = {"gemm": 0.35, "sum": 1.0, "softmax": 1.0, "elementwise": 1.5}  # BEAM's speed as a multiple of NumPy's
MEASURE = {"gemm": "GFLOP/s", "sum": "GB/s", "softmax": "GB/s", "elementwise": "GB/s"}
SEARCH_TARGET_S = 120.0  # BEAM width 4 on gemm 1024
VARIANTS = ("unoptimized", "heuristic", "BEAM")


def median_time(fn: Callable[[], float], repeats: int) -> float:
    """Median of fn's reported seconds over repeats, after one warm-up call."""
    fn()
    return statistics.median(fn() for _ in range(repeats))


def wall(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench(name: str, width: int, repeats: int, db: Path | None) -> tuple[dict[str, float], float, float]:
    """Median seconds per variant, NumPy's median seconds, and the search's wall time."""
    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.pipeline import scheduler as scheduler_of
    from uopviz.runtime import buffer as buffers
    from uopviz.runtime import device as devices
    from uopviz.search import beam

    z = ZOO[name]
    sizes = z.sizes(**SIZES[name])
    out, arrays = z.build(sizes, "CPU")
    graph = schedule([out.uop])
    kernels = kernels_of(graph)
    want = z.reference(*arrays)
    target = devices.get("CPU").target
    t0 = time.perf_counter()
    searched = [beam(ast, width, "CPU", db=db).opts for ast, _ in kernels]
    search_s = time.perf_counter() - t0
    opts = {"unoptimized": [() for _ in kernels],
            "heuristic": [tuple(heuristic_opts(scheduler_of(ast, target))) for ast, _ in kernels],
            "BEAM": searched}
    result = graph.src[0].src[0]  # the Buffer the program writes
    times = {}
    for v in VARIANTS:
        progs = [(compile_kernel(ast, "CPU", list(o))[1], [buffers.handle(b) for b in bufs])
                 for (ast, bufs), o in zip(kernels, opts[v], strict=True)]

        def run(progs: list[tuple[Any, list[Any]]] = progs) -> float:
            return sum(prog(handles, wait=True) for prog, handles in progs)

        run()
        got = buffers.to_numpy(result)[: want.size].reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=z.rtol, atol=z.rtol, err_msg=f"{name} {v}")
        times[v] = median_time(run, repeats)
    numpy_s = median_time(lambda: wall(lambda: z.reference(*arrays)), repeats)
    return times, numpy_s, search_s


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("kernels", nargs="*", default=list(SIZES), metavar="KERNEL", help=f"of {', '.join(SIZES)}")
    ap.add_argument("--db", type=Path, help="tuning database (default: a fresh one in a temporary directory)")
    ap.add_argument("--beam", type=int, default=4, help="beam width (default: 4)")
    ap.add_argument("--repeats", type=int, default=10, help="timed runs per measurement (default: 10)")
    args = ap.parse_args()
    if unknown := set(args.kernels) - set(SIZES):
        ap.error(f"unknown kernel(s) {', '.join(sorted(unknown))}; choose from {', '.join(SIZES)}")
    if args.db is None:
        os.environ["UOPVIZ_CACHE_DIR"] = tempfile.mkdtemp(prefix="uopviz-bench-")
    from uopviz.runtime.cpu import cache_dir, cpu_name
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; BEAM width {args.beam}; median of {args.repeats} runs "
          f"after a warm-up; database {args.db or cache_dir() / 'tuning.db'}", flush=True)
    print(f"{'kernel':12s} {'variant':12s} {'ms':>9s} {'GFLOP/s':>8s} {'GB/s':>7s} {'numpy ms':>9s} "
          f"{'vs numpy':>8s}", flush=True)
    verdicts = []
    for name in args.kernels:
        z, sizes = ZOO[name], ZOO[name].sizes(**SIZES[name])
        times, numpy_s, search_s = bench(name, args.beam, args.repeats, args.db)
        for v in VARIANTS:
            t = times[v]
            print(f"{name:12s} {v:12s} {t * 1e3:9.3f} {z.flops(sizes) / t / 1e9:8.2f} {z.bytes(sizes) / t / 1e9:7.2f} "
                  f"{numpy_s * 1e3:9.3f} {numpy_s / t:7.2f}x", flush=True)
        print(f"{name:12s} BEAM search took {search_s:.1f} s", flush=True)
        ratio = numpy_s / times["BEAM"]
        verdicts.append((f"{name} after BEAM: {ratio:.2f}x NumPy's {MEASURE[name]} (target >= {TARGETS[name]}x)",
                         ratio >= TARGETS[name]))
        if name == "gemm":
            verdicts.append((f"BEAM width {args.beam} on gemm 1024: {search_s:.1f} s "
                             f"(target <= {SEARCH_TARGET_S:.0f} s)", search_s <= SEARCH_TARGET_S))
    print("\ntargets:")
    for text, ok in verdicts:
        print(f"  {'PASS' if ok else 'MISS'}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
