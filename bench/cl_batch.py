"""Building N OpenCL kernels one program each (CLRuntime.compile alone) against one program for all
(CLRuntime.libraries, then compile takes each by name), on the CL device, in turns, medians of --repeats rounds.
Each round's kernels are new (a constant differs), so neither PoCL's kernel cache nor the runtime's finds them; all
share one name (as kernels of one shape do), and each is run once and checked against NumPy.

    python bench/cl_batch.py [--kernels 10,40] [--repeats 5]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import numpy as np

from uopviz.dtype import dtypes
from uopviz.runtime.cl import CLRuntime
from uopviz.target import Kernel
from uopviz.uop.ops import Ops, UOp

SIZE = 1024
_salt = itertools.count(1)


def kernels(n: int) -> list[tuple[Kernel, float]]:
    """n kernels named alike, out = sin(a) * c + a, each with its own c."""
    made = []
    for _ in range(n):
        c = next(_salt) * 0.25
        source = (f"__kernel void E_{SIZE}(__global float* data0, __global const float* data1) {{\n"
                  f"  int g = get_global_id(0);\n  float x = data1[g];\n  data0[g] = sin(x) * {c!r}f + x;\n}}\n")
        made.append((Kernel(f"E_{SIZE}", UOp(Ops.LINEAR, ()), source, (dtypes.float32,) * 2, global_size=(SIZE,)),
                     c))
    return made


def built(rt: CLRuntime, n: int, together: bool) -> float:
    """Seconds to build and run n new kernels (each checked)."""
    ks = kernels(n)
    a = np.random.default_rng(0).standard_normal(SIZE).astype(np.float32)
    inp, out = rt.alloc(SIZE, dtypes.float32), rt.alloc(SIZE, dtypes.float32)
    rt.copyin(inp, a)
    t0 = time.perf_counter()
    if together:
        rt.libraries([k for k, _ in ks])
    for k, c in ks:
        rt.compile(k)([out, inp], wait=True)
        np.testing.assert_allclose(rt.copyout(out, SIZE, dtypes.float32), np.sin(a) * np.float32(c) + a, rtol=1e-5,
                                   atol=1e-5)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="10,40")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rt = CLRuntime()
    built(rt, 2, True)  # the compile worker started, outside the timings
    print(f"{rt.describe()['name']}: wall seconds to build and run N new kernels, median of {args.repeats}")
    print(f"{'N':>4} {'apart':>8} {'together':>9} {'ratio':>6}")
    for n in (int(x) for x in args.kernels.split(",")):
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.repeats):
            for together in (False, True):
                times[together].append(built(rt, n, together))
        apart, together_s = statistics.median(times[False]), statistics.median(times[True])
        print(f"{n:>4} {apart:>8.2f} {together_s:>9.2f} {apart / together_s:>5.1f}x")


if __name__ == "__main__":
    main()
