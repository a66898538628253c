"""An elementwise chain and a matmul on 1 and 2 CPU devices (`CPU:0`, and `CPU:0`+`CPU:1`: one thread each), in
one run, with the speed-up of 2 devices over 1.

Each case realizes a fresh graph over inputs already on the devices (the elementwise chain's input split along
axis 0; the matmul's left operand split by rows and the right one replicated), so a time is the whole realize:
the shard pass, the schedule and the kernels, each device's on a thread of its own. Answers are checked against
NumPy first. The machine is noisy: the figures are medians of `--reps` runs.

    python bench/multi.py [--n 4194304] [--m 768] [--reps 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from uopviz import Tensor

ONE, TWO = ("CPU:0",), ("CPU:0", "CPU:1")


def place(a: np.ndarray, devices: tuple[str, ...], axis: int | None) -> Tensor:
    """a on one device, or split along axis (replicated with None) over several; realized."""
    t = Tensor(a, device=devices[0])
    return (t if len(devices) == 1 else t.shard(devices, axis)).realize()


def median_s(fn: Callable[[], Tensor], reps: int) -> float:
    fn().realize()  # compiles
    times = []
    for _ in range(reps):
        out = fn()
        t0 = time.perf_counter()
        out.realize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def chain(x: Tensor) -> Tensor:
    return ((x * 1.5 + 2.0).relu() * x - 0.25).exp2().sqrt()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 22, help="elements of the elementwise chain")
    ap.add_argument("--m", type=int, default=768, help="the matmul is m x m @ m x m")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.n).astype(np.float32)
    a = rng.standard_normal((args.m, args.m)).astype(np.float32)
    b = rng.standard_normal((args.m, args.m)).astype(np.float32)
    want_chain = np.sqrt(np.exp2(np.maximum(x * 1.5 + 2.0, 0) * x - 0.25))
    print(f"{os.cpu_count()} cores; medians of {args.reps} realizes")
    print(f"{'case':<34}{'1 device':>12}{'2 devices':>12}{'speed-up':>10}")
    cases = {
        f"elementwise chain ({args.n} f32)": (lambda d: (place(x, d, 0),), chain, want_chain),
        f"matmul {args.m}x{args.m}x{args.m}": (lambda d: (place(a, d, 0), place(b, d, None)),
                                               lambda p, q: p @ q, a @ b),
    }
    for name, (inputs, fn, want) in cases.items():
        times = []
        for devices in (ONE, TWO):
            ins = inputs(devices)
            got = fn(*ins).numpy()
            np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
            times.append(median_s(lambda ins=ins, fn=fn: fn(*ins), args.reps))
        print(f"{name:<34}{times[0] * 1e3:>10.2f}ms{times[1] * 1e3:>10.2f}ms{times[0] / times[1]:>9.2f}x")


if __name__ == "__main__":
    main()
