"""shard_ (tinygrad's in-place shard): the tensor object itself moves onto the devices, split or replicated, so a
model's parameters are sharded where the model holds them; values and a training step against one device."""

from __future__ import annotations

import numpy as np
import pytest

import uopviz.nn as nn
from uopviz import Tensor
from uopviz.tensor.multi import ShardError

D = ("CPU:0", "CPU:1")
RNG = np.random.default_rng(4)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_shard_in_place(axis: int | None) -> None:
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    t = Tensor(x)
    assert t.shard_(D, axis) is t
    assert t.device == D and t.axis == axis and t.shape == (5, 4)
    np.testing.assert_array_equal((t * 2).numpy(), x * 2)


def test_shard_in_place_keeps_requires_grad_and_trains_as_one_device() -> None:
    """A Linear whose parameters are sharded in place (replicated) on a batch split along axis 0: SGD steps give
    the one-device model's weights."""
    x = RNG.standard_normal((6, 3)).astype(np.float32)
    y = RNG.standard_normal((6, 2)).astype(np.float32)
    one, many = nn.Linear(3, 2), nn.Linear(3, 2)
    for a, b in zip(nn.get_parameters(one), nn.get_parameters(many)):
        b.assign(a.numpy()).realize()
    for p in nn.get_parameters(many):
        p.shard_(D).realize()
        assert p.requires_grad and p.device == D
    for model, xb, yb in ((one, Tensor(x), Tensor(y)), (many, Tensor(x).shard(D, 0), Tensor(y).shard(D, 0))):
        opt = nn.optim.SGD(nn.get_parameters(model), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            ((model(xb) - yb) ** 2).mean().backward()
            opt.step()
    for a, b in zip(nn.get_parameters(one), nn.get_parameters(many)):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)


def test_shard_in_place_refusals() -> None:
    t = Tensor([1.0, 2.0])
    with pytest.raises(ShardError):
        t.shard_("CPU", 0)
    assert t.device == "CPU"  # unchanged by a failed shard_
