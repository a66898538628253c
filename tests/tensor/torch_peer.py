"""Comparison of a Tensor program with its PyTorch twin: values and gradients, float64 on both sides."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from uopviz import Tensor


def same_as_torch(fn: Callable[..., Any], tfn: Callable[..., Any], arrays: list[np.ndarray], device: str,
                  grad: bool = True, rtol: float = 1e-7) -> None:
    """fn on uopviz Tensors equals tfn on torch tensors of the same arrays, and (grad) so do the gradients of
    sum(out * r) for a random r with respect to every float input."""
    floats = [a.dtype.kind == "f" for a in arrays]
    xs = [Tensor(a, device=device, requires_grad=grad and f) for a, f in zip(arrays, floats)]
    ts = [torch.tensor(a, requires_grad=grad and f) for a, f in zip(arrays, floats)]
    out, want = fn(*xs), tfn(*ts)
    assert out.shape == tuple(want.shape)
    wanted = grad and any(floats)
    if wanted:  # the gradient's graph is built before out is read: realizing out cuts it from its inputs
        r = np.random.default_rng(1).standard_normal(tuple(want.shape))
        got = (out * Tensor(r, device=device)).sum().gradient(*(x for x, f in zip(xs, floats) if f))
        (want * torch.tensor(r)).sum().backward()
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=rtol, atol=1e-12)
    if wanted:
        for g, t in zip(got, (t for t, f in zip(ts, floats) if f)):
            np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=rtol, atol=1e-12)
