"""matmul, conv2d and pooling of Tensor against NumPy (conv and pools against direct loops over output pixels)."""

from __future__ import annotations

import numpy as np
import pytest
from tensor_testing import check, skip_big

from uopviz import Tensor, dtypes
from uopviz.tensor import ShapeError

RNG = np.random.default_rng(4)


def f32(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize(("sa", "sb"), [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((1, 1), (1, 1)),
                                        ((7, 33), (33, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                                        ((4,), (2, 4, 3)), ((100, 64), (64, 100))])
def test_matmul(sa: tuple, sb: tuple, device: str) -> None:
    skip_big(device, *sa, *sb)
    a, b = f32(*sa), f32(*sb)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    check(ta @ tb, a @ b, rtol=1e-5, atol=1e-5)
    check(ta.dot(tb), np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_matmul_dtypes(device: str) -> None:
    a = RNG.integers(-5, 5, (3, 4)).astype(np.int32)
    b = RNG.integers(-5, 5, (4, 2)).astype(np.int8)
    out = Tensor(a, device=device) @ Tensor(b, device=device)
    assert out.dtype == dtypes.int32
    check(out, a @ b.astype(np.int32))
    check(Tensor(a, device=device) @ Tensor(b, device=device).float(), a @ b.astype(np.float32))
    check(a.astype(np.float32) @ Tensor(b.astype(np.float32), device=device), a @ b.astype(np.float32))


def test_matmul_errors() -> None:
    with pytest.raises(ShapeError, match="contracted dims differ"):
        Tensor.ones(2, 3) @ Tensor.ones(4, 2)
    with pytest.raises(ShapeError, match="at least 1 dim"):
        Tensor.ones(2) @ Tensor(2.0)
    with pytest.raises(ShapeError, match="broadcast"):
        Tensor.ones(2, 3, 4) @ Tensor.ones(3, 4, 5)


def conv2d_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: tuple, pad: tuple, dil: tuple,
               groups: int) -> np.ndarray:
    n, _, h, wd = x.shape
    co, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, co, oh, ow), np.float64)
    per = co // groups
    for o in range(co):
        g = o // per
        for i in range(oh):
            for j in range(ow):
                win = xp[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dil[0] * (kh - 1) + 1:dil[0],
                         j * stride[1]:j * stride[1] + dil[1] * (kw - 1) + 1:dil[1]]
                out[:, o, i, j] = (win * w[o]).sum((1, 2, 3))
    return out + (b.reshape(1, co, 1, 1) if b is not None else 0)


CONVS = [  # (x shape, w shape, stride, padding, dilation, groups, bias)
    ((1, 1, 5, 5), (1, 1, 3, 3), 1, 0, 1, 1, False),
    ((2, 3, 7, 6), (4, 3, 3, 2), 1, 1, 1, 1, True),
    ((1, 2, 9, 9), (3, 2, 3, 3), 2, 0, 1, 1, False),
    ((1, 2, 8, 7), (2, 2, 2, 3), (2, 3), (1, 2), 1, 1, True),
    ((1, 1, 9, 9), (1, 1, 3, 3), 1, 0, 2, 1, False),
    ((2, 4, 6, 6), (6, 2, 3, 3), 1, 1, (2, 1), 2, True),
    ((1, 4, 5, 5), (4, 1, 1, 1), 3, 0, 1, 4, False),
    ((1, 1, 4, 4), (1, 1, 4, 4), 1, 0, 1, 1, False),
]


@pytest.mark.parametrize("case", CONVS, ids=str)
def test_conv2d(case: tuple, device: str) -> None:
    xs, ws, stride, padding, dilation, groups, bias = case
    x, w = f32(*xs), f32(*ws)
    b = f32(ws[0]) if bias else None
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    out = Tensor(x, device=device).conv2d(Tensor(w, device=device), Tensor(b, device=device) if bias else None,
                                          stride=stride, padding=padding, dilation=dilation, groups=groups)
    check(out, conv2d_ref(x, w, b, pair(stride), pair(padding), pair(dilation), groups), rtol=1e-5, atol=1e-5)


def test_conv2d_asymmetric_padding(device: str) -> None:
    x, w = f32(1, 1, 4, 5), f32(2, 1, 2, 2)
    out = Tensor(x, device=device).conv2d(Tensor(w, device=device), padding=((1, 0), (0, 2)))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2)))
    check(out, conv2d_ref(xp, w, None, (1, 1), (0, 0), (1, 1), 1), rtol=1e-5, atol=1e-6)


def test_conv2d_errors() -> None:
    x = Tensor.ones(1, 3, 5, 5)
    with pytest.raises(ShapeError, match="4-D"):
        x.conv2d(Tensor.ones(3, 3, 3))
    with pytest.raises(ShapeError, match="groups"):
        x.conv2d(Tensor.ones(4, 2, 3, 3))
    with pytest.raises(ShapeError, match="does not fit"):
        x.conv2d(Tensor.ones(1, 3, 7, 7))
    with pytest.raises(ShapeError, match="bias"):
        x.conv2d(Tensor.ones(2, 3, 3, 3), Tensor.ones(3))
    with pytest.raises(ShapeError, match="stride"):
        x.conv2d(Tensor.ones(2, 3, 3, 3), stride=0)


def pool_ref(x: np.ndarray, k: int, s: int, fn: str) -> np.ndarray:
    *lead, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.zeros((*lead, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[..., i, j] = getattr(np, fn)(x[..., i * s:i * s + k, j * s:j * s + k], axis=(-2, -1))
    return out


@pytest.mark.parametrize(("shape", "k", "s"), [((1, 2, 6, 6), 2, 2), ((2, 7, 5), 3, 1), ((1, 1, 9, 8), 3, 2)])
def test_pools(shape: tuple, k: int, s: int, device: str) -> None:
    x = f32(*shape)
    t = Tensor(x, device=device)
    check(t.max_pool2d(k, s), pool_ref(x, k, s, "max"))
    check(t.avg_pool2d(k, s), pool_ref(x, k, s, "mean"), rtol=1e-6, atol=1e-7)


def test_max_pool_padding_counts_as_minus_inf(device: str) -> None:
    x = -np.ones((1, 1, 2, 2), np.float32)
    check(Tensor(x, device=device).max_pool2d(2, 1, padding=1), -np.ones((1, 1, 3, 3)))
    i = np.arange(4, dtype=np.int32).reshape(1, 2, 2) - 9
    check(Tensor(i, device=device).max_pool2d(2, 1, padding=1), np.array([[[-9, -8, -8], [-7, -6, -6], [-7, -6, -6]]]))
