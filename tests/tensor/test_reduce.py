"""Reductions of Tensor against NumPy: axes (negative, tuples, None), keepdim, dtypes, softmax family, cumsum."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tensor_testing import check, skip_big

from uopviz import Tensor, dtypes
from uopviz.tensor import AxisError

RNG = np.random.default_rng(3)
AXES = [None, 0, -1, (0, 2), (-1, -3), ()]


def data(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(0 if np.dtype(dtype).kind == "u" else -50, 50, shape).astype(dtype)
    return RNG.uniform(-3, 3, shape).astype(dtype)


@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "mean"])
def test_reduce_axes(op: str, axis: object, keepdim: bool, device: str) -> None:
    a = data((2, 3, 5), "float32")
    if op == "prod":
        a = (a / 3).astype(np.float32)
    out = getattr(Tensor(a, device=device), op)(axis, keepdim=keepdim)
    check(out, getattr(np, op)(a, axis=axis, keepdims=keepdim), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [1, 7, 33, 1000])
@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "uint8", "uint32", "bool"])
def test_reduce_dtypes(n: int, dtype: str, device: str) -> None:
    skip_big(device, n)
    a = data((3, n), dtype)
    t = Tensor(a, device=device)
    s = t.sum(1)
    assert s.dtype == dtypes.from_numpy(a.sum(1).dtype)  # NumPy's: int64 for signed ints and bools, uint64 unsigned
    check(s, a.sum(1, dtype=np.float64 if "float" in dtype else np.int64), rtol=1e-5, atol=1e-5)
    check(t.max(1), a.max(1))
    check(t.min(-1), a.min(-1))
    check(t.max(), a.max())
    if dtype != "bool":
        check(t.mean(1), a.mean(1, dtype=np.float64), rtol=1e-5, atol=1e-5)
        assert t.mean().dtype == dtypes.float32


def test_min_max_extremes_and_nan(device: str) -> None:
    for dt in ("int8", "int64", "uint16"):
        info = np.iinfo(dt)
        a = np.array([[info.min, 3, info.max], [0, info.min, 1]], dt)
        check(Tensor(a, device=device).min(1), a.min(1))
        check(Tensor(a, device=device).max(0), a.max(0))
    f = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, np.inf]], np.float32)
    check(Tensor(f, device=device).max(1), f.max(1))
    check(Tensor(f, device=device).min(1), f.min(1))


def test_any_all(device: str) -> None:
    a = np.array([[0, 0, 1], [2, 3, 4], [0, 0, 0]], np.int32)
    t = Tensor(a, device=device)
    check(t.any(1), a.any(1))
    check(t.all(1), a.all(1))
    check(t.any(), a.any())
    check(t.all(0, keepdim=True), a.all(0, keepdims=True))


def bounds(dtype: str) -> tuple[object, object]:
    """(lowest, highest) value of a dtype: the identities of max and min over nothing."""
    if dtype == "bool":
        return False, True
    if np.dtype(dtype).kind == "f":
        return -np.inf, np.inf
    info = np.iinfo(dtype)
    return info.min, info.max


EMPTY = [((3, 0), 1, False), ((3, 0, 5), 1, True), ((3, 0, 5), (1, 2), False), ((3, 0, 5), (0, 1), False),
         ((0, 7), None, False), ((3, 5, 0), (0, -1), True), ((3, 0, 5), 0, False)]


@pytest.mark.parametrize(("shape", "axis", "keepdim"), EMPTY, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool"])
def test_reductions_over_an_empty_axis_are_identities(shape: tuple[int, ...], axis: object, keepdim: bool,
                                                      dtype: str, device: str) -> None:
    # the empty axis is a shrunk view of real data (which once leaked in) and, from NumPy, a constant
    base = data(tuple(d or 4 for d in shape), dtype)
    view = tuple(slice(2, 2) if d == 0 else slice(None) for d in shape)
    a = base[view]
    lo, hi = bounds(dtype)
    for t in (Tensor(base, device=device)[view], Tensor(a, device=device)):
        assert t.shape == shape
        check(t.sum(axis, keepdim), a.sum(axis, keepdims=keepdim))
        check(t.prod(axis, keepdim), a.prod(axis, keepdims=keepdim))
        check(t.max(axis, keepdim), np.max(a, axis, keepdims=keepdim, initial=lo))
        check(t.min(axis, keepdim), np.min(a, axis, keepdims=keepdim, initial=hi))
        check(t.any(axis, keepdim), a.any(axis, keepdims=keepdim))
        check(t.all(axis, keepdim), a.all(axis, keepdims=keepdim))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NumPy warns of the mean of nothing
            check(t.mean(axis, keepdim), a.mean(axis, keepdims=keepdim))


def test_reductions_over_an_empty_axis_of_a_wider_reduction(device: str) -> None:
    # max over two axes of a (3, 4, 6) buffer, one of them shrunk to nothing, next to a non-empty reduction
    base = data((3, 4, 6), "float32")
    x = Tensor(base, device=device)
    check(x[:, 1:1].max((1, 2)) + x.sum((1, 2)), np.full(3, -np.inf, np.float32))
    check(x[:, :, 3:3].min((0, 2)), np.full(4, np.inf, np.float32))
    check(x[1:1].sum(0) + x.max(0), base.max(0))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin_of_nothing_raise_as_numpy(op: str, device: str) -> None:
    x = Tensor(data((2, 5), "float32"), device=device)
    for t, axis in ((x[:, 3:3], 1), (x[:, 3:3], -1), (x[1:1], 0), (x[1:1], None), (Tensor.zeros(0, device=device), 0)):
        with pytest.raises(ValueError, match=f"attempt to get {op} of an empty sequence"):
            getattr(t, op)(axis)
        with pytest.raises(ValueError, match=f"attempt to get {op} of an empty sequence"):
            getattr(np, op)(t.numpy(), axis)
    check(getattr(x[1:1], op)(1), getattr(np, op)(np.zeros((0, 5)), 1))  # a non-empty axis of an empty tensor


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, (1, 2)], ids=str)
def test_var_std(axis: object, correction: int, device: str) -> None:
    a = data((4, 3, 5), "float32")
    t = Tensor(a, device=device)
    check(t.var(axis, correction=correction), a.var(axis=axis, ddof=correction), rtol=1e-5, atol=1e-6)
    check(t.std(axis, keepdim=True, correction=correction), a.std(axis=axis, ddof=correction, keepdims=True),
          rtol=1e-5, atol=1e-6)
    check(Tensor(np.arange(6), device=device).var(), np.arange(6).var(ddof=1), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool"])
def test_argmax_argmin(dtype: str, device: str) -> None:
    a = data((4, 7), dtype)
    if dtype != "bool":
        a[1, 2] = a[1, 5] = a[1].max()
        a[2, 0] = a[2, 6] = a[2].min()
    t = Tensor(a, device=device)
    for axis in (None, 0, 1, -1):
        assert t.argmax(axis).dtype == dtypes.int32
        check(t.argmax(axis), np.argmax(a, axis))
        check(t.argmin(axis), np.argmin(a, axis))
    check(t.argmax(1, keepdim=True), np.argmax(a, 1, keepdims=True))
    check(t.argmin(None, keepdim=True), np.argmin(a, None, keepdims=True))
    if dtype == "float32":
        f = np.array([[1.0, np.nan, 5.0, np.nan], [2.0, 2.0, 1.0, 0.0]], np.float32)
        check(Tensor(f, device=device).argmax(1), np.argmax(f, 1))


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_family(axis: int, device: str) -> None:
    a = data((3, 6), "float32") * 10
    a[0, 0] = 80.0  # large enough that a naive exp would overflow
    t = Tensor(a, device=device)
    x = a.astype(np.float64)
    e = np.exp(x - x.max(axis, keepdims=True))
    sm = e / e.sum(axis, keepdims=True)
    lse = np.log(e.sum(axis)) + x.max(axis)
    check(t.softmax(axis), sm, rtol=1e-5, atol=1e-7)
    check(t.log_softmax(axis), np.log(sm), rtol=1e-5, atol=1e-5)
    check(t.logsumexp(axis), lse, rtol=1e-6)
    check(t.logsumexp(axis, keepdim=True), np.expand_dims(lse, axis), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 7, 33, 1000])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "bool"])
def test_cumsum_1d(n: int, dtype: str, device: str) -> None:
    skip_big(device, n)
    a = data((n,), dtype)
    out = Tensor(a, device=device).cumsum()
    assert out.dtype == dtypes.from_numpy(np.cumsum(a).dtype)  # NumPy's: int64 for ints and bools
    check(out, np.cumsum(a, dtype=np.float64 if dtype == "float32" else np.int64), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_cumsum_axes(axis: int | None, device: str) -> None:
    a = data((3, 4, 5), "int32")
    check(Tensor(a, device=device).cumsum(axis), np.cumsum(a, axis))


def test_reduce_errors() -> None:
    t = Tensor.ones(2, 3)
    with pytest.raises(AxisError, match="out of range"):
        t.sum(2)
    with pytest.raises(IndexError):
        t.max(-3)
    with pytest.raises(AxisError, match="twice"):
        t.sum((0, -2))
    assert Tensor(1.0).cumsum(0).item() == 1.0  # a 0-d tensor takes axis 0 or -1, as in PyTorch
    with pytest.raises(AxisError, match="out of range"):
        Tensor(1.0).cumsum(1)


def test_reduce_keeps_sizes_as_spec_says() -> None:
    t = Tensor.ones(2, 3, 4)
    assert t.sum((0, 2)).shape == (3,) and t.sum((0, 2), keepdim=True).shape == (1, 3, 1)
    assert t.sum().shape == () and t.sum(()).shape == (2, 3, 4)
    assert Tensor.ones(3, dtype=dtypes.float16).sum().dtype == dtypes.float16
    assert Tensor.ones(3, dtype=dtypes.int16).prod().dtype == dtypes.int64
    assert Tensor.ones(3, dtype=dtypes.uint8).sum().dtype == dtypes.uint64
    assert Tensor.ones(3).sum(dtype=dtypes.float64).dtype == dtypes.float64
