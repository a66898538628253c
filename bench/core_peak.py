"""The example GPT's @jit training step kernel by kernel against one core's FMA peak: how far each of the step's
slowest kernels is from what this CPU can do, measured in a way a busy machine does not upset much.

Each kernel is timed alone on the calling thread: its C source (as the CPU runtime compiles it, same compiler and
flags) is built here, and its THREAD indices are called one after another on copies of the buffers it ran on in
the step, so the pool, the other processes' share of the second core and the step's cold caches drop out. The peak
is a C loop of independent AVX-512 FMAs (as many chains as the vector registers allow, no loads) built the same
way. Kernels and peak are timed in alternating turns; medians (and minimums) are printed. A matmul kernel near 100%
is as fast as its inner loop can be on this core; the rest of its time in the step (the profile's column) is the
pool's second core, caches and other processes ("in step": the launch's time in a profiled step, on the pool).
Where torch is installed, the same turns time it on one thread for the step's GEMM shapes and its GELU forward and
backward on the MLP's 512 x 512 activations, the work of the kernels above done torch's way (into preallocated
outputs, as the step's kernels write theirs: a fresh 1 MB output costs torch its page faults, several times GELU's
own time).

    python bench/core_peak.py [--top 12] [--turns 40]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from support import example

LANES = 16  # floats per vector of the kernels' widest type (AVX-512); the peak loop uses the same
CHAINS = 24  # independent accumulators: enough to cover the FMA latency of two pipes, fewer than 32 registers
PEAK_SOURCE = f"""
typedef float float16 __attribute__((vector_size({LANES * 4})));
void peak(float* restrict out, long n) {{
  float16 {", ".join(f"a{i} = (float16){{0}} + {i}.0f" for i in range(CHAINS))};
  float16 b = (float16){{0}} + 1.0000001f, c = (float16){{0}} + 1e-7f;
  for (long k = 0; k < n; k++) {{
    {" ".join(f"a{i} = __builtin_ia32_vfmaddps512_mask(a{i}, b, c, -1, 4);" for i in range(CHAINS))}
  }}
  {" ".join(f"out[0] += a{i}[0];" for i in range(CHAINS))}
}}
"""
PEAK_STEPS = 200_000


def build(source: str, tmp: Path, name: str) -> Any:
    """source compiled as the CPU runtime compiles a kernel (its compiler and flags) and loaded."""
    from uopviz.runtime.cpu import find_compiler, flags
    lib = tmp / f"{name}.so"
    subprocess.run([find_compiler(), *flags(source), "-x", "c", "-", "-o", str(lib)], input=source.encode(),
                   check=True, timeout=120)
    return ctypes.CDLL(str(lib))


def step_kernels(top: int) -> list[tuple[float, Any, dict[str, int], int]]:
    """The step's `top` slowest launches (a kernel on its buffers; median of 5 profiled steps): (seconds in the
    step, launch, variables' values, flops) each."""
    from uopviz import Tensor, nn
    from uopviz.profile.work import kernel_work
    from uopviz.realize import profiling
    gpt = example("gpt")
    cfg = gpt.GPTConfig()
    Tensor.manual_seed(0)
    model = gpt.GPT(cfg)
    rng = np.random.default_rng(0)
    x, y = (Tensor(rng.integers(0, cfg.vocab_size, (8, cfg.block_size)).astype(np.int32)) for _ in range(2))
    step = gpt.train_step(model, nn.optim.AdamW(model.parameters(), lr=1e-4))
    for _ in range(4):
        step(x, y)
    times: dict[Any, list[list[float]]] = defaultdict(list)
    launches: dict[Any, tuple[Any, dict[str, int]]] = {}
    for turn in range(5):
        def seen(launch: Any, vals: tuple[int, ...], _device_s: float, time_s: float, turn: int = turn) -> None:
            key = (launch.key, tuple(map(id, launch.buffers)))
            while len(times[key]) <= turn:
                times[key].append([])
            times[key][turn].append(time_s)
            launches[key] = (launch, dict(zip(launch.kernel.vars, vals, strict=True)))
        with profiling(seen):
            step(x, y)
    out = []
    for key, turns in times.items():
        launch, vals = launches[key]
        if launch.key is None or not launch.kernel.source:
            continue
        per_step = statistics.median(sum(t) for t in turns)
        out.append((per_step, launch, vals, kernel_work(launch.key[0], vals).flops))
    return sorted(out, key=lambda r: -r[0])[:top]


