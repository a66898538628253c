"""Train a small MLP and a small conv net on scikit-learn's bundled digits (8×8 images, 10 classes) with uopviz.

    python examples/train_digits.py                 # both models on the CPU
    python examples/train_digits.py --device CL     # the same on OpenCL
    python examples/train_digits.py --model mlp --trace step.uopviz-trace.json   # and record one training step

The training step (forward, backward, Adam) is a @uopviz.jit function: its first two calls schedule, lower and
compile the kernels (the second is captured), every later call replays them. A recorded step opens in
`uopviz serve step.uopviz-trace.json`, forward and backward kernels alike, and `uopviz beam` tunes them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import uopviz
from uopviz import Tensor, nn


class MLP(nn.Module):
    def __init__(self, device: str | None = None) -> None:
        self.l1, self.l2 = nn.Linear(64, 128, device=device), nn.Linear(128, 10, device=device)

    def forward(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x.reshape(x.shape[0], 64)).relu())


class ConvNet(nn.Module):
    def __init__(self, device: str | None = None) -> None:
        self.c1 = nn.Conv2d(1, 8, 3, padding=1, device=device)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1, device=device)
        self.fc = nn.Linear(16 * 2 * 2, 10, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = self.c1(x.reshape(x.shape[0], 1, 8, 8)).relu().max_pool2d(2)
        x = self.c2(x).relu().max_pool2d(2)
        return self.fc(x.flatten(1))


MODELS: dict[str, Callable[..., nn.Module]] = {"mlp": MLP, "conv": ConvNet}


def digits(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(train images, train labels, test images, test labels): 80/20, images scaled to [0, 1]."""
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = (x[order] / 16).astype(np.float32), y[order].astype(np.int32)
    cut = len(x) * 4 // 5
    return x[:cut], y[:cut], x[cut:], y[cut:]


def make_step(model: nn.Module, opt: nn.optim.Optimizer) -> Callable[[Tensor, Tensor], Tensor]:
    """One training step as a @jit function: loss, backward, optimizer update; returns the loss."""
    @uopviz.jit
    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = model(x).cross_entropy(y).backward()
        opt.step()
        return loss
    return step


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray, device: str) -> float:
    model.eval()
    pred = model(Tensor(x, device=device)).argmax(-1).numpy()
    model.train()
    return float((pred == y).mean())


def train(name: str, device: str = "CPU", epochs: int = 12, batch: int = 64, lr: float = 1e-2, seed: int = 0,
          trace: str | None = None, log: Callable[[str], Any] = print) -> dict[str, float]:
    """Train one model; returns its test accuracy, the training time and the time per step."""
    Tensor.manual_seed(seed)
    xtr, ytr, xte, yte = digits(seed)
    model = MODELS[name](device)
    opt = nn.optim.Adam(model.parameters(), lr=lr)
    step = make_step(model, opt)
    if trace is not None:  # one recorded step (outside the jit, so every pass of its lowering is there)
        with uopviz.trace() as tr:
            opt.zero_grad()
            model(Tensor(xtr[:batch], device=device)).cross_entropy(Tensor(ytr[:batch], device=device)).backward()
            opt.step()
        tr.save(trace)
        log(f"trace of one {name} training step: {trace} ({len(tr.contexts)} contexts)")
    rng = np.random.default_rng(seed)
    steps, start = 0, time.perf_counter()
    for epoch in range(epochs):
        order = rng.permutation(len(xtr))
        for k in range(0, len(order) - batch + 1, batch):  # whole batches only: one jit signature
            idx = order[k:k + batch]
            loss = step(Tensor(xtr[idx], device=device), Tensor(ytr[idx], device=device))
            steps += 1
        log(f"{name} epoch {epoch + 1}: loss {loss.item():.4f}")
    seconds = time.perf_counter() - start
    acc = accuracy(model, xte, yte, device)
    per_step = seconds / max(steps, 1) * 1e3
    log(f"{name}: test accuracy {acc:.1%} after {epochs} epochs ({steps} steps) in {seconds:.1f} s "
        f"({per_step:.2f} ms per step)")
    return {"accuracy": acc, "seconds": seconds, "step_ms": per_step}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=[*MODELS, "all"], default="all")
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--trace", help="save a trace of one training step here (uopviz serve opens it)")
    args = ap.parse_args()
    for name in MODELS if args.model == "all" else [args.model]:
        train(name, args.device, args.epochs, trace=args.trace)


if __name__ == "__main__":
    main()
