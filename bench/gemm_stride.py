"""Why power-of-two gemms run at half the speed of gemm 1000: the same kernel (the heuristic's opts) over A and B
as they are, and over copies whose rows are padded by a few floats (then sliced back to the same shapes).

The tile broadcasts several rows of A at each step of k. With a row stride that is a multiple of 4 KiB those rows
fall in one set of the first-level cache and evict each other; padding the stride spreads them over the sets.
A gap between the two columns is the case for a packing pass (copying a matmul operand into a padded or panel
layout before the kernel). Kernels are timed in turns, medians of --reps.

    python bench/gemm_stride.py [--sizes 512 1024 1000] [--pad 16] [--reps 15]
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


def programs(c: Any) -> list[tuple[Any, list[Any], str]]:
    """The kernels computing Tensor c with the heuristic's opts: (program, buffer handles, name) each."""
    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.pipeline import scheduler as scheduler_of
    from uopviz.runtime import buffer as buffers
    from uopviz.runtime import device as devices
    target = devices.get("CPU").target
    out = []
    for ast, bufs in kernels_of(schedule([c.uop])):
        kernel, prog = compile_kernel(ast, "CPU", list(heuristic_opts(scheduler_of(ast, target))))
        out.append((prog, [buffers.handle(b) for b in bufs], kernel.name))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 1000])
    ap.add_argument("--pad", type=int, default=16, help="floats added to each row of the padded copies")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    from uopviz.tensor import Tensor
    rng = np.random.default_rng(0)
    print(f"gemm n x n x n, the heuristic's opts; rows padded by {args.pad} floats; medians of {args.reps}")
    print(f"{'n':>6} {'kernel':<32} {'as is':>14} {'padded rows':>14}")
    for n in args.sizes:
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        pad = ((0, 0), (0, args.pad))
        plain = Tensor(a).realize() @ Tensor(b).realize()
        padded = Tensor(np.pad(a, pad)).realize()[:, :n] @ Tensor(np.pad(b, pad)).realize()[:, :n]
        variants = {"as is": programs(plain), "padded": programs(padded)}
        for progs in variants.values():  # the same answer both ways (the last kernel's output, a CPU array)
            for prog, handles, _ in progs:
                prog(handles)
            got = progs[-1][1][0][: n * n].reshape(n, n)
            np.testing.assert_allclose(got, a @ b, rtol=2e-3, atol=2e-3)
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.reps):
            for name, progs in variants.items():
                t0 = time.perf_counter()
                for prog, handles, _ in progs:
                    prog(handles)
                times[name].append(time.perf_counter() - t0)
        gflops = {k: 2 * n ** 3 / statistics.median(v) / 1e9 for k, v in times.items()}
        print(f"{n:>6} {variants['as is'][0][2]:<32} {gflops['as is']:>8.0f} GFLOP/s {gflops['padded']:>8.0f} GFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
