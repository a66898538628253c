"""What the model tests share: the example models as modules, their PyTorch twins (float64: the same layers under
the same state-dict names, so a uopviz model's weights load into its twin as they are) and the comparison of a
training run on both, every gradient and every step's loss."""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import uopviz
from uopviz import Tensor
from uopviz import nn as unn
from uopviz.runtime import device as devices

DEVICES = ["CPU", "PYTHON", *devices.available(["CL", "CUDA"])]
STEPS = {"CPU": 50, "CL": 50, "CUDA": 50, "PYTHON": 8}
"""Optimizer steps compared: the first eager, the second captured, the rest replays of the captured step (fewer
on the PYTHON interpreter, which runs every element in Python)."""
MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def example(name: str) -> ModuleType:
    """examples/models/<name>.py as a module (the examples are scripts, not a package)."""
    key = f"uopviz_examples_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, MODELS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[key] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[key]


def assert_grads_match(model: unn.Module, twin: nn.Module) -> None:
    grads = {k: p.grad for k, p in twin.named_parameters()}
    for name, p in model.state_dict().items():
        if p.requires_grad:
            want = grads[name].numpy()
            got = p.grad.numpy()
            err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-6)
            assert err < 1e-4, f"{name}: gradient off by {err:.2e} (relative to its largest element)"


def train_both(model: unn.Module, twin: nn.Module, loss_of: Callable[[unn.Module, Any, Any], Tensor],
               tloss_of: Callable[[nn.Module, Any, Any], torch.Tensor], batches: list[tuple[np.ndarray, ...]],
               opts: tuple[Any, Any], device: str) -> tuple[list[float], list[float]]:
    """One optimizer step per batch on both models, uopviz's as a @jit function (so the first call runs eagerly,
    the second is captured, the rest replay): after the first, every parameter's gradient matches; after each,
    the loss does (to 1e-3 relative: float32 against float64 over the steps). Returns both runs' losses."""
    opt, topt = opts

    @uopviz.jit
    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = loss_of(model, x, y).backward()
        opt.step()
        return loss

    losses, tlosses = [], []
    for k, (x, y) in enumerate(batches):
        losses.append(step(Tensor(x, device=device), Tensor(y, device=device)).item())
        topt.zero_grad()
        tloss = tloss_of(twin, torch.tensor(x), torch.tensor(y, dtype=torch.long))
        tloss.backward()
        tlosses.append(tloss.item())
        if k == 0:
            np.testing.assert_allclose(losses[0], tlosses[0], rtol=1e-5)
            assert_grads_match(model, twin)
        topt.step()
    np.testing.assert_allclose(losses, tlosses, rtol=1e-3)
    assert tlosses[-1] < tlosses[0]  # it trained: the comparison is not of a flat line
    return losses, tlosses




class TorchGPT(nn.Module):
    """nanoGPT's decoder: causal attention by an explicit lower-triangular mask, exact GELU, tied head."""

    def __init__(self, cfg: Any) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.n_embd
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(cfg.vocab_size, d), "wpe": nn.Embedding(cfg.block_size, d),
            "h": nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layer)), "ln_f": nn.LayerNorm(d)})

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        tr = self.transformer
        x = tr["wte"](idx) + tr["wpe"](torch.arange(T))
        for block in tr["h"]:
            x = block(x)
        return tr["ln_f"](x) @ tr["wte"].weight.T

    def loss(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self(idx).reshape(-1, self.cfg.vocab_size), targets.reshape(-1))


class _Block(nn.Module):
    def __init__(self, cfg: Any) -> None:
        super().__init__()
        d = cfg.n_embd
        self.n_head = cfg.n_head
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.Module()
        self.attn.c_attn, self.attn.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.n_head)
        att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
        x = x + self.attn.c_proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))


class TorchResNet(nn.Module):
    """torchvision's BasicBlock ResNet, one block a stage, as examples/models/resnet.py builds it."""

    def __init__(self, in_channels: int, widths: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, widths[0], 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        cin = widths[0]
        for k, w in enumerate(widths):
            setattr(self, f"layer{k + 1}", nn.Sequential(_BasicBlock(cin, w, 1 if k == 0 else 2)))
            cin = w
        self.stages = len(widths)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        for k in range(self.stages):
            x = getattr(self, f"layer{k + 1}")(x)
        return self.fc(x.mean((2, 3)))


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


def twin_of(model: nn.Module, state: dict[str, Any]) -> nn.Module:
    """model (float64) with the uopviz model's state loaded: every name must match both ways."""
    model = model.double()
    own = model.state_dict()
    missing = {k for k in own if not k.endswith("num_batches_tracked")} ^ set(state)
    assert not missing, f"state names differ: {sorted(missing)}"
    model.load_state_dict({k: torch.tensor(np.asarray(v.numpy(), np.float64)) for k, v in state.items()},
                          strict=False)
    return model
