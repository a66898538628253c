"""The example GPT and ResNet (examples/models/) under @jit against their PyTorch twins, in one run: the GPT's forward
and AdamW training step (nanoGPT layout, d 128, 4 heads, 2 blocks, batch 8, T 64) and the ResNet's SGD training step
(16 -> 32 channels, batch 16, 32x32), torch on 1 and 2 threads.

Both sides start from the same weights and are first checked to compute the same thing (the forward's logits, the
step's loss, to 1e-4 relative); then the steps are timed in turns (uopviz, torch at each thread count, again; each
side runs untimed for 0.15 s before its timed call, so no side meets the threads the one before left spinning), and
the medians are printed with torch's time / uopviz's (above 1: uopviz is faster). The uopviz step is warmed up first
(its first calls compile, capture and replay). The machine is shared: torch's threads thrash when anything else
runs, so quote figures from a quiet machine.

    python bench/models.py [CASE ...] [--steps 20] [--threads 1 2] [--tune 5m]

With --tune, each case is timed with the heuristic's kernels, then its @jit step is tuned as a whole (`.beam()`,
BEAM width 2 within the budget, results kept in the tuning database: a second run answers from it) and timed again,
in the same turns as a second @jit of the same function captured before tuning (it keeps the heuristic's kernels):
tuned and heuristic meet the same machine, which timings minutes apart on a shared one do not.

CASE: gpt-forward, gpt-step, resnet-step (default: all).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from support import ROOT, example, measure

import uopviz
from uopviz import Tensor, nn
from uopviz.tune import Tuning, parse_duration

sys.path.insert(0, str(ROOT / "tests" / "models"))
from model_testing import TorchGPT, TorchResNet, twin_of  # the twins the model tests check against


@dataclass
class Case:
    """One thing to time on both sides: each side's call on the prepared inputs, returning a float to compare."""

    ours: Callable[[], float]
    theirs: Callable[[], float]
    tune: Callable[[float], Tuning]
    """Whole-model tuning of the uopviz side's @jit function on its inputs, within a budget in seconds."""
    heuristic: Callable[[], float]
    """The uopviz side's function under a @jit of its own: once captured, it keeps the kernels it had then."""


def gpt_case(step: bool) -> Case:
    import torch
    gpt = example("gpt")
    cfg = gpt.GPTConfig()
    Tensor.manual_seed(0)
    model = gpt.GPT(cfg)
    twin = twin_of(TorchGPT(cfg), model.state_dict()).float()
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, cfg.vocab_size, (8, cfg.block_size)) for _ in range(2))
    tx, ty = torch.tensor(x), torch.tensor(y)
    X, Y = Tensor(x.astype(np.int32)), Tensor(y.astype(np.int32))
    if not step:
        forward = uopviz.jit(lambda idx: model(idx))

        def logits() -> float:
            with torch.no_grad():
                return float(twin(tx).sum())
        pinned = uopviz.jit(forward.__wrapped__)
        return Case(lambda: float(forward(X).sum().item()), logits, lambda budget: forward.beam(X, budget_s=budget),
                    lambda: float(pinned(X).sum().item()))
    ours = gpt.train_step(model, nn.optim.AdamW(model.parameters(), lr=1e-4))
    topt = torch.optim.AdamW(twin.parameters(), lr=1e-4)

    def theirs() -> float:
        topt.zero_grad()
        loss = twin.loss(tx, ty)
        loss.backward()
        topt.step()
        return loss.item()
    pinned = uopviz.jit(ours.__wrapped__)
    return Case(lambda: float(ours(X, Y).item()), theirs, lambda budget: ours.beam(X, Y, budget_s=budget),
                lambda: float(pinned(X, Y).item()))


