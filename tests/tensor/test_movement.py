"""Movement ops, concatenation and NumPy indexing of Tensor, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from tensor_testing import check, skip_big

from uopviz import Tensor, dtypes
from uopviz.dtype import DTypeError
from uopviz.pipeline import kernels_of, lower, schedule
from uopviz.runtime import device as devices
from uopviz.tensor import AxisError, DeviceMismatchError, ShapeError
from uopviz.uop.ops import AxisType, Ops
from uopviz.uop.symbolic import step

A = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 7.5


@pytest.fixture
def t(device: str) -> Tensor:
    return Tensor(A, device=device)


def test_reshape(t: Tensor) -> None:
    check(t.reshape(6, 4), A.reshape(6, 4))
    check(t.reshape((4, -1)), A.reshape(4, -1))
    check(t.reshape(-1), A.reshape(-1))
    check(t.reshape(24, 1, 1), A.reshape(24, 1, 1))
    check(Tensor(3.0, device=t.device).reshape(1, 1), np.full((1, 1), 3.0))
    assert t.reshape(2, 3, 4) is t
    with pytest.raises(ShapeError, match=r"\(2, 3, 4\) \(24 elements\) into \(5, 5\)"):
        t.reshape(5, 5)
    with pytest.raises(ShapeError, match="multiple"):
        t.reshape(5, -1)
    with pytest.raises(ShapeError, match="-1"):
        t.reshape(-1, -1)


def test_permute_transpose(t: Tensor) -> None:
    check(t.permute(2, 0, 1), A.transpose(2, 0, 1))
    check(t.permute((-1, 1, 0)), A.transpose(2, 1, 0))
    check(t.transpose(), A.swapaxes(-2, -1))
    check(t.transpose(0, 2), A.swapaxes(0, 2))
    check(t.T, A.T)
    with pytest.raises(AxisError, match="permutation"):
        t.permute(0, 0, 1)
    with pytest.raises(AxisError, match="needs 3 axes"):
        t.permute(1, 0)
    with pytest.raises(IndexError):
        t.transpose(0, 3)


def test_expand(device: str) -> None:
    a = np.arange(3, dtype=np.int32).reshape(3, 1)
    x = Tensor(a, device=device)
    check(x.expand(3, 5), np.broadcast_to(a, (3, 5)))
    check(x.expand(2, -1, 4), np.broadcast_to(a, (2, 3, 4)))
    check(x.broadcast_to((1, 3, 2)), np.broadcast_to(a, (1, 3, 2)))
    with pytest.raises(ShapeError, match="only size-1"):
        x.expand(4, 4)
    with pytest.raises(ShapeError, match="at least 2 axes"):
        x.expand(3)


@pytest.mark.parametrize("value", [0, 1.5, -np.inf])
def test_pad(t: Tensor, value: float) -> None:
    check(t.pad(((0, 1), (2, 0), (1, 3)), value=value), np.pad(A, ((0, 1), (2, 0), (1, 3)), constant_values=value))
    check(t.pad(1, value=value), np.pad(A, 1, constant_values=value))
    check(t.pad(((1, 2),), value=value), np.pad(A, (1, 2), constant_values=value))
    check(t.pad((1, 2), value=value), np.pad(A, ((0, 0), (0, 0), (1, 2)), constant_values=value))  # torch's flat form
    check(t.pad([None, (1, 1), None], value=value), np.pad(A, ((0, 0), (1, 1), (0, 0)), constant_values=value))


def test_pad_ints_and_bools_and_errors(device: str) -> None:
    check(Tensor([1, 2], device=device).pad(((2, 1),), value=9), np.pad([1, 2], (2, 1), constant_values=9))
    check(Tensor([True], device=device).pad(((1, 1),)), np.array([False, True, False]))
    check(Tensor([True], device=device).pad(((1, 0),), value=True), np.array([True, True]))
    check(Tensor([1, 2], dtype=dtypes.int8, device=device).pad(((1, 2),), value=-128),
          np.pad(np.array([1, 2], np.int8), (1, 2), constant_values=-128))
    with pytest.raises(OverflowError, match="300 does not fit in int8"):  # not a wrapped 44
        Tensor([1, 2], dtype=dtypes.int8).pad(((1, 1),), value=300)
    with pytest.raises(OverflowError, match="float16"):
        Tensor([1.0], dtype=dtypes.float16).pad(((1, 1),), value=1e6)
    check(Tensor([1.0, 2.0], device=device).pad(((-1, 1),)), np.array([2.0, 0.0]))  # a negative width cuts (torch)
    with pytest.raises(ShapeError, match="non-negative"):
        Tensor([1.0]).pad(((-1, 0),), mode="reflect")
    with pytest.raises(ShapeError, match="pairs"):
        Tensor.ones(2, 2).pad(((1, 1), (1, 1), (1, 1)))


def test_shrink_flip(t: Tensor) -> None:
    check(t.shrink(((1, 2), None, (1, 3))), A[1:2, :, 1:3])
    check(t.flip(1), A[:, ::-1])
    check(t.flip((0, -1)), A[::-1, :, ::-1])
    check(t.flip(), A[::-1, ::-1, ::-1])
    with pytest.raises(ShapeError, match="start"):
        t.shrink(((0, 3), None, None))
    with pytest.raises(AxisError):
        t.flip(3)


def test_squeeze_unsqueeze_flatten(device: str) -> None:
    a = np.arange(6.0).reshape(1, 2, 1, 3)
    x = Tensor(a, device=device)
    check(x.squeeze(), a.squeeze())
    check(x.squeeze(2), a.squeeze(2))
    check(x.squeeze((0, -2)), a.squeeze((0, 2)))
    check(x.unsqueeze(0), a[None])
    check(x.unsqueeze(-1), a[..., None])
    check(x.flatten(), a.reshape(-1))
    check(x.flatten(1, 2), a.reshape(1, 2, 3))
    check(Tensor(2.0, device=device).flatten(), np.array([2.0]))
    check(x.squeeze(1), a)  # an axis of another size stays (torch's squeeze; NumPy's raises)
    with pytest.raises(AxisError):
        x.unsqueeze(5)


def test_repeat(device: str) -> None:
    a = np.arange(6).reshape(2, 3).astype(np.int32)
    x = Tensor(a, device=device)
    check(x.repeat(2, 1), np.tile(a, (2, 1)))
    check(x.repeat(1, 3), np.tile(a, (1, 3)))
    check(x.repeat(2, 2, 2), np.tile(a, (2, 2, 2)))
    check(x.repeat(0, 1), np.tile(a, (0, 1)))


@pytest.mark.parametrize("n", [1, 7, 33, 1000])
def test_cat_and_stack(n: int, device: str) -> None:
    skip_big(device, n)
    a, b, c = np.arange(n, dtype=np.float32), -np.arange(n, dtype=np.float32), np.ones(n, np.int32)
    ta, tb, tc = (Tensor(x, device=device) for x in (a, b, c))
    check(ta.cat(tb, tc), np.concatenate([a, b, c]))
    assert ta.cat(tc).dtype == dtypes.float32
    check(Tensor.stack(ta, tb, dim=1), np.stack([a, b], 1))
    check(Tensor.stack(ta, tb, tb, dim=-2), np.stack([a, b, b], -2))


def test_cat_multi_dim(device: str) -> None:
    a, b = np.arange(6).reshape(2, 3), np.arange(8).reshape(2, 4)
    check(Tensor(a, device=device).cat(Tensor(b, device=device), dim=-1), np.concatenate([a, b], -1))
    check(Tensor.cat(Tensor([True], device=device), Tensor([False, True], device=device)), [True, False, True])
    with pytest.raises(ShapeError, match="does not match"):
        Tensor.ones(2, 3).cat(Tensor.ones(3, 3), dim=1)
    with pytest.raises(ShapeError, match="0-d"):
        Tensor(1.0).cat(Tensor(2.0))
    with pytest.raises(ShapeError, match="one shape"):
        Tensor.stack(Tensor.ones(2), Tensor.ones(3))
    with pytest.raises(DeviceMismatchError):
        Tensor.ones(2).cat(Tensor.ones(2, device="PYTHON"))


BASIC_INDICES = [
    1, -1, (0, 2), (-2, -3, -4), slice(None), slice(1, None), (slice(None), slice(None, None, 2)),
    (slice(None), slice(None, None, -1)), (Ellipsis, slice(3, 0, -2)), (Ellipsis, 1), (None, 1, None),
    (slice(None), None, slice(1, 2), Ellipsis), (1, slice(-2, None), slice(None, None, 3)),
    (slice(5, 10),), (slice(None, None, -3), 0), (Ellipsis,), (0, 0, 0), (slice(2, 1),),
]


@pytest.mark.parametrize("index", BASIC_INDICES, ids=str)
def test_basic_indexing(index: object, t: Tensor) -> None:
    check(t[index], A[index])


@pytest.mark.parametrize("n", [1, 7, 33])
@pytest.mark.parametrize("step", [1, 2, 3, -1, -2, -5])
def test_slices_with_steps(n: int, step: int, device: str) -> None:
    a = np.arange(n, dtype=np.int32)
    x = Tensor(a, device=device)
    for start, stop in [(None, None), (1, None), (None, -1), (n // 2, n // 3)]:
        check(x[start:stop:step], a[start:stop:step])


ADVANCED_INDICES = [
    [1, 0, 1], [[0, 1], [1, 0]], (slice(None), [0, 2, 2]), (Ellipsis, [3, -1]), ([1, 0], [2, 1]),
    ([[1], [0]], [0, 2]), ([0, 1], slice(None), [1, 3]), (slice(None), [1, 0], 2), ([1, 0], 1, slice(None)),
    (slice(None), [0, -1], [0, 3]), (None, [1], slice(None), 0), (-1, [2, 0]),
]


@pytest.mark.parametrize("index", ADVANCED_INDICES, ids=str)
def test_advanced_indexing(index: object, t: Tensor) -> None:
    tindex = tuple(Tensor(np.array(i), device=t.device) if isinstance(i, list) else i for i in
                   (index if isinstance(index, tuple) else (index,)))
    want = A[tuple(np.array(i) if isinstance(i, list) else i for i in (index if isinstance(index, tuple) else
                                                                            (index,)))]
    check(t[tindex], want)
    check(t[index], want)


@pytest.mark.parametrize("index", [(slice(None), [[1, 0], [2, 2]]), ([1, 0, 1], slice(None), [0, 2, 1]),
                                   ([[0], [1]], [2, 0])], ids=str)
def test_advanced_indexing_is_stored_as_read(index: tuple[object, ...]) -> None:
    """A sum over the last axis of a gathered tensor (a layernorm's over an embedding) reads it one element after
    another: the gather's kernel stores the result's layout, not a transpose of it to be read across memory."""
    x = Tensor(np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5))
    got = x[tuple(Tensor(np.array(i)) if isinstance(i, list) else i for i in index)]
    last = got.shape[-1]
    target = devices.get("CPU").target
    steps = []
    for ast, _ in kernels_of(schedule([got.sum(-1).uop])):
        nodes = lower(ast, target).linear.toposort()
        red = [u for u in nodes if u.op is Ops.RANGE and u.arg.type is AxisType.REDUCE and u.src[0].arg.value == last]
        steps += [step(u.src[0].src[1], r) for r in red for u in nodes if u.op is Ops.LOAD]
    assert steps and max(steps) == 1, steps


def test_indexing_keeps_nan_and_inf_out_of_other_rows(device: str) -> None:
    a = np.array([np.nan, 1.0, np.inf, -2.0], np.float32)
    check(Tensor(a, device=device)[Tensor([1, 3, 0], device=device)], a[[1, 3, 0]])
    b = np.array([True, False, True])
    check(Tensor(b, device=device)[Tensor([1, 2, 1], device=device)], b[[1, 2, 1]])


def test_indexing_errors(t: Tensor) -> None:
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 3"):
        t[0, 3]
    with pytest.raises(IndexError, match="out of bounds"):
        t[-3]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., 0, ...]
    with pytest.raises(IndexError, match="integer dtype"):
        t[Tensor([0.0])]
    with pytest.raises(IndexError, match="integer dtype"):
        t[[0.5, 1.0]]
    with pytest.raises(IndexError, match="boolean masks"):
        t[np.array([True, False])]
    with pytest.raises(IndexError, match="rectangular"):
        t[[[0], [0, 1]]]
    with pytest.raises(IndexError, match="valid indices"):
        t["a"]


B = np.arange(3 * 5, dtype=np.float32).reshape(3, 5) + 1  # no zeros: a masked read shows
KNOWN_OUT_OF_RANGE = [  # (index, np.take's axis or None for a[index])
    (3, None), (-4, None), ([0, 3], None), ((slice(None), [1, -6]), None), (np.array([[0], [7]]), None),
    ((Ellipsis, 5), None), ((1, [0, 5]), None), ((np.int64(-4),), None), (([2, 0], [4, 5]), None),
    ([0, 9], 1), (np.array([-6, 1]), 1), ([-4], 0), (np.array([3], np.uint8), 0),
]


@pytest.mark.parametrize(("index", "axis"), KNOWN_OUT_OF_RANGE, ids=str)
def test_known_indices_out_of_range_raise_as_numpy(index: object, axis: int | None) -> None:
    x = Tensor(B)
    with pytest.raises(IndexError) as theirs:
        B[index] if axis is None else np.take(B, index, axis)  # type: ignore[index]
    with pytest.raises(IndexError) as ours:
        x[index] if axis is None else x.gather(index, axis)
    assert str(ours.value) == str(theirs.value)


KNOWN_IN_RANGE = [([-1, 0, -3, 2], None), ((slice(None), np.array([-5, 4, -1])), None), ((-1, [-2, 1]), None),
                  (([[-3], [2]], [-1, 0, 4]), None), ((np.int64(-2), slice(1, 4)), None), ([], None),
                  ([-5, 3, -1], 1), (np.array([[-3, 2]]), 0), (np.array([2, 0], np.uint16), 1)]


@pytest.mark.parametrize(("index", "axis"), KNOWN_IN_RANGE, ids=str)
def test_known_negative_indices_wrap_as_numpy(index: object, axis: int | None, device: str) -> None:
    x = Tensor(B, device=device)
    if axis is None:
        check(x[index], B[index])  # type: ignore[index]
    else:
        check(x.gather(index, axis), np.take(B, index, axis))


def test_lazy_tensor_indices_wrap_negatives_and_read_0_out_of_range(device: str) -> None:
    # a Tensor index is not known until it runs: -3..-1 wrap as NumPy's, beyond [-3, 3) the element reads 0
    idx = np.array([0, 3, -1, -4, 7, -3, 2])
    x, i = Tensor(B, device=device), Tensor(idx, device=device)
    inside = (idx >= -3) & (idx < 3)
    want = np.where(inside[:, None], B[np.where(inside, idx, 0)], 0)
    check(x[i], want)
    check(x.gather(i, 0), want)
    check(x[:, i.sub(2)], np.where((idx - 2 >= -5) & (idx - 2 < 5), B[:, np.clip(idx - 2, -5, 4)], 0))
    flags = Tensor(B > 7, device=device)
    check(flags[i], np.where(inside[:, None], (B > 7)[np.where(inside, idx, 0)], False))
    # scatter_add: an index beyond adds nothing anywhere, a negative one adds at its wrapped place
    val = np.arange(7 * 5, dtype=np.float32).reshape(7, 5) * 10
    want_add = B.copy()
    np.add.at(want_add, idx[inside], val[inside])
    check(x.scatter_add(i, Tensor(val, device=device), 0), want_add)


def test_narrow_index_dtypes_into_long_axes(device: str) -> None:
    # a uint8 index into 300 rows once matched the wrapped arange too (index 3 read rows 3 and 259, summed)
    a = np.arange(300, dtype=np.float32)
    x = Tensor(a, device=device)
    u8, i8 = np.array([44, 255, 3], np.uint8), np.array([-100, 5, 127, -128], np.int8)
    check(x[Tensor(u8, device=device)], a[u8])
    check(x[:200][Tensor(i8, device=device)], a[:200][i8])
    i16 = np.array([149, -150, 3], np.int16)
    want = a.reshape(2, 150).copy()
    np.add.at(want, (slice(None), i16), 1)
    check(x.reshape(2, 150).scatter_add(Tensor(i16, device=device), Tensor.ones(2, 3, device=device), 1), want)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("idx_shape", [(5,), (2, 3), ()])
def test_gather(axis: int, idx_shape: tuple, t: Tensor) -> None:
    idx = np.random.default_rng(1).integers(0, A.shape[axis], idx_shape)
    check(t.gather(Tensor(idx, device=t.device), axis), np.take(A, idx, axis))


def test_gather_ints_and_negative_index(device: str) -> None:
    a = np.arange(10, dtype=np.int64) * 3
    check(Tensor(a, device=device).gather([-1, 0, 4]), np.take(a, [-1, 0, 4]))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_add(axis: int, device: str) -> None:
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([0, 2, 0, 1, 2]) % base.shape[axis]
    shape = list(base.shape)
    shape[axis] = len(idx)
    val = np.random.default_rng(2).random(shape).astype(np.float32)
    want = base.copy()
    np.add.at(want, (slice(None),) * (axis % 2) + (idx,), val)
    check(Tensor(base, device=device).scatter_add(Tensor(idx, device=device), Tensor(val, device=device), axis),
          want, rtol=1e-6)


def test_scatter_add_errors() -> None:
    with pytest.raises(ShapeError, match="1-D index"):
        Tensor.zeros(3).scatter_add(Tensor([[0]]), Tensor.ones(1, 1))
    with pytest.raises(ShapeError, match="expected"):
        Tensor.zeros(3).scatter_add(Tensor([0, 1]), Tensor.ones(3))
    with pytest.raises(DTypeError, match="cast the values"):
        Tensor.zeros(3, dtype=dtypes.int32).scatter_add(Tensor([0]), Tensor.ones(1))
