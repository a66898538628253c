"""Per-call time of a small three-kernel program (an MLP layer: matmul + bias + relu, a second matmul, a row sum)
eager, through @uopviz.function and through @uopviz.jit, and tinygrad's TinyJit on the same work
where tinygrad is installed (it is skipped, and said so, otherwise), in one run.

The JIT's dispatch overhead is its per-call time minus the kernels' own time (each launch of a replay timed alone
on the device), which is what the JIT adds: the target is at most 50 µs per call for three small kernels. Every
variant's answer is checked against NumPy first. The machine is noisy: the figures are medians.

    python bench/jit.py [--device CPU] [--calls 300] [--batch 16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import uopviz
from uopviz import Tensor


def per_call(fn: Callable[[Any], Any], inputs: list[Any], calls: int, warmup: int = 3) -> float:
    """Median seconds of one call (inputs taken in turn; each call's result realized)."""
    for x in inputs[:warmup]:
        fn(x)
    times = []
    for k in range(calls):
        x = inputs[k % len(inputs)]
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def program(w1: Tensor, b1: Tensor, w2: Tensor) -> Callable[[Tensor], Tensor]:
    def layer(x: Tensor) -> Tensor:
        return ((x @ w1 + b1).relu() @ w2).sum(-1)
    return layer


def reference(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    return (np.maximum(x @ w1 + b1, 0) @ w2).sum(-1)


def kernel_time(jitted: Callable[[Tensor], Tensor], x: Tensor, calls: int) -> tuple[int, float]:
    """(launches, median seconds of the launches' own time) of one replay of a captured JIT."""
    runs = next(iter(jitted.replays.values())).runs([x], {})  # type: ignore[attr-defined]  # x's buffer in place
    samples = [sum(run.prog(run.handles, run.vals, wait=True) or 0.0 for run in runs) for _ in range(calls)]
    return len(runs), statistics.median(samples)


def tinygrad_per_call(ws: list[np.ndarray], xs: list[np.ndarray], calls: int) -> float | None:
    try:
        from tinygrad import Tensor as TT
        from tinygrad import TinyJit
    except ImportError:
        return None
    w1, b1, w2 = (TT(w).realize() for w in ws)

    @TinyJit
    def layer(x: Any) -> Any:
        return ((x @ w1 + b1).relu() @ w2).sum(-1).realize()

    txs = [TT(x).realize() for x in xs]
    got = layer(txs[0]).numpy()
    np.testing.assert_allclose(got, reference(xs[0], *ws), rtol=1e-4, atol=1e-5)
    return per_call(layer, txs, calls)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    ws = [rng.random((64, 48), dtype=np.float32) - 0.5, rng.random(48, dtype=np.float32) - 0.5,
          rng.random((48, 10), dtype=np.float32) - 0.5]
    xs = [rng.random((args.batch, 64), dtype=np.float32) - 0.5 for _ in range(4)]
    w1, b1, w2 = (Tensor(w, device=args.device).realize() for w in ws)
    inputs = [Tensor(x, device=args.device).realize() for x in xs]
    layer = program(w1, b1, w2)
    variants: dict[str, Callable[[Tensor], Any]] = {
        "eager": lambda x: layer(x).realize(),
        "@function": (lambda f: lambda x: f(x).realize())(uopviz.function(layer)),
        "@jit": uopviz.jit(layer),
    }
    for name, fn in variants.items():
        np.testing.assert_allclose(fn(inputs[0]).numpy(), reference(xs[0], *ws), rtol=1e-4, atol=1e-5, err_msg=name)
    rows = [(name, per_call(fn, inputs, args.calls)) for name, fn in variants.items()]
    launches, kernels = kernel_time(variants["@jit"], inputs[0], args.calls)
    tiny = tinygrad_per_call(ws, xs, args.calls)
    print(f"device {args.device}, batch {args.batch}, {launches} kernels per call, medians of {args.calls} calls")
    for name, t in rows:
        print(f"  {name:10s} {t * 1e6:9.1f} µs per call")
    jit_t = dict(rows)["@jit"]
    print(f"  kernels' own time in a replay: {kernels * 1e6:.1f} µs; @jit dispatch overhead "
          f"{(jit_t - kernels) * 1e6:.1f} µs per call (target <= 50 µs)")
    if tiny is None:
        print("  tinygrad TinyJit: skipped (tinygrad is not installed: pip install 'uopviz[bench]')")
    else:
        print(f"  tinygrad TinyJit {tiny * 1e6:9.1f} µs per call; @jit / TinyJit = {jit_t / tiny:.2f}x the time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
