"""The `cache row values` pass, measured: row kernels whose later loop loads the values a reduction's loop cached
(exp(x - max) in softmax) against the same kernels computing them again, with the heuristic's opts, on the CPU.

Each case's kernels are lowered twice for the CPU, once for its Target and once for a copy with no private memory
(the pass then changes nothing), both answers checked against NumPy, then the two and torch (where installed) are
timed in turns (bench/peers.py's measure: each round runs each variant untimed for a moment, then times a burst),
then torch on its own (OpenMP's threads spin for a while after each call, which would slow whatever runs next).
The table gives the medians, their spread, and `ratio`, the median of cached/recomputed over runs paired within a
round (so the load
of a shared machine mostly cancels); only the row kernels differ, so a case's other kernels (attention's matmuls)
dilute it. log_softmax and logsumexp compute exp once already: the pass leaves their kernels alone, and their
ratio shows how far noise moves a ratio of equal kernels.

`--device CPU:0` runs every kernel on one core (no THREAD axis), and torch with one thread: on a shared machine
the other cores' load then disturbs the comparison less.

    python bench/row_cache.py [--repeats 60] [--device CPU:0]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/row_cache.py` from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import check, spread
from peers import torch_peer as _torch_zoo
from support import measure
from uopviz.kernels import ZOO


def _logsumexp_np(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))[..., 0]


def _log_softmax_np(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


CASES: dict[str, tuple[str, dict[str, int]]] = {"softmax 4096x1024": ("softmax", {"R": 4096, "C": 1024}),
                                                 "softmax 4096x1000": ("softmax", {"R": 4096, "C": 1000}),
                                                 "attention 512x64": ("attention", {"S": 512, "D": 64})}
EXTRA: dict[str, tuple[Callable[[Any], Any], Callable[[np.ndarray], np.ndarray], str]] = {
    "log_softmax 4096x1024": (lambda x: x.log_softmax(-1), _log_softmax_np, "log_softmax"),
    "logsumexp 4096x1024": (lambda x: x.logsumexp(-1), _logsumexp_np, "logsumexp"),
}


def runner(out: Any, cached: bool, device: str) -> tuple[Callable[[], None], Callable[[], np.ndarray]]:
    """A function running out's kernels (heuristic opts) lowered with or without the pass; one reading the result."""
    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.pipeline import kernels_of, lower, schedule
    from uopviz.pipeline import scheduler as scheduler_of
    from uopviz.runtime import buffer as buffers
    from uopviz.runtime import device as devices

    rt = devices.get(device)
    target = rt.target if cached else dataclasses.replace(rt.target, private_memory=0)
    graph = schedule([out.uop])
    progs = []
    for ast, bufs in kernels_of(graph):
        kernel = lower(ast, target, heuristic_opts(scheduler_of(ast, rt.target)))
        progs.append((rt.compile(kernel), [buffers.handle(b) for b in bufs]))
    result = graph.src[0].src[0]

    def run() -> None:
        for prog, handles in progs:
            prog(handles)

    return run, lambda: buffers.to_numpy(result)


def torch_runner(name: str, arrays: list[np.ndarray]) -> Callable[[], Any] | None:
    try:
        import torch
    except ImportError:
        return None
    fns = {"log_softmax": lambda x: torch.log_softmax(x, -1), "logsumexp": lambda x: torch.logsumexp(x, -1)}
    if name not in fns:
        peer = _torch_zoo(name, arrays)
        return peer[0] if peer else None
    t = torch.from_numpy(arrays[0])

    def run() -> Any:
        with torch.inference_mode():
            return fns[name](t)

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--device", default="CPU", help="CPU (every core) or CPU:0 (one core; torch on one thread)")
    args = ap.parse_args()
    if args.device != "CPU":
        try:
            import torch
            torch.set_num_threads(1)
        except ImportError:
            pass
    from uopviz.tensor import Tensor

    print(f"{'case':24} {'cached ms':>14} {'recomputed ms':>16} {'torch ms':>14} {'ratio':>6}")
    todo = [(label, ZOO[z].program, ZOO[z].reference, z, ZOO[z].arrays(ZOO[z].sizes(**s))) for label, (z, s) in
            CASES.items()]
    x = ZOO["softmax"].arrays(ZOO["softmax"].sizes())
    todo += [(label, fn, ref, name, x) for label, (fn, ref, name) in EXTRA.items()]
    for label, program, reference, name, arrays in todo:
        want = reference(*arrays)
        runners: dict[str, Callable[[], Any]] = {}
        for variant in ("cached", "recomputed"):
            run, read = runner(program(*(Tensor(a, device=args.device) for a in arrays)), variant == "cached",
                               args.device)
            run()
            check(label, variant, read()[: want.size], want.reshape(-1), 1e-4)
            runners[variant] = run
        samples = measure(runners, args.repeats, budget_s=10.0)
        if (t := torch_runner(name, arrays)) is not None:  # after ours: its idle threads spin for a while
            samples |= measure({"torch": t}, args.repeats, budget_s=5.0)
        ratio = statistics.median(a / b for a, b in zip(samples["cached"], samples["recomputed"], strict=True))
        med = {k: statistics.median(v) for k, v in samples.items()}
        cells = [f"{med[k] * 1e3:8.3f} ±{spread(samples[k]) * 100:2.0f}%" if k in med else "-" for k in
                 ("cached", "recomputed", "torch")]
        print(f"{label:24} {cells[0]:>14} {cells[1]:>16} {cells[2]:>14} {ratio:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
