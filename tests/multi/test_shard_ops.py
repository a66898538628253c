"""Ops along the shard axis (slicing, padding, flipping, cat, stack, indexing by tensors, reshapes that move the
shard boundary) against NumPy on CPU devices and a CPU+CL mix with uneven shards; the reducing collectives with
uneven splits; gradients, assign, @jit and @function over sharded tensors."""

from __future__ import annotations

import numpy as np
import pytest
from devices_here import needs_cl

import uopviz
from uopviz import Tensor
from uopviz.tensor.multi import bounds, shards_of
from uopviz.uop.ops import Ops

SETS = [pytest.param(("CPU:0", "CPU:1"), id="cpu2"), pytest.param(("CPU:0", "CPU:1", "CPU:2"), id="cpu3"),
        pytest.param(("CPU:0", "CL:0.1"), id="mixed2", marks=needs_cl),
        pytest.param(("CPU:1", "CL:0", "CPU:2"), id="mixed3", marks=needs_cl)]
RNG = np.random.default_rng(1818)
X = RNG.standard_normal((7, 5)).astype(np.float32)  # 7 rows and 5 columns: neither 2 nor 3 divides them
IDX = np.array([6, 0, 3, 3, -2], np.int32)


def _check(got: Tensor, want: np.ndarray, axis: int | None) -> None:
    """Values, the shard axis, and shards laid out as a Copy splits (each device its slice, in order)."""
    assert got.axis == axis
    np.testing.assert_array_equal(got.realize().numpy(), want)
    if axis is not None:
        n = len(got.device)
        assert [s.shape[axis] for s in shards_of(got.uop)] == [hi - lo for lo, hi in bounds(want.shape[axis], n)]


@pytest.mark.parametrize("D", SETS)
def test_ops_along_the_shard_axis(D: tuple[str, ...]) -> None:
    rows, cols = Tensor(X).shard(D, 0), Tensor(X).shard(D, 1)
    cases = [  # (result, NumPy's, shard axis)
        (rows[1:6], X[1:6], 0), (rows[::-3], X[::-3], 0), (rows.flip((0, 1)), X[::-1, ::-1], 0),
        (rows.pad(((2, 6), (1, 0))), np.pad(X, ((2, 6), (1, 0))), 0),
        (Tensor.cat(rows, rows[2:], dim=0), np.concatenate([X, X[2:]]), 0),
        (rows[Tensor(IDX).shard(D, 0)], X[IDX], 0),
        # picking rows by index is a one-hot sum over the shard axis: an allreduce, so replicated
        (cols[2:5, [4, 0]], X[2:5, [4, 0]], None),
    ]
    if len(D) == 3 and D[0] == "CPU:0":  # the rest once, on three CPU devices
        cases += [
            (rows[5:], X[5:], 0), (rows[::2], X[::2], 0),  # rows[5:]: the third device's shard is empty
            (rows.pad(((2, 2), None), mode="reflect"), np.pad(X, ((2, 2), (0, 0)), mode="reflect"), 0),
            (Tensor.stack(rows, rows * 2, dim=0), np.stack([X, X * 2]), 1),
            (rows[IDX.tolist()], X[IDX], None),  # the index list becomes a tensor replicated on D
            (cols[:, ::-1], X[:, ::-1], 1), (cols.reshape(35), X.reshape(35), 0),
            (rows + cols, X + X, 0),  # sources split on different axes: the second resharded to the first's
        ]
    Tensor.realize(*(t for t, _, _ in cases))  # one schedule for all
    for got, want, axis in cases:
        _check(got, want, axis)


def test_a_reshape_that_cannot_run_per_shard_gathers_in_the_trace() -> None:
    """14 elements in shards of 5, 5, 4 cannot be whole rows of 2: the shard pass gathers them onto the first
    device (Copies in its graph), reshapes there, and splits the rows again."""
    D = ("CPU:0", "CPU:1", "CPU:2")
    y = np.arange(14, dtype=np.float32)
    with uopviz.trace() as tr:
        t = Tensor(y).shard(D, 0).reshape(7, 2) + 1
        _check(t, y.reshape(7, 2) + 1, 0)
    shard = tr.contexts[0].passes[0]
    assert shard.name == "shard"
    out = tr.uop(shard.output)
    to_first = [u for u in out.toposort() if u.op is Ops.COPY and u.arg == "CPU:0"]
    assert {u.src[0].device for u in to_first} >= {"CPU:1", "CPU:2"}