def runner(lib: Any, launch: Any, vals: dict[str, int]) -> Callable[[], None]:
    """A call of every THREAD index of launch's kernel, one after another, on copies of its buffers."""
    from uopviz.runtime import buffer as buffers
    kernel = launch.kernel
    fn = getattr(lib, kernel.name)
    arrays = [np.ascontiguousarray(buffers.to_numpy(b)).copy() for b in launch.buffers]
    args = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays] + [ctypes.c_int(vals[v]) for v in kernel.vars]
    threaded = re.search(rf"void {kernel.name}\([^)]*\btidx0\)", kernel.source) is not None

    def run() -> None:
        if threaded:
            for t in range(kernel.threads):
                fn(*args, ctypes.c_int(t))
        else:
            fn(*args)
    run.arrays = arrays  # type: ignore[attr-defined]  # kept alive as long as the calls use them
    return run


def torch_ops() -> list[tuple[str, int, Callable[[], None]]]:
    """torch on one thread: the GPT step's GEMMs (tokens x d @ d x 3d and d x 4d, tokens x 4d @ 4d x d, two weights'
    gradients) and GELU forward and backward, (name, flops, call) each; empty without torch."""
    try:
        import torch
    except ImportError:
        return []
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    tokens, d = 512, 128

    def mm(m: int, k: int, n: int, transposed: bool = False) -> tuple[str, int, Callable[[], None]]:
        a = torch.randn(k, m, generator=gen).t() if transposed else torch.randn(m, k, generator=gen)
        b, c = torch.randn(k, n, generator=gen), torch.empty(m, n)
        return f"torch {'aT' if transposed else 'a'}@b {m}x{k}x{n}", 2 * m * k * n, lambda: torch.mm(a, b, out=c)
    h, g, out = (torch.randn(tokens, 4 * d, generator=gen) for _ in range(3))
    return [mm(tokens, d, 3 * d), mm(tokens, d, 4 * d), mm(tokens, 4 * d, d), mm(4 * d, tokens, d, True),
            mm(d, tokens, 3 * d, True), ("torch gelu 512x512", 0, lambda: torch.ops.aten.gelu.out(h, out=out)),
            ("torch gelu_backward 512x512", 0,
             lambda: torch.ops.aten.gelu_backward.grad_input(g, h, grad_input=out))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--top", type=int, default=12, help="kernels shown, the step's slowest first")
    ap.add_argument("--turns", type=int, default=40, help="alternating timed turns (median)")
    args = ap.parse_args()
    os.environ.setdefault("UOPVIZ_DEVICE", "CPU")
    if "avx512f" not in Path("/proc/cpuinfo").read_text():
        print("bench/core_peak.py times AVX-512 code (the CPU kernels' 16-float vectors); this CPU has none",
              file=sys.stderr)
        return 1
    kernels = step_kernels(args.top)
    theirs = torch_ops()
    with tempfile.TemporaryDirectory(prefix="uopviz-core-peak-") as d:
        tmp = Path(d)
        peak_fn = build(PEAK_SOURCE, tmp, "peak").peak
        sink = np.zeros(1, np.float32)
        runs = [runner(build(launch.kernel.source, tmp, f"k{i}"), launch, vals)
                for i, (_, launch, vals, _) in enumerate(kernels)] + [call for _, _, call in theirs]
        peak_t: list[float] = []
        kernel_t: list[list[float]] = [[] for _ in runs]
        for _ in range(args.turns):
            t0 = time.perf_counter()
            peak_fn(sink.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(PEAK_STEPS))
            peak_t.append(time.perf_counter() - t0)
            for run, ts in zip(runs, kernel_t, strict=True):
                t0 = time.perf_counter()
                run()
                ts.append(time.perf_counter() - t0)
    peak = PEAK_STEPS * CHAINS * LANES * 2 / statistics.median(peak_t) / 1e9
    print(f"one core's FMA peak: {peak:.1f} GFLOP/s (median of {args.turns} turns; load {_load()})")
    print(f"{'in step':>9} {'alone':>9} {'min':>9} {'GFLOP/s':>8} {'of peak':>8}  kernel (1 thread, its THREAD "
          "calls in turn)")
    rows = [(f"{per_step * 1e3:7.3f}ms", flops, launch.kernel.name) for per_step, launch, _, flops in kernels]
    rows += [(f"{'':9}", flops, name) for name, flops, _ in theirs]
    for (step_col, flops, name), ts in zip(rows, kernel_t, strict=True):
        alone = statistics.median(ts)
        rate = f"{flops / alone / 1e9:8.1f} {flops / alone / 1e9 / peak:8.0%}" if flops else f"{'':17}"
        print(f"{step_col} {alone * 1e3:7.3f}ms {min(ts) * 1e3:7.3f}ms {rate}  {name}")
    return 0


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
