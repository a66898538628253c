"""Eager backward() and optimizer steps of a structure seen before run the kept schedule without building their graphs
(uopviz.tensor.autograd._Plan, uopviz.nn.optim.Optimizer._plan): the gradients and updates they give are torch's
(float64) and NumPy's, bit for bit what the same steps give with the cache off, and a change of structure (a batch
shape, a frozen parameter, a gradient being accumulated, another op, a setting of the optimizer, a node with its own
gradient rule) builds the graph again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

import uopviz.nn.optim as optim
import uopviz.tensor.autograd as autograd
from uopviz import Tensor
from uopviz.realize import OWN_GRADIENT, schedule_cache, structure

RNG = np.random.default_rng(2929)
DEVICE = "CPU"


def data(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Empty caches, and how many times backward built gradients and an Adam step built its update."""
    schedule_cache.clear()
    autograd._replays.clear()
    autograd._reads.clear()
    optim._steps.clear()
    monkeypatch.setattr(schedule_cache, "enabled", True)
    counts = {"backprop": 0, "updates": 0}
    real_backprop, real_updates = autograd.backprop, optim.Adam._updates

    def backprop(*a: Any, **k: Any) -> Any:
        counts["backprop"] += 1
        return real_backprop(*a, **k)

    def updates(self: optim.Adam, *a: Any, **k: Any) -> Any:
        counts["updates"] += 1
        return real_updates(self, *a, **k)
    monkeypatch.setattr(autograd, "backprop", backprop)
    monkeypatch.setattr(optim.Adam, "_updates", updates)
    yield counts
    schedule_cache.clear()
    autograd._replays.clear()
    optim._steps.clear()


class MLP:
    def __init__(self, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.arrays = [rng.standard_normal(s).astype(np.float32) * 0.5 for s in ((4, 6), (6,), (6, 3))]
        self.params = [Tensor(a, device=DEVICE, requires_grad=True) for a in self.arrays]

    def loss(self, x: Tensor) -> Tensor:
        w1, b1, w2 = self.params
        return (x @ w1 + b1).tanh().matmul(w2).square().mean()


def torch_grads(arrays: list[np.ndarray], x: np.ndarray, reduce: str = "mean") -> list[np.ndarray]:
    w1, b1, w2 = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays)
    y = (torch.tensor(x, dtype=torch.float64) @ w1 + b1).tanh().matmul(w2).square()
    (y.mean() if reduce == "mean" else y.sum()).backward()
    return [t.grad.numpy() for t in (w1, b1, w2)]  # type: ignore[union-attr]


def params_now(m: MLP) -> list[np.ndarray]:
    return [p.numpy() for p in m.params]


def test_a_backward_of_a_known_structure_is_replayed_with_torchs_gradients(built: dict[str, int]) -> None:
    m = MLP()
    for step in range(4):
        x = data(5, 4)
        for p in m.params:
            p.grad = None
        loss = m.loss(Tensor(x, device=DEVICE)).backward()
        assert loss.is_realized and all(p.grad is not None and p.grad.is_realized for p in m.params)
        for p, ref in zip(m.params, torch_grads(m.arrays, x), strict=True):
            np.testing.assert_allclose(p.grad.numpy(), ref, rtol=2e-5, atol=1e-6)  # type: ignore[union-attr]
        assert built["backprop"] == 1, step  # built on the first step only
    with pytest.raises(autograd.GradientError):  # the replayed loss is cut from its graph, as a built one is
        loss.backward()


def test_changes_of_structure_build_the_gradients_again(built: dict[str, int]) -> None:
    m = MLP()
    x5, x7 = data(5, 4), data(7, 4)

    def backward(x: np.ndarray, reduce: str = "mean") -> None:
        y = (Tensor(x, device=DEVICE) @ m.params[0] + m.params[1]).tanh().matmul(m.params[2]).square()
        (y.mean() if reduce == "mean" else y.sum()).backward()

    def check(x: np.ndarray, reduce: str = "mean", scale: float = 1.0, frozen: int | None = None) -> None:
        for k, (p, ref) in enumerate(zip(m.params, torch_grads(m.arrays, x, reduce), strict=True)):
            if k == frozen:
                assert p.grad is None
            else:
                np.testing.assert_allclose(p.grad.numpy(), scale * ref, rtol=2e-5, atol=1e-6)  # type: ignore[union-attr]

    def zero() -> None:
        for p in m.params:
            p.grad = None
    backward(x5)
    check(x5)
    zero()
    backward(x7)  # another batch shape
    check(x7)
    assert built["backprop"] == 2
    zero()
    backward(x5, "sum")  # another op
    check(x5, "sum")
    assert built["backprop"] == 3
    zero()
    m.params[2].requires_grad = False  # a frozen parameter
    backward(x5)
    check(x5, frozen=2)
    assert built["backprop"] == 4
    m.params[2].requires_grad = True
    zero()
    backward(x5)  # as the first again: replayed
    check(x5)
    assert built["backprop"] == 4
    backward(x5)  # accumulated into the gradients of the step before: another structure
    check(x5, scale=2.0)
    assert built["backprop"] == 5
    backward(x5)
    check(x5, scale=3.0)
    assert built["backprop"] == 5  # accumulating again: replayed