def resnet_case() -> Case:
    import torch
    import torch.nn.functional as F
    resnet = example("resnet")
    Tensor.manual_seed(0)
    model = resnet.ResNet(in_channels=3, widths=(16, 32))
    twin = twin_of(TorchResNet(3, (16, 32), 10), model.state_dict()).float()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3, 32, 32)).astype(np.float32)
    y = rng.integers(0, 10, 16).astype(np.int32)
    tx, ty = torch.tensor(x), torch.tensor(y, dtype=torch.long)
    ours = resnet.train_step(model, nn.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9))
    topt = torch.optim.SGD(twin.parameters(), lr=1e-3, momentum=0.9)

    def theirs() -> float:
        topt.zero_grad()
        loss = F.cross_entropy(twin(tx), ty)
        loss.backward()
        topt.step()
        return loss.item()
    X, Y = Tensor(x), Tensor(y)
    pinned = uopviz.jit(ours.__wrapped__)
    return Case(lambda: float(ours(X, Y).item()), theirs, lambda budget: ours.beam(X, Y, budget_s=budget),
                lambda: float(pinned(X, Y).item()))


CASES: dict[str, Callable[[], Case]] = {"gpt-forward": lambda: gpt_case(False), "gpt-step": lambda: gpt_case(True),
                                        "resnet-step": resnet_case}


def run(name: str, steps: int, threads: list[int], tune_s: float | None) -> None:
    case = CASES[name]()
    ours, theirs = case.ours(), case.theirs()  # the first call of each: the same computation on the same weights
    if not np.isclose(ours, theirs, rtol=1e-4, atol=1e-5):
        raise SystemExit(f"{name}: uopviz gives {ours!r}, torch {theirs!r}: not the same computation")
    for _ in range(3):  # uopviz's @jit: capture, then replays
        case.ours()
        if tune_s:
            case.heuristic()  # captured with the kernels the step has before tuning
    if not tune_s:
        turns({name: case.ours}, case.theirs, steps, threads)
        return
    turns({f"{name} (heuristic)": case.ours}, case.theirs, steps, threads)
    tuning = case.tune(tune_s)
    print(tuning, flush=True)
    turns({f"{name} (tuned)": case.ours, f"{name} (heuristic)": case.heuristic}, case.theirs, steps, threads)


def turns(ours: dict[str, Callable[[], float]], theirs: Callable[[], float], steps: int, threads: list[int]) -> None:
    """Time every side in turns (each of ours, torch at each thread count), so all meet the same machine, each
    after running untimed for a moment (support.measure): torch's OpenMP threads spin on after its call and take
    the other core from whatever runs next (the GPT step: 14.6 ms alone, 17.6 ms right after a torch step, 15.0
    ms after a 30 ms pause). Print each of ours' median with torch's."""
    import torch

    def at(t: int) -> Callable[[], float]:
        def run() -> float:
            if torch.get_num_threads() != t:
                torch.set_num_threads(t)
            return theirs()
        return run

    samples = measure({**ours, **{f"torch {t}": at(t) for t in threads}}, steps, budget_s=math.inf, burst=1)
    for label in ours:
        ms = statistics.median(samples[label]) * 1e3
        row = "  ".join(f"torch {t} thread{'s' * (t > 1)} {statistics.median(samples[f'torch {t}']) * 1e3:7.2f} ms "
                        f"({statistics.median(samples[f'torch {t}']) * 1e3 / ms:.2f}x)" for t in threads)
        print(f"{label:24s} uopviz {ms:7.2f} ms  {row}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("cases", nargs="*", metavar="CASE", help=f"{', '.join(CASES)} (default: all)")
    ap.add_argument("--steps", type=int, default=20, help="timed turns (median)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch's thread counts")
    ap.add_argument("--tune", type=parse_duration, default=None, metavar="TIME",
                    help="after the heuristic's turns, tune each case's step (BEAM width 2 within TIME, e.g. 5m; "
                         "uopviz.tune, results in the tuning database) and time it again")
    args = ap.parse_args()
    if unknown := set(args.cases) - set(CASES):
        ap.error(f"unknown case(s) {', '.join(sorted(unknown))}; the cases are {', '.join(CASES)}")
    print(f"median of {args.steps} turns; (Nx): torch's time / uopviz's, above 1 uopviz is faster")
    for name in args.cases or CASES:
        run(name, args.steps, args.threads, args.tune)
    return 0


if __name__ == "__main__":
    sys.exit(main())
