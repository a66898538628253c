"""Why power-of-two gemms ran at half the speed of gemm 1000, and what the `pack` pass (uopviz/schedule/pack.py)
makes of them: the heuristic's kernels over A and B as they are (the schedule without the pack pass), over copies
whose rows are padded by a few floats (then sliced back to the same shapes), and as uopviz now schedules them
(B copied into panels by a kernel of its own where its rows alias in the L1, the copy's time included).

The tile walks a strip of B's columns down all K rows for every block of A's rows. With a row stride that is a
multiple of 1-4 KiB those rows fall into a few sets of the cache and evict each other, so the strip streams from
the last-level cache; a padded stride spreads the rows over the sets, and panels make the walk sequential.
Kernels are timed in turns, medians of --reps; every variant's answer is checked against NumPy first.

    python bench/gemm_stride.py [--sizes 512 1024 1000 768x3072x768] [--pad 16] [--reps 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/gemm_stride.py` from a checkout


def programs(c: Any, packed: bool) -> list[tuple[Any, list[Any], str]]:
    """The kernels computing Tensor c with the heuristic's opts, scheduled with or without the pack pass:
    (program, buffer handles, name) each."""
    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import SCHEDULE, Schedule, kernels_of
    from uopviz.pipeline import scheduler as scheduler_of
    from uopviz.runtime import buffer as buffers
    from uopviz.runtime import device as devices
    from uopviz.uop.ops import Ops, UOp
    target = devices.get("CPU").target
    graph = UOp(Ops.TUPLE, (c.uop,))
    for p in SCHEDULE:
        if packed or p.name != "pack":
            graph = p.run(graph, Schedule())
    out = []
    for ast, bufs in kernels_of(graph):
        kernel, prog = compile_kernel(ast, "CPU", list(heuristic_opts(scheduler_of(ast, target))))
        out.append((prog, [buffers.handle(b) for b in bufs], kernel.name))
    return out


def dims(text: str) -> tuple[int, int, int]:
    """'1024' is 1024 x 1024 x 1024; 'MxKxN' names the three."""
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) == 1:
        return parts[0], parts[0], parts[0]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"a size is N or MxKxN, got {text!r}")
    return parts[0], parts[1], parts[2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=dims, nargs="+", default=[dims(s) for s in ("512", "1024", "1000", "768x3072x768")])
    ap.add_argument("--pad", type=int, default=16, help="floats added to each row of the padded copies")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    from uopviz.tensor import Tensor
    rng = np.random.default_rng(0)
    print(f"gemm MxKxN, the heuristic's opts, GFLOP/s; rows padded by {args.pad} floats; medians of {args.reps}")
    print(f"{'size':>14} {'unpacked kernel':<30} {'as is':>7} {'padded':>7} {'packed':>7}  packed kernels")
    for m, k, n in args.sizes:
        a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
        pad = ((0, 0), (0, args.pad))
        plain = Tensor(a).realize() @ Tensor(b).realize()
        padded = Tensor(np.pad(a, pad)).realize()[:, :k] @ Tensor(np.pad(b, pad)).realize()[:, :n]
        variants = {"as is": programs(plain, False), "padded": programs(padded, False), "packed": programs(plain, True)}
        for progs in variants.values():  # the same answer every way (the last kernel's output, a CPU array)
            for prog, handles, _ in progs:
                prog(handles)
            got = progs[-1][1][0][: m * n].reshape(m, n)
            np.testing.assert_allclose(got, a @ b, rtol=2e-3, atol=2e-3)
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.reps):
            for name, progs in variants.items():
                t0 = time.perf_counter()
                for prog, handles, _ in progs:
                    prog(handles)
                times[name].append(time.perf_counter() - t0)
        gflops = {v: 2 * m * k * n / statistics.median(t) / 1e9 for v, t in times.items()}
        print(f"{f'{m}x{k}x{n}':>14} {variants['as is'][0][2]:<30} {gflops['as is']:>7.0f} {gflops['padded']:>7.0f} "
              f"{gflops['packed']:>7.0f}  {' + '.join(p[2] for p in variants['packed'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
