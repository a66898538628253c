"""Convolutions (1-3 spatial dims, transposed), pooling modes, interpolation, attention, einsum and the losses
against NumPy references (PyTorch's semantics written out), on every device."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest
from tensor_testing import check

from uopviz import Tensor
from uopviz.tensor.util import ShapeError

RNG = np.random.default_rng(0)


def conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int, dil: int, groups: int) -> np.ndarray:
    """Direct cross-correlation over every spatial dim (x: (N, C, *s), w: (O, C/g, *k))."""
    nd = x.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * nd)
    ks, outs = w.shape[2:], [(s - dil * (k - 1) - 1) // stride + 1 for s, k in zip(x.shape[2:], w.shape[2:])]
    out = np.zeros((x.shape[0], w.shape[0], *outs))
    og, cg = w.shape[0] // groups, w.shape[1]
    for o in range(w.shape[0]):
        g = o // og
        for pos in product(*(range(n) for n in outs)):
            win = x[(slice(None), slice(g * cg, (g + 1) * cg),
                     *(slice(p * stride, p * stride + dil * (k - 1) + 1, dil) for p, k in zip(pos, ks)))]
            out[(slice(None), o, *pos)] = (win * w[o]).reshape(x.shape[0], -1).sum(1)
    return out


@pytest.mark.parametrize("nd,stride,pad,dil,groups", [(1, 2, 1, 2, 1), (2, 1, 1, 1, 2), (2, 2, 0, 1, 1),
                                                      (3, 1, 1, 1, 1)])
def test_conv_nd(nd: int, stride: int, pad: int, dil: int, groups: int, device: str) -> None:
    x = RNG.standard_normal((2, 4, *(5, 6, 4)[:nd])).astype(np.float32)
    w = RNG.standard_normal((4, 4 // groups, *(3, 2, 2)[:nd])).astype(np.float32)
    got = Tensor(x, device=device).conv(Tensor(w, device=device), stride=stride, padding=pad, dilation=dil,
                                        groups=groups)
    check(got, conv_ref(x, w, stride, pad, dil, groups), rtol=1e-4, atol=1e-5)


def test_conv2d_unbatched_and_same(device: str) -> None:
    """conv2d takes a 3-D (C, H, W) input as PyTorch does; padding="same" keeps the size."""
    x = RNG.standard_normal((3, 6, 5)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    check(Tensor(x, device=device).conv2d(Tensor(w, device=device)), conv_ref(x[None], w, 1, 0, 1, 1)[0], rtol=1e-4,
          atol=1e-5)
    assert Tensor(x).conv2d(Tensor(w), padding="same").shape == (2, 6, 5)
    with pytest.raises(ShapeError, match="input channels 6"):  # a 3-D weight: a batched conv1d (tinygrad's N-d conv2d)
        Tensor(x).conv2d(Tensor(w[0]))


@pytest.mark.parametrize("stride,pad,outpad,dil", [(1, 0, 0, 1), (2, 1, 1, 1), (2, 0, 1, 2), (3, 2, 0, 1)])
def test_conv_transpose2d(stride: int, pad: int, outpad: int, dil: int, device: str) -> None:
    """The transpose of conv2d: <conv_transpose(y), x> = <y, conv(x)> for the same weight and settings."""
    x = RNG.standard_normal((1, 3, 4, 5)).astype(np.float64)
    w = RNG.standard_normal((3, 2, 3, 2)).astype(np.float64)
    y = Tensor(x, device=device).conv_transpose2d(Tensor(w, device=device), stride=stride, padding=pad,
                                                  output_padding=outpad, dilation=dil).numpy()
    z = RNG.standard_normal(y.shape)
    back = conv_ref(z, w, stride, pad, dil, 1)
    assert back.shape == x.shape
    np.testing.assert_allclose((y * z).sum(), (back * x).sum(), rtol=1e-9)


def pool_ref(x: np.ndarray, k: int, s: int, p: int, ceil: bool, op: str, include_pad: bool = True) -> np.ndarray:
    n = x.shape[-1]
    span = n + 2 * p - k
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= n + p:
        out -= 1
    res = np.zeros((*x.shape[:-1], out))
    for o in range(out):
        lo, hi = o * s - p, o * s - p + k
        seg = x[..., max(lo, 0):min(hi, n)]
        if op == "max":
            res[..., o] = seg.max(-1)
        else:
            count = (min(hi, n + p) - lo) if include_pad else seg.shape[-1]
            res[..., o] = seg.sum(-1) / count
    return res


@pytest.mark.parametrize("k,s,p,ceil", [(2, 2, 0, False), (3, 2, 1, True), (3, 2, 1, False), (2, 3, 1, True)])
def test_pool1d_modes(k: int, s: int, p: int, ceil: bool, device: str) -> None:
    x = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    t = Tensor(x, device=device)
    check(t.max_pool1d(k, s, p, ceil_mode=ceil), pool_ref(x, k, s, p, ceil, "max"))
    for include in (True, False):
        check(t.avg_pool1d(k, s, p, ceil_mode=ceil, count_include_pad=include),
              pool_ref(x, k, s, p, ceil, "avg", include), rtol=1e-6)


def test_max_pool2d_indices_and_unpool(device: str) -> None:
    x = RNG.standard_normal((1, 2, 5, 6)).astype(np.float32)
    vals, idx = Tensor(x, device=device).max_pool2d(2, return_indices=True)
    flat = x.reshape(1, 2, -1)
    check(vals, x[:, :, :4].reshape(1, 2, 2, 2, 3, 2).max((3, 5)))
    np.testing.assert_array_equal(np.take_along_axis(flat, idx.numpy().reshape(1, 2, -1), 2).reshape(vals.shape),
                                  vals.numpy())
    up = vals.max_unpool2d(idx, 2, output_size=(5, 6)).numpy()
    want = np.zeros_like(flat)
    np.put_along_axis(want, idx.numpy().reshape(1, 2, -1), vals.numpy().reshape(1, 2, -1), 2)
    np.testing.assert_array_equal(up, want.reshape(x.shape))


def test_pool3d(device: str) -> None:
    x = RNG.standard_normal((1, 1, 4, 4, 4)).astype(np.float32)
    check(Tensor(x, device=device).max_pool3d(2), x.reshape(1, 1, 2, 2, 2, 2, 2, 2).max((3, 5, 7)))
    check(Tensor(x, device=device).avg_pool3d(2), x.reshape(1, 1, 2, 2, 2, 2, 2, 2).mean((3, 5, 7)), rtol=1e-6)


def _linear_ref(x: np.ndarray, out: int, align: bool, scale: float | None) -> np.ndarray:
    n = x.shape[-1]
    o = np.arange(out)
    if align:
        src = o * ((n - 1) / (out - 1) if out > 1 else 0)
    else:
        src = np.maximum((o + 0.5) * (1 / scale if scale else n / out) - 0.5, 0)
    lo = np.minimum(np.floor(src).astype(int), n - 1)
    hi = np.minimum(lo + 1, n - 1)
    w = src - lo
    return x[..., lo] * (1 - w) + x[..., hi] * w


def test_interpolate(device: str) -> None:
    x = RNG.standard_normal((1, 2, 5)).astype(np.float32)
    t = Tensor(x, device=device)
    check(t.interpolate(size=8), x[..., np.floor(np.arange(8) * 5 / 8).astype(int)])
    check(t.interpolate(size=8, mode="linear"), _linear_ref(x, 8, False, None), rtol=1e-5, atol=1e-6)
    check(t.interpolate(size=3, mode="linear", align_corners=True), _linear_ref(x, 3, True, None), rtol=1e-5,
          atol=1e-6)
    check(t.interpolate(scale_factor=2, mode="linear"), _linear_ref(x, 10, False, 2), rtol=1e-5, atol=1e-6)
    im = RNG.standard_normal((1, 1, 3, 4)).astype(np.float32)
    rows = _linear_ref(im.transpose(0, 1, 3, 2), 6, False, None).transpose(0, 1, 3, 2)
    check(Tensor(im, device=device).interpolate(size=(6, 7), mode="bilinear"), _linear_ref(rows, 7, False, None),
          rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="mode"):
        t.interpolate(size=4, mode="bilinear")


def test_scaled_dot_product_attention(device: str) -> None:
    q, k, v = (RNG.standard_normal(s).astype(np.float32) for s in ((2, 4, 3), (2, 5, 3), (2, 5, 2)))
    s = q @ k.transpose(0, 2, 1) / math.sqrt(3)

    def attend(scores: np.ndarray) -> np.ndarray:
        e = np.exp(scores - scores.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)) @ v

    tq, tk, tv = (Tensor(a, device=device) for a in (q, k, v))
    check(tq.scaled_dot_product_attention(tk, tv), attend(s), rtol=1e-5, atol=1e-6)
    causal = np.tril(np.ones((4, 5), bool))
    check(tq.scaled_dot_product_attention(tk, tv, is_causal=True), attend(np.where(causal, s, -np.inf)), rtol=1e-5,
          atol=1e-6)
    mask = RNG.random((4, 5)) > 0.3
    mask[:, 0] = True
    check(tq.scaled_dot_product_attention(tk, tv, attn_mask=Tensor(mask, device=device)),
          attend(np.where(mask, s, -np.inf)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("formula,shapes", [("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk", [(2, 3, 4), (2, 4, 3)]),
                                            ("ii->i", [(4, 4)]), ("ij->", [(3, 4)]),
                                            ("...j,kj->...k", [(2, 3, 4), (5, 4)]),
                                            ("i,j->ij", [(3,), (4,)])])
def test_einsum(formula: str, shapes: list[tuple[int, ...]], device: str) -> None:
    ops = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    check(Tensor.einsum(formula, *(Tensor(a, device=device) for a in ops)), np.einsum(formula, *ops), rtol=1e-5,
          atol=1e-5)


def _log_softmax(x: np.ndarray, axis: int = 1) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(smoothing: float, reduction: str, device: str) -> None:
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    y = np.array([0, 3, -100, 2, 1, 3], np.int32)
    lp = _log_softmax(x)
    keep = y != -100
    per = -((1 - smoothing) * lp[np.arange(6), np.where(keep, y, 0)] + smoothing * lp.mean(1)) * keep
    want = {"mean": per.sum() / keep.sum(), "sum": per.sum(), "none": per}[reduction]
    got = Tensor(x, device=device).cross_entropy(Tensor(y, device=device), reduction=reduction,
                                                 label_smoothing=smoothing)
    check(got, want, rtol=1e-5, atol=1e-6)


def test_other_losses(device: str) -> None:
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    y = np.array([2, 0, 1, 1, 0], np.int32)
    w = np.array([0.5, 2.0, 1.0], np.float32)
    lp = _log_softmax(x)
    tx, ty = Tensor(x, device=device), Tensor(y, device=device)
    picked = -lp[np.arange(5), y] * w[y]
    check(Tensor(lp.astype(np.float32), device=device).nll_loss(ty, weight=Tensor(w, device=device)),
          picked.sum() / w[y].sum(), rtol=1e-5)
    check(tx.sparse_categorical_crossentropy(ty), -lp[np.arange(5), y].mean(), rtol=1e-5)
    p, t = RNG.random(7).astype(np.float32), (RNG.random(7) > 0.5).astype(np.float32)
    bce = -(t * np.log(p) + (1 - t) * np.log(1 - p))
    check(Tensor(p, device=device).binary_crossentropy(Tensor(t, device=device)), bce.mean(), rtol=1e-5)
    z = RNG.standard_normal(7).astype(np.float32) * 5
    sp = np.logaddexp(0, -z.astype(np.float64))
    want = ((1 - t) * z + (1 + (2.0 - 1) * t) * sp).sum()
    check(Tensor(z, device=device).binary_crossentropy_logits(Tensor(t, device=device), "sum",
                                                              pos_weight=Tensor(np.float32(2.0), device=device)),
          want, rtol=1e-5)
    with pytest.raises(ShapeError):
        tx.cross_entropy(Tensor(np.zeros(4, np.int32)))


def test_int_matmul_keeps_the_promoted_dtype(device: str) -> None:
    """int8 @ int16 is int16 (wrapping), as NumPy: it was int32."""
    a = np.array([[100, 27], [-3, 4]], np.int8)
    b = np.array([[300, 1], [2, 1000]], np.int16)
    out = Tensor(a, device=device) @ Tensor(b, device=device)
    check(out, a @ b)
    assert out.numpy().dtype == np.int16