@pytest.mark.parametrize("n", [2, 3, 4])
def test_reducing_collectives_with_uneven_splits(n: int) -> None:
    """Shards of any sizes sum as if zero-padded to c = ceil(size/n); reduce_scatter gives device i chunk i of
    ceil(c/n), the last ones shorter, as a Copy splits."""
    D = tuple(f"CPU:{i}" for i in range(n))
    outs, wants = [], []
    for size in (n * 5, n * 5 + 1):  # s = 5 (n never divides it), and shards of uneven sizes
        x = RNG.standard_normal(size).astype(np.float32)
        c = -(-size // n)
        want = np.pad(x, (0, n * c - size)).reshape(n, c).sum(0)
        T = Tensor(x).scatter_to(D)
        r, rs, ar = T.reduce_to(), T.reduce_scatter(), T.allreduce()
        assert (r.device, r.shape, rs.shape, rs.axis, ar.shape, ar.axis) == (D[0], (c,), (c,), 0, (c,), None)
        outs += [r, rs, ar]
        wants += [want] * 3
    Tensor.realize(*outs)
    for got, want in zip(outs, wants, strict=True):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    assert [s.shape[0] for s in shards_of(outs[-2].uop)] == [hi - lo for lo, hi in bounds(outs[-2].shape[0], n)]


def _mlp_step(shard: tuple[str, ...] | None) -> list[np.ndarray]:
    """One data-parallel step of a small MLP: the batch split over the devices, the weights replicated."""
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((10, 6)).astype(np.float32), rng.standard_normal((10, 3)).astype(np.float32)
    ws = [rng.standard_normal(s).astype(np.float32) for s in ((6, 8), (8,), (8, 3))]
    params = [Tensor(w) if shard is None else Tensor(w).shard(shard) for w in ws]
    for p in params:
        p.requires_grad = True
    xt, yt = (Tensor(x), Tensor(y)) if shard is None else (Tensor(x).shard(shard, 0), Tensor(y).shard(shard, 0))
    loss = ((xt @ params[0] + params[1]).relu().matmul(params[2]) - yt).square().mean()
    loss.backward()
    if shard is not None:
        assert all(p.grad.device == shard and p.grad.axis is None for p in params)
    return [loss.numpy(), *(p.grad.numpy() for p in params)]


def test_data_parallel_gradients_equal_one_device() -> None:
    for got, want in zip(_mlp_step(("CPU:0", "CPU:1")), _mlp_step(None), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_assign_jit_and_function_over_sharded_tensors() -> None:
    D = ("CPU:0", "CPU:1")
    a = np.arange(15, dtype=np.float32).reshape(5, 3)
    t = Tensor(np.zeros((5, 3), np.float32)).shard(D, 0).realize()
    buffers = [s.src[0] for s in shards_of(t.uop)]
    t.assign(t + Tensor(a).shard(D, 0))
    t.assign(t * 2 + Tensor(a).shard(D, 1))  # a value split along another axis is resharded as the target is
    t.assign(t - 1)
    np.testing.assert_array_equal(t.numpy(), a * 3 - 1)
    assert [s.src[0] for s in shards_of(t.uop)] == buffers  # in place: the same shard buffers
    t.assign(np.ones((5, 3), np.float32))
    np.testing.assert_array_equal(t.numpy(), np.ones((5, 3)))

    @uopviz.jit
    def step(x: Tensor, w: Tensor) -> Tensor:
        return (x @ w).relu().sum(0)  # over the shard axis: an allreduce, its copies replayed too

    w = RNG.standard_normal((3, 4)).astype(np.float32)
    outs = [step(Tensor(a + k).shard(D, 0), Tensor(w).shard(D)) for k in range(4)]
    for k, out in enumerate(outs):  # each result kept: a later replay writes shards of its own
        assert (out.device, out.axis) == (D, None)
        np.testing.assert_allclose(out.numpy(), np.maximum((a + k) @ w, 0).sum(0), rtol=1e-5)
    assert step.captures == 1

    scale = Tensor(np.float32([2.0])).shard(D)  # closed over, replicated

    @uopviz.function
    def layer(x: Tensor) -> Tensor:
        return (x * scale).softmax(-1)

    got = layer(Tensor(a).shard(D, 1))
    e = np.exp(a * 2 - (a * 2).max(-1, keepdims=True))
    assert got.axis == 1
    np.testing.assert_allclose(got.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
