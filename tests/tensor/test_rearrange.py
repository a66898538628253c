"""Splitting, windows, triangles, diagonals, sorting, running reductions, scatters and selections against NumPy
(torch semantics written out in NumPy where NumPy has no such op), on every device."""

from __future__ import annotations

import numpy as np
import pytest
from tensor_testing import check

from uopviz import Tensor
from uopviz.tensor.util import AxisError, ShapeError

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 5)).astype(np.float32)


def test_split_chunk_unflatten(device: str) -> None:
    t = Tensor(X, device=device)
    for got, want in zip(t.chunk(2, 1), np.array_split(X, [3], 1)):
        check(got, want)
    for got, want in zip(t.split([1, 4], 1), np.split(X, [1], 1)):
        check(got, want)
    assert [p.shape for p in t.split(2, 1)] == [(3, 2), (3, 2), (3, 1)]
    check(t.unflatten(1, (5, 1)), X.reshape(3, 5, 1))
    with pytest.raises(ShapeError, match="add up"):
        t.split([2, 2], 1)


def test_unfold_roll_repeat_interleave(device: str) -> None:
    t = Tensor(X, device=device)
    win = np.lib.stride_tricks.sliding_window_view(X, 2, axis=1)[:, ::2]
    check(t.unfold(1, 2, 2), win)
    check(t.unfold(0, 2, 1), np.lib.stride_tricks.sliding_window_view(X, 2, axis=0))
    check(t.roll(2, 1), np.roll(X, 2, 1))
    check(t.roll((1, -3), (0, 1)), np.roll(X, (1, -3), (0, 1)))
    check(t.roll(-4), np.roll(X, -4))
    check(t.repeat_interleave(3, 0), np.repeat(X, 3, 0))
    check(t.repeat_interleave(2), np.repeat(X, 2))


def test_triangles_and_diagonals(device: str) -> None:
    t = Tensor(X, device=device)
    for k in (-1, 0, 2):
        check(t.tril(k), np.tril(X, k))
        check(t.triu(k), np.triu(X, k))
        check(t.diagonal(k), np.diagonal(X, k))
        check(Tensor(X[0], device=device).diag(k), np.diag(X[0], k))
    x3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    check(Tensor(x3, device=device).diagonal(0, 1, 2), np.diagonal(x3, 0, 1, 2))
    check(Tensor(X[:, :3], device=device).diag(), np.diag(X[:, :3]))
    with pytest.raises(AxisError):
        t.diagonal(0, 1, 1)


def test_meshgrid_one_hot_clone(device: str) -> None:
    a, b = np.arange(3), np.arange(4) * 2
    for indexing in ("ij", "xy"):
        for got, want in zip(Tensor.meshgrid(Tensor(a, device=device), Tensor(b, device=device), indexing=indexing),
                             np.meshgrid(a, b, indexing=indexing)):
            check(got, want)
    check(Tensor(np.array([1, 0, 3], np.int32), device=device).one_hot(4), np.eye(4, dtype=np.int64)[[1, 0, 3]])
    check(Tensor(np.array([2, 0], np.int32), device=device).one_hot(), np.eye(3, dtype=np.int64)[[2, 0]])
    c = Tensor(X, device=device).clone().realize()
    check(c, X)


def test_sort_argsort_topk(device: str) -> None:
    xs = X.copy()
    xs[0, 1] = xs[0, 3]
    xs[1, 2] = np.nan
    v, i = Tensor(xs, device=device).sort(1)
    check(v, np.sort(xs, 1, kind="stable"))
    check(i, np.argsort(xs, 1, kind="stable"))
    check(Tensor(xs, device=device).argsort(0), np.argsort(xs, 0, kind="stable"))
    v, i = Tensor(X, device=device).sort(0, descending=True)
    check(v, -np.sort(-X, 0))
    ints = RNG.integers(-5, 5, (4, 6)).astype(np.int32)
    check(Tensor(ints, device=device).sort(1)[0], np.sort(ints, 1))
    v, i = Tensor(X, device=device).topk(2)
    check(i, np.argsort(-X, 1, kind="stable")[:, :2])
    check(v, -np.sort(-X, 1)[:, :2])
    v, _ = Tensor(X, device=device).topk(2, 0, largest=False)
    check(v, np.sort(X, 0)[:2])
    with pytest.raises(IndexError):
        Tensor(X).topk(6)


