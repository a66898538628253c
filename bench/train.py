"""Time per training step (forward, backward, Adam update; batch 64) of examples/train_digits.py's MLP and conv net
on uopviz — with the heuristic's opts and with BEAM-tuned ones — against PyTorch and tinygrad where they are
installed (each skipped, and said so, otherwise), in one run. Medians of timed steps after warm-up; every framework
trains the same architectures on the same batches.

The uopviz variants run in child processes: "heuristic" with an empty cache directory (so no tuned opts apply),
"tuned" with UOPVIZ_BEAM set, searching each kernel of the step once (kept in the tuning database, so a second
run of the bench is quick).

    python bench/train.py [--steps 50] [--beam 2] [--models mlp conv] [--device CPU]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from train_digits import MODELS, digits, make_step  # noqa: E402

BATCH = 64


def batches(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    xtr, ytr, _, _ = digits()
    rng = np.random.default_rng(0)
    out = []
    while len(out) < n:
        order = rng.permutation(len(xtr))
        out += [(xtr[order[k:k + BATCH]], ytr[order[k:k + BATCH]]) for k in range(0, len(order) - BATCH + 1, BATCH)]
    return out[:n]


def median_step(step: Callable[[Any, Any], Any], data: list[tuple[Any, Any]], warmup: int = 3) -> float:
    """Median seconds of one step (each step's loss read back, so its kernels have finished)."""
    for x, y in data[:warmup]:
        step(x, y)
    times = []
    for x, y in data[warmup:]:
        t0 = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def uopviz_worker(model: str, device: str, steps: int) -> float:
    from uopviz import Tensor, nn
    Tensor.manual_seed(0)
    net = MODELS[model](device)
    step = make_step(net, nn.optim.Adam(net.parameters(), lr=1e-2))
    data = [(Tensor(x, device=device), Tensor(y, device=device)) for x, y in batches(steps)]
    return median_step(lambda x, y: step(x, y).item(), data)


def uopviz_child(model: str, device: str, steps: int, beam: int | None) -> float | str:
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if beam is None:
            env["UOPVIZ_CACHE_DIR"] = tmp  # no tuning results: the heuristic's opts
            env.pop("UOPVIZ_BEAM", None)
        else:
            env["UOPVIZ_BEAM"] = str(beam)
        cmd = [sys.executable, __file__, "--worker", model, "--device", device, "--steps", str(steps)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        return "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


def torch_step(model: str, steps: int) -> float | str:
    try:
        import torch
    except ImportError:
        return "not installed"
    torch.manual_seed(0)
    tnn = torch.nn
    if model == "mlp":
        net = tnn.Sequential(tnn.Flatten(), tnn.Linear(64, 128), tnn.ReLU(), tnn.Linear(128, 10))
    else:
        net = tnn.Sequential(tnn.Unflatten(1, (1, 8, 8)), tnn.Conv2d(1, 8, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                             tnn.Conv2d(8, 16, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
                             tnn.Linear(64, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def step(x: Any, y: Any) -> float:
        opt.zero_grad()
        loss = tnn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    data = [(torch.tensor(x), torch.tensor(y, dtype=torch.long)) for x, y in batches(steps)]
    return median_step(step, data)


def tinygrad_step(model: str, steps: int) -> float | str:
    try:
        from tinygrad import Tensor, TinyJit, nn
    except ImportError:
        return "not installed"
    try:
        Tensor.manual_seed(0)
        if model == "mlp":
            layers = [nn.Linear(64, 128), nn.Linear(128, 10)]

            def forward(x: Any) -> Any:
                return layers[1](layers[0](x).relu())
        else:
            layers = [nn.Conv2d(1, 8, 3, padding=1), nn.Conv2d(8, 16, 3, padding=1), nn.Linear(64, 10)]

            def forward(x: Any) -> Any:
                x = layers[0](x.reshape(-1, 1, 8, 8)).relu().max_pool2d(2)
                return layers[2](layers[1](x).relu().max_pool2d(2).flatten(1))
        opt = nn.optim.Adam(nn.state.get_parameters(layers), lr=1e-2)

        from tinygrad.helpers import Context

        @TinyJit
        def jitted(x: Any, y: Any) -> Any:
            with Context(TRAINING=1):  # its optimizers step only in training mode
                opt.zero_grad()
                loss = forward(x).sparse_categorical_crossentropy(y).backward()
                opt.step()
                return loss.realize()
        data = [(Tensor(x).realize(), Tensor(y.astype(np.int32)).realize()) for x, y in batches(steps)]
        return median_step(lambda x, y: jitted(x, y).item(), data)
    except Exception as e:
        return f"failed: {type(e).__name__}: {e}"[:120]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--beam", type=int, default=2)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps({"seconds": uopviz_worker(args.worker, args.device, args.steps)}))
        return
    print(f"time per training step, batch {BATCH}, median of {args.steps - 3} steps (device {args.device} for "
          "uopviz; PyTorch and tinygrad on the CPU)")
    rows = []
    for model in args.models:
        results = {
            "uopviz heuristic": uopviz_child(model, args.device, args.steps, None),
            f"uopviz BEAM={args.beam}": uopviz_child(model, args.device, args.steps, args.beam),
            "PyTorch": torch_step(model, args.steps),
            "tinygrad (TinyJit)": tinygrad_step(model, args.steps),
        }
        rows += [(model, k, v) for k, v in results.items()]
    base = {m: v for m, k, v in rows if k == "PyTorch" and isinstance(v, float)}
    print(f"{'model':6} {'framework':22} {'ms/step':>9} {'vs PyTorch':>11}")
    for model, name, v in rows:
        if isinstance(v, float):
            ratio = f"{v / base[model]:.2f}x" if model in base else ""
            print(f"{model:6} {name:22} {v * 1e3:9.2f} {ratio:>11}")
        else:
            print(f"{model:6} {name:22} {v}")


if __name__ == "__main__":
    main()
