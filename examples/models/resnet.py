"""A small ResNet in uopviz, in torchvision's layout (and state-dict names), trained on scikit-learn's digits.

    python examples/models/resnet.py                   # 50 SGD steps on 8x8 digits upscaled to 16x16, then accuracy
    python examples/models/resnet.py --device CL

A 3x3 stem with BatchNorm, basic blocks (two 3x3 convolutions with BatchNorm and a shortcut, 1x1 with BatchNorm
where the shape changes), global average pooling and a linear classifier. The names are torchvision's (`layer1.0.
conv1.weight`, `layer2.0.downsample.0.weight`, `bn1.running_mean`, ...), so a state dict moves to and from a
PyTorch twin as it is. The training step is a `@uopviz.jit` function.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import uopviz
from uopviz import Tensor, nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1, device: str | None = None) -> None:
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False, device=device)
        self.bn1 = nn.BatchNorm2d(cout, device=device)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False, device=device)
        self.bn2 = nn.BatchNorm2d(cout, device=device)
        self.downsample = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride=stride, bias=False, device=device), nn.BatchNorm2d(cout, device=device))

    def forward(self, x: Tensor) -> Tensor:
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out))
        return (out + (x if self.downsample is None else self.downsample(x))).relu()


class ResNet(nn.Module):
    """`widths[k]` channels in stage k (stage k > 0 halves the resolution), one basic block a stage."""

    def __init__(self, in_channels: int = 3, widths: tuple[int, ...] = (16, 32), num_classes: int = 10,
                 device: str | None = None) -> None:
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False, device=device)
        self.bn1 = nn.BatchNorm2d(widths[0], device=device)
        cin = widths[0]
        for k, w in enumerate(widths):
            setattr(self, f"layer{k + 1}", nn.Sequential(BasicBlock(cin, w, 1 if k == 0 else 2, device)))
            cin = w
        self.stages = len(widths)
        self.fc = nn.Linear(cin, num_classes, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = self.bn1(self.conv1(x)).relu()
        for k in range(self.stages):
            x = getattr(self, f"layer{k + 1}")(x)
        return self.fc(x.mean((2, 3)))


def train_step(model: ResNet, opt: nn.optim.Optimizer) -> Callable[[Tensor, Tensor], Tensor]:
    """One training step (cross-entropy, backward, the optimizer's update) as a @jit function; returns the loss."""
    @uopviz.jit
    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = model(x).cross_entropy(y).backward()
        opt.step()
        return loss
    return step


def digits16(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits as (N, 1, 16, 16) images in [0, 1] (each pixel doubled), split 80/20."""
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(x))
    x = (x[order] / 16).astype(np.float32).reshape(-1, 1, 8, 8).repeat(2, axis=2).repeat(2, axis=3)
    y = y[order].astype(np.int32)
    cut = len(x) * 4 // 5
    return x[:cut], y[:cut], x[cut:], y[cut:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()
    Tensor.manual_seed(0)
    xtr, ytr, xte, yte = digits16()
    model = ResNet(in_channels=1, device=args.device)
    step = train_step(model, nn.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9))
    rng = np.random.default_rng(0)
    for i in range(args.steps):
        t0 = time.perf_counter()
        at = rng.integers(0, len(xtr), args.batch)
        loss = step(Tensor(xtr[at], device=args.device), Tensor(ytr[at], device=args.device)).item()
        if i % 10 == 0 or i == args.steps - 1:
            print(f"step {i:4d}  loss {loss:.4f}  {1e3 * (time.perf_counter() - t0):8.1f} ms")
    model.eval()
    pred = model(Tensor(xte, device=args.device)).argmax(-1).numpy()
    print(f"test accuracy {(pred == yte).mean():.3f}")


if __name__ == "__main__":
    main()