def test_running_reductions(device: str) -> None:
    t = Tensor(X, device=device)
    check(t.cumprod(1), np.cumprod(X, 1), rtol=1e-5)
    v, i = t.cummax(1)
    check(v, np.maximum.accumulate(X, 1))
    want = np.array([[max(j for j in range(k + 1) if X[r, j] == np.maximum.accumulate(X[r])[k]) for k in range(5)]
                     for r in range(3)])
    check(i, want)
    v, _ = t.cummin(0)
    check(v, np.minimum.accumulate(X, 0))
    big = X * 60
    check(Tensor(big, device=device).logcumsumexp(1), np.logaddexp.accumulate(big.astype(np.float64), 1), rtol=1e-5)
    check(t.softmin(1), np.exp(-X) / np.exp(-X).sum(1, keepdims=True), rtol=1e-5)
    s, m = t.std_mean(1)
    check(s, X.std(1, ddof=1), rtol=1e-5)
    check(m, X.mean(1), rtol=1e-6)


def test_zero_d_axes(device: str) -> None:
    """PyTorch takes axis 0 or -1 on a 0-d tensor."""
    t = Tensor(2.5, device=device)
    for got in (t.sum(0), t.max(-1), t.mean(0), t.cumsum(0), t.softmax(0) * 2.5, t.sort()[0]):
        check(got, np.float32(2.5))
    check(t.argmax(0), np.int32(0))
    with pytest.raises(AxisError):
        t.sum(1)


def test_masked_select_nonzero(device: str) -> None:
    t = Tensor(X, device=device)
    check(t.masked_select(Tensor(X > 0, device=device)), X[X > 0])
    n = int((X > 0).sum())
    check(t.masked_select(Tensor(X > 0, device=device), size=n + 2), np.concatenate([X[X > 0], [0, 0]]))
    check((t > 0.5).nonzero(), np.argwhere(X > 0.5))
    k = len(np.argwhere(X > 0.5))
    check((t > 0.5).nonzero(size=k + 1), np.concatenate([np.argwhere(X > 0.5), [[-1, -1]]]))


def _scatter_reduce_ref(base: np.ndarray, idx: np.ndarray, src: np.ndarray, reduce: str, include: bool) -> np.ndarray:
    """torch.scatter_reduce along dim 0, written out."""
    out = base.astype(np.float64).copy()
    groups: dict[tuple[int, int], list[float]] = {}
    for i in range(idx.shape[0]):
        for j in range(idx.shape[1]):
            groups.setdefault((idx[i, j], j), []).append(src[i, j])
    fns = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}
    for (r, j), vals in groups.items():
        out[r, j] = fns[reduce](([base[r, j]] if include else []) + vals)
    return out


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_reduce(reduce: str, device: str) -> None:
    idx = RNG.integers(0, 3, (2, 5))
    src = RNG.standard_normal((2, 5)).astype(np.float32)
    for include in (True, False):
        got = Tensor(X, device=device).scatter_reduce(0, Tensor(idx.astype(np.int32), device=device),
                                                       Tensor(src, device=device), reduce, include_self=include)
        check(got, _scatter_reduce_ref(X, idx, src, reduce, include), rtol=1e-5, atol=1e-6)


def test_scatter(device: str) -> None:
    idx = np.array([[0, 1, 2, 0, 1], [2, 0, 1, 2, 0]])
    src = RNG.standard_normal((2, 5)).astype(np.float32)
    want = X.copy()
    for i in range(2):
        for j in range(5):
            want[idx[i, j], j] = src[i, j]
    check(Tensor(X, device=device).scatter(0, Tensor(idx.astype(np.int32), device=device), Tensor(src, device=device)),
          want)
    check(Tensor(X, device=device).scatter(1, Tensor(np.array([[4], [0], [2]], np.int32), device=device), 9.0),
          np.where(np.eye(5)[[4, 0, 2]] > 0, 9.0, X))


@pytest.mark.parametrize("mode,np_mode", [("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap"),
                                          ("edge", "edge"), ("wrap", "wrap")])
def test_pad_modes(mode: str, np_mode: str, device: str) -> None:
    check(Tensor(X, device=device).pad(((1, 2), (3, 0)), mode=mode), np.pad(X, ((1, 2), (3, 0)), mode=np_mode))
    with pytest.raises((ShapeError, ValueError)):
        Tensor(X).pad(((4, 4), (0, 0)), mode="reflect")


def test_cat_and_stack_take_sequences(device: str) -> None:
    """`Tensor.stack((x, y, z))` was an AttributeError."""
    ts = tuple(Tensor(X[k], device=device) for k in range(3))
    check(Tensor.stack(ts), X)
    check(Tensor.stack(list(ts), dim=1), X.T)
    check(Tensor.cat(ts), X.reshape(-1))