def test_a_gradient_rule_of_its_own_is_part_of_the_structure() -> None:
    a, b = (Tensor(data(3), device=DEVICE).realize() for _ in range(2))
    plain, ruled = (a * 2.0).exp2().uop, (b * 2.0).exp2().uop
    assert structure([plain]).key == structure([ruled]).key
    ruled.__dict__[OWN_GRADIENT] = ((b.uop,), lambda g, inputs, needed: (g,))
    assert structure([plain]).key != structure([ruled]).key


def adam_reference(arrays: list[np.ndarray], grads: list[list[np.ndarray]], lr: float, wds: list[float],
                   betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> list[np.ndarray]:
    """AdamW (decoupled weight decay) in float64, one weight decay per step."""
    ps = [a.astype(np.float64) for a in arrays]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    for t, (gs, wd) in enumerate(zip(grads, wds, strict=True), start=1):
        for k, g in enumerate(gs):
            m[k] = betas[0] * m[k] + (1 - betas[0]) * g
            v[k] = betas[1] * v[k] + (1 - betas[1]) * g * g
            mhat, vhat = m[k] / (1 - betas[0] ** t), v[k] / (1 - betas[1] ** t)
            ps[k] = ps[k] - lr * (mhat / (np.sqrt(vhat) + eps) + wd * ps[k])
    return ps


def test_an_optimizer_step_of_a_known_structure_is_replayed_with_numpys_update(built: dict[str, int]) -> None:
    m = MLP()
    opt = optim.AdamW(m.params, lr=0.01, weight_decay=0.1)
    grads, wds = [], []
    for step in range(5):
        if step == 3:
            opt.weight_decay = 0.2  # a setting changed: built again
        g = [data(*p.shape) for p in m.params]
        for p, a in zip(m.params, g, strict=True):
            p.grad = Tensor(a, device=DEVICE)
        opt.step()
        grads.append(g)
        wds.append(opt.weight_decay)
        for p, ref in zip(m.params, adam_reference(m.arrays, grads, 0.01, wds), strict=True):
            np.testing.assert_allclose(p.numpy(), ref, rtol=1e-5, atol=1e-6)
    assert built["updates"] == 2
    m.params[1].grad = None  # a parameter without a gradient: another structure
    opt.step()
    assert built["updates"] == 3


def test_a_training_loop_is_bit_identical_with_the_caches_off(monkeypatch: pytest.MonkeyPatch) -> None:
    xs = [data(5, 4) for _ in range(4)]

    def train(enabled: bool) -> tuple[list[float], list[np.ndarray]]:
        monkeypatch.setattr(schedule_cache, "enabled", enabled)
        m = MLP(seed=1)
        opt = optim.Adam(m.params, lr=0.01)
        losses = []
        for x in xs:
            opt.zero_grad()
            losses.append(m.loss(Tensor(x, device=DEVICE)).backward().item())
            opt.step()
        return losses, params_now(m)

    (on_losses, on_params), (off_losses, off_params) = train(True), train(False)
    assert on_losses == off_losses
    assert all(a.tobytes() == b.tobytes() for a, b in zip(on_params, off_params, strict=True))


def test_cut_from_gradients_is_answered_per_structure_and_leaves(built: dict[str, int]) -> None:
    """A realize of a graph that reads a leaf cuts it from gradients (backward from it is refused by name), for every
    realize of its structure; the same structure whose buffer no longer requires gradients is not cut."""
    w = Tensor(data(3), device=DEVICE, requires_grad=True)
    for _ in range(2):
        y = (w * 2.0).exp2().sum()
        expected = np.exp2(w.numpy() * 2.0).sum()
        np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)  # realized: cut
        with pytest.raises(autograd.GradientError, match="realized"):
            y.backward()
    w.requires_grad = False
    other = Tensor(data(3), device=DEVICE, requires_grad=True)  # a leaf elsewhere: _requiring is not empty
    y = (w * 2.0).exp2().sum()
    y.realize()
    assert not getattr(y, "_cut", False)
    assert other.requires_grad and len(autograd._reads) == 2  # one answer per (structure, leaves among its buffers)


def test_a_backward_with_batchnorms_pending_statistics_is_replayed_bit_identically(
        built: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """BatchNorm in training queues its running statistics (assign_later) before backward runs: the replay computes
    them with the loss and gradients and writes them, as the built backward's realize does; the momentum (a constant
    of their graphs) is part of the structure."""
    from uopviz import nn
    xs = [data(6, 3) for _ in range(4)]

    def train(enabled: bool, momenta: list[float]) -> tuple[list[float], list[bytes]]:
        monkeypatch.setattr(schedule_cache, "enabled", enabled)
        w = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, device=DEVICE, requires_grad=True)
        bn = nn.BatchNorm(4, device=DEVICE)
        opt = optim.Adam([w, bn.weight, bn.bias], lr=0.01)
        losses = []
        for x, m in zip(xs, momenta, strict=True):
            bn.momentum = m
            opt.zero_grad()
            losses.append(bn(Tensor(x, device=DEVICE) @ w).tanh().square().mean().backward().item())
            opt.step()
        return losses, [t.numpy().tobytes() for t in (w, bn.weight, bn.bias, bn.running_mean, bn.running_var)]

    same, changed = [0.1] * 4, [0.1, 0.1, 0.3, 0.3]
    on = train(True, same)
    assert built["backprop"] == 1  # built on the first step only: the others replayed
    assert on == train(False, same)  # losses, parameters and running statistics bit for bit
    built["backprop"] = 0
    assert train(True, changed) == train(False, changed)
    assert built["backprop"] == 4 + 1  # the off run's 4, and the new momentum's first step (the rest replayed)
