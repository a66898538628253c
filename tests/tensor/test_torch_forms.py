"""Argument forms of torch and tinygrad: gather(dim, index), index_select, scatter(reduce=), isinf's detect_*
flags, pad(padding=) with the mode second and negative widths, sparse categorical cross-entropy with the classes
last; each against torch on every device, gradients included (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_peer import same_as_torch

from uopviz import Tensor
from uopviz.tensor import ShapeError

RNG = np.random.default_rng(3)
A = RNG.standard_normal((3, 5, 4))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_torch_form(dim: int, device: str) -> None:
    shape = [2, 3, 3]
    shape[dim] = 6
    idx = RNG.integers(-A.shape[dim], A.shape[dim], shape)
    pos = idx % A.shape[dim]  # torch takes no negative index
    same_as_torch(lambda x: x.gather(dim, Tensor(idx, device=device)), lambda x: x.gather(dim, torch.tensor(pos)),
                  [A], device)
    same_as_torch(lambda x: x.gather(dim=dim, index=pos.tolist()), lambda x: torch.gather(x, dim, torch.tensor(pos)),
                  [A], device)


def test_gather_keeps_the_take_form(device: str) -> None:
    x = Tensor(A, device=device)
    np.testing.assert_array_equal(x.gather([2, 0], 1).numpy(), np.take(A, [2, 0], 1))
    np.testing.assert_array_equal(x.gather(Tensor([1, 1], device=device)).numpy(), np.take(A, [1, 1], 0))
    with pytest.raises(ShapeError):
        x.gather(0, Tensor(np.zeros((2, 6, 1), np.int64), device=device))


def test_gather_bool_and_index_select(device: str) -> None:
    b = A > 0
    idx = RNG.integers(0, 5, (3, 2, 4))
    got = Tensor(b, device=device).gather(1, Tensor(idx, device=device)).numpy()
    np.testing.assert_array_equal(got, torch.tensor(b).gather(1, torch.tensor(idx)).numpy())
    same_as_torch(lambda x: x.index_select(2, [3, 0, 3]), lambda x: x.index_select(2, torch.tensor([3, 0, 3])), [A],
                  device)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_argument(reduce: str, device: str) -> None:
    idx = np.array([[0, 1, 2, 0, 0], [2, 2, 1, 0, 1]])
    src = RNG.standard_normal((2, 5))
    same_as_torch(lambda x, s: x.scatter(0, Tensor(idx, device=device), s, reduce=reduce),
                  lambda x, s: x.scatter(0, torch.tensor(idx), s, reduce=reduce), [A[:, :, 0].copy(), src], device,
                  grad=False)
    same_as_torch(lambda x, s: x.scatter(0, Tensor(idx, device=device), s, reduce=reduce),  # torch's gradient: of
                  lambda x, s: x.scatter_reduce(0, torch.tensor(idx), s, {"add": "sum", "multiply": "prod"}[reduce]),
                  [A[:, :, 0].copy(), src], device)                                      # the same scatter_reduce
    same_as_torch(lambda x: x.scatter(1, Tensor(idx, device=device), value=2.5),
                  lambda x: x.scatter(1, torch.tensor(idx), value=2.5), [A[:, :, 0].copy()], device)


def test_isinf_detect_flags(device: str) -> None:
    a = np.array([np.inf, -np.inf, 1.0, np.nan, -0.0], np.float32)
    x = Tensor(a, device=device)
    np.testing.assert_array_equal(x.isinf(detect_negative=False).numpy(), np.isposinf(a))
    np.testing.assert_array_equal(x.isinf(detect_positive=False).numpy(), np.isneginf(a))
    np.testing.assert_array_equal(x.isinf(False, False).numpy(), np.zeros(5, bool))
    np.testing.assert_array_equal(x.isinf().numpy(), np.isinf(a))


@pytest.mark.parametrize("pad", [(1, 2), (0, 1, 2, 0), (-1, 2, 1, -2), ((1, 0), None, (0, 2))])
def test_pad_forms(pad: tuple, device: str) -> None:
    tpad = pad if all(isinstance(p, int) for p in pad) else (0, 2, 0, 0, 1, 0)
    same_as_torch(lambda x: x.pad(padding=pad), lambda x: F.pad(x, tpad), [A], device)
    same_as_torch(lambda x: x.pad(pad, "constant", 1.5), lambda x: F.pad(x, tpad, "constant", 1.5), [A], device)
    if all(isinstance(p, int) and p >= 0 for p in pad):
        same_as_torch(lambda x: x.pad(pad, "reflect"), lambda x: F.pad(x, pad, "reflect"), [A], device)


@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 3, 5), (2, 2, 3, 5)])
def test_sparse_categorical_crossentropy_classes_last(shape: tuple, device: str) -> None:
    y = RNG.integers(0, 5, shape[:-1])
    y.flat[0] = -1 if y.ndim else y.flat[0]
    logits = RNG.standard_normal(shape)

    def peer(x: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(x.movedim(-1, 1) if x.ndim > 1 else x, torch.tensor(y), ignore_index=-1,
                               label_smoothing=0.1)
    same_as_torch(lambda x: x.sparse_categorical_crossentropy(Tensor(y, device=device), label_smoothing=0.1),
                  peer, [logits], device)


def test_view_swish_batchnorm(device: str) -> None:
    same_as_torch(lambda x: x.view(5, -1), lambda x: x.view(5, -1), [A], device)
    same_as_torch(lambda x: x.swish(), F.silu, [A], device)
    mean, var, w, b = RNG.standard_normal(5), RNG.uniform(0.5, 2, 5), RNG.standard_normal(5), RNG.standard_normal(5)
    x, m, v, wt, bt = (torch.tensor(a) for a in (A, mean, var, w, b))  # torch's eval batch_norm, once
    want = F.batch_norm(x, m, v, wt, bt, eps=1e-5)
    got = Tensor(A, device=device).batchnorm(*(Tensor(a, device=device) for a in (w, b, mean, (var + 1e-5) ** -0.5)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7)

    def peer(x: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:  # its formula, every gradient
        return (x - m) * (v + 1e-5).rsqrt()
    same_as_torch(lambda x, m, v: x.batchnorm(None, None, m, v.add(1e-5).rsqrt(), axis=-1), peer,
                  [A, mean[:4], var[:4]], device)


def test_scaled_uniform(device: str) -> None:
    t = Tensor.scaled_uniform(40, 25, seed=1, device=device).numpy()
    assert t.shape == (40, 25) and np.abs(t).max() <= 1000 ** -0.5 and np.abs(t).max() > 0.9 * 1000 ** -0.5
