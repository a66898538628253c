"""Tensor-level Index, Stack, Slice, size-changing Bitcast and Load, built as UOps and realized on every runtime
against NumPy (shapes that are not powers of two), and what is refused: a SpecError naming the op, raised by the
kernel split before any kernel pass runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import uopviz
from uopviz.dtype import dtypes
from uopviz.pipeline import schedule
from uopviz.realize import realize, run_kernel, to_host
from uopviz.runtime import device as devices
from uopviz.runtime.buffer import from_numpy
from uopviz.uop.ops import AddrSpace, Ops, SliceArg, SpecError, UOp
from uopviz.uop.spec import validate

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]
RNG = np.random.default_rng(7)
X = RNG.standard_normal((5, 7, 3)).astype(np.float32)


def leaf(a: np.ndarray, device: str) -> UOp:
    """Data in a buffer: Reshape(Buffer, shape)."""
    return from_numpy(a, device).reshape(a.shape)


def run(u: UOp) -> Any:
    """The graph checked against the spec, then realized (the default opts: vectors on CPU and CL)."""
    return to_host(realize([validate(u)])[0])


def np_index(x: np.ndarray, *idx: np.ndarray) -> np.ndarray:
    """SPEC's Index in NumPy: each index takes its axis in turn and leaves its own shape there (() removes the axis,
    (k,) makes it k); as in the Tensor front-end, -n..-1 wrap and a value outside [-n, n) reads 0."""
    out, masks, p = x, [], 0
    for i in idx:
        n = out.shape[p]
        big = np.asarray(i).astype(object)  # Python ints: exact for every integer dtype
        good = ((big >= -n) & (big < n)).astype(bool)
        out = np.take(out, np.where(good, big % n, 0).astype(np.int64), axis=p)
        masks.append((p, good))
        p += good.ndim
    for q, good in masks:
        out = np.where(good.reshape((1,) * q + good.shape + (1,) * (out.ndim - q - good.ndim)), out, out.dtype.type(0))
    return out


# ---------------------------------------------------------------- Index
INDEX_CASES = {
    "rows": (np.array([4, -1, 0, 7, -6, 2], np.int32),),
    "one row": (np.array(3, np.int64),),
    "gather then remove": (np.array([1, -2, 9], np.int32), np.array(-3, np.int16)),
    "three axes": (np.array([0, 4, 2], np.int32), np.array([6, 0, -7, 7, 1], np.int8), np.array([2, 0], np.uint8)),
    "huge values": (np.array([2**32 + 1, -2**40, 4, -5], np.int64), np.array([2**64 - 1, 3, 2**63], np.uint64)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", INDEX_CASES)
def test_index_by_tensors(device: str, case: str) -> None:
    idx = INDEX_CASES[case]
    got = run(UOp(Ops.INDEX, (leaf(X, device), *(leaf(i, device) for i in idx))))
    want = np_index(X, *idx)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_index_by_constants_wraps_negatives(device: str) -> None:
    x = leaf(X, device)
    np.testing.assert_array_equal(run(x.index(-1)), X[-1])
    np.testing.assert_array_equal(run(x.index(2, -2)), X[2, -2])
    np.testing.assert_array_equal(run(x.index(4, 6, 1)), X[4, 6, 1])
    np.testing.assert_array_equal(run(x.index(5)), np.zeros((7, 3), np.float32))  # out of range: 0


@pytest.mark.parametrize("device", DEVICES)
def test_index_of_computed_values_by_computed_indices(device: str) -> None:
    i = np.array([3, 0, -1, 2], np.int32)
    sums = (leaf(X, device) * 2.0).reduce(Ops.ADD, axes=(2,))  # (5, 7, 1): materialized, then indexed
    got = run(UOp(Ops.INDEX, (sums, leaf(i, device) + 1)))
    np.testing.assert_allclose(got, np_index((X * 2).sum(2, keepdims=True), i + 1), rtol=1e-5)
    stacked = UOp(Ops.STACK, (leaf(X[0], device), leaf(X[1], device) + 1.0, leaf(X[2], device)))
    k = np.array([2, 0, 1, 1, -3], np.int32)
    got = run(UOp(Ops.INDEX, (stacked, leaf(k, device))))
    np.testing.assert_array_equal(got, np_index(np.stack([X[0], X[1] + np.float32(1), X[2]]), k))


# ---------------------------------------------------------------- Stack
@pytest.mark.parametrize("device", DEVICES)
def test_stack(device: str) -> None:
    a, b, c = X[..., 0], X[..., 1], X[..., 2].T.copy()
    got = run(UOp(Ops.STACK, (leaf(a, device), leaf(b, device) * 3.0, leaf(c, device).permute((1, 0)))))
    np.testing.assert_array_equal(got, np.stack([a, b * np.float32(3), c.T]))
    consts = UOp(Ops.STACK, tuple(UOp.const(dtypes.int32, v) for v in (5, -2, 9)))  # a vector constant
    np.testing.assert_array_equal(run(consts * leaf(np.arange(3, dtype=np.int32), device)), [0, -2, 18])


# ---------------------------------------------------------------- Slice
SLICES = [(np.float32, dtypes.float32, 3, 11), (np.float32, dtypes.uint8, 5, 13), (np.float32, dtypes.uint16, 2, 9),
          (np.float32, dtypes.int64, 1, 3), (np.float32, dtypes.float32, 0, 105), (np.uint8, dtypes.uint32, 7, 5),
          (np.int16, dtypes.float32, 3, 6)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("src", "dt", "off", "size"), SLICES)
def test_slice(device: str, src: Any, dt: Any, off: int, size: int) -> None:
    x = X if src is np.float32 else RNG.integers(0, 100, (3, 35)).astype(src)
    start = off * x.dtype.itemsize
    want = np.frombuffer(x.tobytes()[start:start + size * dt.itemsize], dtypes.to_numpy(dt))
    got = run(UOp(Ops.SLICE, (leaf(x, device), UOp.const(dtypes.index, off)), SliceArg(size, dt)))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


# ---------------------------------------------------------------- Bitcast that changes the element size
def _bits_of(src: Any, shape: tuple[int, int]) -> np.ndarray:
    """Values of dtype src; halves that are NaN are left out (no runtime keeps a NaN's payload through half)."""
    if src is np.bool_:
        return RNG.integers(0, 2, shape).astype(bool)
    if np.dtype(src).kind == "f":
        return RNG.standard_normal(shape).astype(src)
    return RNG.integers(-128, 128, shape).astype(src)


BITCASTS = [(np.float32, np.uint8, (5, 3)), (np.uint8, np.float32, (3, 12)), (np.int16, np.int64, (5, 8)),
            (np.float64, np.int16, (3, 5)), (np.float16, np.uint32, (3, 6)), (np.bool_, np.int16, (3, 6)),
            (np.uint32, np.float16, (7, 3)), (np.int32, np.bool_, (3, 5))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("src", "dst", "shape"), BITCASTS)
def test_bitcast_changes_the_last_axis(device: str, src: Any, dst: Any, shape: tuple[int, int]) -> None:
    x, y = _bits_of(src, shape), _bits_of(src, shape)
    if dst is np.float16:  # bit patterns of halves that are not NaN
        x, y = (RNG.standard_normal((shape[0], 2 * shape[1])).astype(np.float16).view(src) for _ in range(2))
    pick = RNG.integers(0, 2, shape).astype(bool)
    chosen = np.where(pick, x, y)

    def want(a: np.ndarray) -> np.ndarray:  # NumPy's view; a byte read as a bool is true where it is not 0
        return (a.view(np.uint8) != 0).reshape(a.shape[0], -1) if dst is np.bool_ else a.view(dst)
    to = dtypes.from_numpy(dst)
    np.testing.assert_array_equal(run(leaf(x, device).bitcast(to)), want(x))
    computed = leaf(pick, device).where(leaf(x, device), leaf(y, device)).bitcast(to)  # a value, not memory
    np.testing.assert_array_equal(run(computed), want(chosen))


@pytest.mark.parametrize("device", DEVICES)
def test_bitcast_of_bfloat16(device: str) -> None:
    bits = np.array([[0x3F80, 0x4000, 0xC040, 0x4049], [0x0001, 0x7F7F, 0x8000, 0xBF00]], np.uint16)
    b16 = leaf(bits, device).bitcast(dtypes.bfloat16)
    np.testing.assert_array_equal(run(b16.bitcast(dtypes.uint32)), bits.view(np.uint32))
    np.testing.assert_array_equal(run(b16.permute((1, 0)).bitcast(dtypes.uint8)), bits.T.copy().view(np.uint8))
    wide = leaf(bits.view(np.uint32), device).bitcast(dtypes.bfloat16)
    np.testing.assert_array_equal(run(wide.bitcast(dtypes.uint16)), bits)


# ---------------------------------------------------------------- Load
@pytest.mark.parametrize("device", DEVICES)
def test_tensor_level_load(device: str) -> None:
    x, g = leaf(X, device), leaf(X > 0, device)
    cases = [((x,), X), ((x, UOp.const(dtypes.float32, -1.0), g), np.where(X > 0, X, -1)),
             ((x, g), np.where(X > 0, X, 0)), ((x, leaf(X * 3, device), g), np.where(X > 0, X, X * 3)),
             ((x, leaf(np.array(False), device)), np.zeros_like(X))]
    for srcs, want in cases:
        np.testing.assert_array_equal(run(UOp(Ops.LOAD, srcs)), want.astype(np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_load_with_a_gate_and_no_alt_reads_zero(device: str) -> None:
    # Load(idx, gate): SPEC's gated Load without an alt. The gate keeps the read of a[i + 4] in bounds.
    n = 7
    out, a = UOp.param(0, (n,)), UOp.param(1, (n + 3,))
    i = UOp.range(n, 0)
    k = UOp.sink(out.index(i).store(a.index(i + 4).load(i < 6)).end(i))
    got = run_kernel(validate(k), [np.zeros(n, np.float32), np.arange(n + 3, dtype=np.float32)], device)[0]
    np.testing.assert_array_equal(got, [4, 5, 6, 7, 8, 9, 0])


# ---------------------------------------------------------------- what is refused, and where
def test_copy_to_its_own_device_is_its_value() -> None:
    x = leaf(np.arange(6, dtype=np.float32), "CPU")
    np.testing.assert_array_equal(run(x.copy_to("CPU") + 1.0), np.arange(6) + 1)


@pytest.mark.parametrize(("build", "message"), [
    (lambda x: x.reshape((1, 6)).replicated((0,)),
     "Replicated: cannot be lowered in a kernel: it marks a value held on several devices"),
    (lambda x: x.load(addrspace=AddrSpace.LOCAL),
     "Load: cannot be lowered in a kernel: it reads into another device or address space"),
    (lambda x: UOp(Ops.WMMA, (x, x, x), "tc"), "Wmma: cannot be lowered in a kernel: no rule of rangeify lowers it"),
], ids=["replicated", "load to local memory", "wmma"])
def test_refused_in_the_kernel_split(build: Any, message: str) -> None:
    u = build(leaf(np.arange(6, dtype=np.float32), "CPU"))
    with uopviz.trace() as tr, pytest.raises(SpecError, match=message) as e:
        schedule([u])
    assert e.value.rule == "lowerable"
    (ctx,) = tr.contexts  # no kernel was lowered
    assert [p.name for p in ctx.passes if p.error is not None] == ["kernel split"]
