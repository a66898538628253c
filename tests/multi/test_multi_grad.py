"""Gradients through Copy and Replicated: `.to(device)` between single devices, `shard` and `.to(devices)` of
tensors that are not realized, and SPEC's collectives, against PyTorch (float64) with uneven shards; each gradient
arrives on its source's device, laid out as the source is."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from devices_here import needs_cl

from uopviz import Tensor
from uopviz.tensor.multi import shards_of

SETS = [pytest.param(("CPU:0", "CPU:1"), id="cpu2"), pytest.param(("CPU:0", "CPU:1", "CPU:2"), id="cpu3"),
        pytest.param(("CPU:0", "CL:0.1"), id="mixed2", marks=needs_cl)]
RNG = np.random.default_rng(27)
X = RNG.standard_normal((7, 5))  # 7 rows, 5 columns: neither 2 nor 3 divides them


def test_to_another_device_is_differentiable() -> None:
    """The example of the issue: the part through PYTHON used to be dropped (3, not 3 + 2w)."""
    w = Tensor(np.array([1.0, 2.0, -3.0]), requires_grad=True)
    loss = (3 * w).sum() + (w.to("PYTHON") ** 2).sum().to("CPU")
    loss.backward()
    assert w.grad is not None and w.grad.device == "CPU"
    np.testing.assert_allclose(w.grad.numpy(), 3 + 2 * np.array([1.0, 2.0, -3.0]))
    assert loss.item() == pytest.approx(14.0)


def _dot(y: Tensor, r: np.ndarray) -> Tensor:
    """sum(y · r), r put where y is (sharded as y is)."""
    rt = Tensor(r, device=y.device if isinstance(y.device, str) else None)
    return (y * (rt.shard(y.device, y.axis) if isinstance(y.device, tuple) else rt)).sum()


def _pad_sum(x: torch.Tensor, n: int) -> torch.Tensor:
    """SPEC's reduce of a tensor split in n: the shards, zero-padded to ceil(size/n), summed."""
    c = -(-x.shape[0] // n)
    return torch.nn.functional.pad(x, (0, n * c - x.shape[0])).reshape(n, c).sum(0)


# name: (op on a single-device tensor of X's shape, the same in PyTorch given the number of devices)
OPS: dict[str, tuple[Callable[[Tensor, tuple[str, ...]], Tensor], Callable[[torch.Tensor, int], torch.Tensor]]] = {
    "shard0": (lambda t, D: t.shard(D, 0), lambda t, n: t),
    "shard1": (lambda t, D: t.shard(D, 1), lambda t, n: t),
    "replicate": (lambda t, D: t.shard(D), lambda t, n: t),
    "to": (lambda t, D: t.to(D), lambda t, n: t),
    "gather_to": (lambda t, D: t.shard(D, 1).gather_to(D[-1]), lambda t, n: t),
    "allgather": (lambda t, D: t.shard(D, 0).allgather(), lambda t, n: t),
    "reshard": (lambda t, D: t.shard(D, 1).to(D), lambda t, n: t),
    "reduce_to": (lambda t, D: t.reshape(-1).shard(D, 0).reduce_to(), lambda t, n: _pad_sum(t.reshape(-1), n)),
    "reduce_scatter": (lambda t, D: t.reshape(-1).shard(D, 0).reduce_scatter(),
                       lambda t, n: _pad_sum(t.reshape(-1), n)),
    "allreduce": (lambda t, D: t.reshape(-1).shard(D, 0).allreduce(), lambda t, n: _pad_sum(t.reshape(-1), n)),
    "sharded_math": (lambda t, D: (t.shard(D, 0).exp() * t.shard(D, 1)).sum(0), lambda t, n: (t.exp() * t).sum(0)),
}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("D", SETS)
def test_gradient_through_sharding_and_collectives(name: str, D: tuple[str, ...]) -> None:
    fn, tfn = OPS[name]
    t = Tensor(X)
    y = fn(t, D)
    r = RNG.standard_normal(y.shape)
    (g,) = _dot(y, r).gradient(t)
    assert g.device == "CPU"
    xt = torch.tensor(X, requires_grad=True)
    (tfn(xt, len(D)) * torch.tensor(r)).sum().backward()
    assert xt.grad is not None
    np.testing.assert_allclose(g.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("axis", [0, 1, None])
def test_gradient_of_a_sharded_leaf_is_laid_out_as_it(axis: int | None) -> None:
    """A realized tensor on several devices that requires a gradient, read through a gather to one device and back:
    its grad is on its devices, split along its axis (or replicated), each device holding its own shard."""
    D = ("CPU:0", "CPU:1", "CPU:2")
    t = Tensor(X).shard(D, axis).realize()
    t.requires_grad = True
    loss = (t.gather_to().exp() * Tensor(X, device="CPU:0")).sum()
    loss.backward()
    assert t.grad is not None and (t.grad.device, t.grad.axis) == (D, axis)
    np.testing.assert_allclose(t.grad.numpy(), np.exp(X) * X, rtol=1e-12)
    if axis is not None:
        assert [s.shape for s in shards_of(t.grad.uop)] == [s.shape for s in shards_of(t.uop)]


def test_backward_through_shard_of_a_one_device_parameter() -> None:
    """Data-parallel training with the parameters kept on one device and sharded lazily each step: the grads
    come back to that device and equal the one-device step's."""
    D = ("CPU:0", "CPU:1")
    x, y = RNG.standard_normal((10, 6)), RNG.standard_normal((10, 3))
    ws = [RNG.standard_normal(s) for s in ((6, 8), (8,), (8, 3))]

    def step(devices: tuple[str, ...] | None) -> list[np.ndarray]:
        params = [Tensor(w, requires_grad=True) for w in ws]
        used = params if devices is None else [p.shard(devices) for p in params]
        xt, yt = (Tensor(x), Tensor(y)) if devices is None else (Tensor(x).shard(devices, 0),
                                                                 Tensor(y).shard(devices, 0))
        loss = ((xt @ used[0] + used[1]).relu().matmul(used[2]) - yt).square().mean()
        loss.backward()
        assert all(p.grad is not None and p.grad.device == "CPU" for p in params)
        return [loss.numpy(), *(p.grad.numpy() for p in params if p.grad is not None)]

    for got, want in zip(step(D), step(None), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
