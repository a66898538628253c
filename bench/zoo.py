"""Time every zoo kernel on every available device against NumPy doing the same work, in one run.

For each kernel and device: the median over repeats of the kernels' own time (compiled once, inputs resident
on the device; the CL time is the device's), GFLOP/s and GB/s from the zoo's work counts, the median time
of the NumPy reference, and the ratio NumPy time / uopviz time (above 1: uopviz is faster). Results are
checked against NumPy before they are timed. The PYTHON interpreter runs the small sizes only.

    python bench/zoo.py [KERNEL ...] [--devices CPU CL PYTHON] [--repeats 5] [--small]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
from uopviz.kernels import ZOO

from uopviz.pipeline import schedule
from uopviz.realize import run_schedule
from uopviz.runtime import device as devices


def median_time(fn, repeats: int) -> float:
    fn()
    return statistics.median(fn() for _ in range(repeats))


def wall(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="*", default=list(ZOO))
    ap.add_argument("--devices", nargs="*", default=["CPU", "CL", "PYTHON"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--small", action="store_true", help="small sizes on every device")
    args = ap.parse_args()
    devs = devices.available(args.devices)
    print(f"devices: {', '.join(devs)}; median of {args.repeats} runs after one warm-up")
    print(f"{'kernel':13s} {'device':6s} {'sizes':28s} {'ms':>9s} {'GFLOP/s':>8s} {'GB/s':>7s} "
          f"{'numpy ms':>9s} {'vs numpy':>8s}")
    for name in args.kernels:
        z = ZOO[name]
        for dev in devs:
            sizes = z.sizes(small=args.small or dev == "PYTHON")
            out, arrays = z.build(sizes, dev)
            graph = schedule([out.uop])
            run_schedule(graph)  # compiles, and gives the result to check
            got = out.realize().numpy()
            want = z.reference(*arrays)
            np.testing.assert_allclose(got, want, rtol=z.rtol, atol=z.rtol)
            t = median_time(lambda g=graph: run_schedule(g, timed=True), args.repeats)
            tn = median_time(lambda z=z, a=arrays: wall(lambda: z.reference(*a)), args.repeats)
            label = ",".join(f"{k}={v}" for k, v in sizes.items())
            print(f"{name:13s} {dev:6s} {label:28s} {t * 1e3:9.3f} {z.flops(sizes) / t / 1e9:8.2f} "
                  f"{z.bytes(sizes) / t / 1e9:7.2f} {tn * 1e3:9.3f} {tn / t:7.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
