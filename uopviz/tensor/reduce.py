"""Reductions over axes: sum, prod, max, min, mean, var, std, argmax, any/all, softmax family and cumsum.

Reduce keeps reduced axes as size 1 (SPEC); keepdim=False reshapes them away. Sums and products of ints and bools
give int64 (uint64 for unsigned ints), as NumPy's do; halves accumulate in float32 and are rounded back. Min is
built from Max: −max(−x) for floats and ~max(~x) for ints and bools, which cannot overflow.

Over an axis of size 0 a reduction is its identity, since the compiler never runs an empty range: sum 0,
prod 1, max the dtype's lowest value (-inf), min its highest, any False, all True, and mean 0/0 = nan. NumPy
raises for an empty max/min; argmax/argmin raise here too, as they have no index to give.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from uopviz.dtype import DType, dtypes, sum_acc_dtype
from uopviz.tensor.template import templated
from uopviz.tensor.util import normalize_axes, normalize_axis, numel, sym, to_dtype
from uopviz.uop.ops import Ops

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

Axis = int | tuple[int, ...] | None


@functools.cache  # a sum in every layer of a model asks it of the same few dtypes
def acc_dtypes(d: DType) -> tuple[DType, DType]:
    """(accumulator, result) dtypes of a sum or product of d with no dtype given."""
    if (d.is_int or d.is_bool) and d != dtypes.index:  # NumPy's widest int
        wide = dtypes.uint64 if d.is_unsigned else dtypes.int64
        return wide, wide
    acc = sum_acc_dtype(d)
    return acc, d if d in (dtypes.float16, dtypes.bfloat16) else acc


class ReduceMixin:
    """Reductions of Tensor."""

    __slots__ = ()

    def _reduce_op(self: Tensor, op: Ops, axes: tuple[int, ...], keepdim: bool) -> Tensor:
        """Reduce over normalized axes in self's dtype."""
        out = self._new(self._uop.reduce(op, axes=axes)) if axes else self
        return out if keepdim else out.reshape(tuple([d for k, d in enumerate(self.shape) if k not in axes]))

    def _reduce(self: Tensor, op: Ops, axis: Axis, keepdim: bool) -> Tensor:
        return self._reduce_op(op, normalize_axes(axis, self.ndim), keepdim)

    def _acc_dtype(self: Tensor, dtype: Any) -> tuple[DType, DType]:
        """(accumulator, result) dtypes of a sum or product."""
        if dtype is not None:
            dt = to_dtype(dtype)
            return dt, dt
        return acc_dtypes(self._uop.dtype)

    def sum(self: Tensor, axis: Axis = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        acc, out = self._acc_dtype(dtype)
        return self.cast(acc)._reduce(Ops.ADD, axis, keepdim).cast(out)

    def prod(self: Tensor, axis: Axis = None, keepdim: bool = False, dtype: Any = None) -> Tensor:
        acc, out = self._acc_dtype(dtype)
        return self.cast(acc)._reduce(Ops.MUL, axis, keepdim).cast(out)

    def max(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        return self._reduce(Ops.MAX, axis, keepdim)

    def min(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        if self.dtype.is_float:
            return -((-self)._reduce(Ops.MAX, axis, keepdim))
        return ~((~self)._reduce(Ops.MAX, axis, keepdim))

    def any(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        return self.ne(0)._reduce(Ops.MAX, axis, keepdim)

    def all(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        return self.eq(0)._reduce(Ops.MAX, axis, keepdim).logical_not()

    def mean(self: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
        """Sum / count; ints give the default float, halves accumulate in float32."""
        x = self._float()
        axes = normalize_axes(axis, self.ndim)
        n = numel(self.shape[k] for k in axes)
        s = x.cast(sum_acc_dtype(x.dtype))._reduce_op(Ops.ADD, axes, keepdim)
        return s.div(n).cast(x.dtype)

    def var(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """Σ(x − mean)² / (n − correction): the sample variance by default, like torch (NumPy's ddof=1)."""
        x = self._float()
        axes = normalize_axes(axis, self.ndim)
        n = numel(self.shape[k] for k in axes)
        dev = x.sub(x.mean(axes, keepdim=True))
        return dev.mul(dev).sum(axes, keepdim).div(max(n - correction, 0) if isinstance(n, int) else
                                                     sym((n - correction).maximum(0)))

    def std(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        return self.var(axis, keepdim, correction).sqrt()

    def argmax(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index (int32) of the first maximum; of the first NaN if there is one (as NumPy). ValueError over an
        axis of size 0, which has no first element."""
        return self._first_max(axis, keepdim, "argmax")

    def argmin(self: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index (int32) of the first minimum."""
        return (-self if self.dtype.is_float else ~self)._first_max(axis, keepdim, "argmin")

    def _first_max(self: Tensor, axis: int | None, keepdim: bool, name: str) -> Tensor:
        """argmax of self, for argmax and argmin (`name` is the one the error names)."""
        if axis is None or self.ndim == 0:
            if self.ndim == 0:
                normalize_axes(axis, 0)
            out = self.flatten()._first_max(0, False, name)
            return out.reshape((1,) * self.ndim) if keepdim else out
        ax = normalize_axis(axis, self.ndim)
        n = self.shape[ax]
        if n == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        hit = self.eq(self.max(ax, keepdim=True))
        if self.dtype.is_float:
            hit = hit.add(self.isnan())
        rev = type(self).arange(n, 0, -1, dtype=dtypes.int32, device=self.device)
        rev = rev.reshape((n,) + (1,) * (self.ndim - ax - 1))
        first = hit.where(rev, 0)._reduce_op(Ops.MAX, (ax,), keepdim)
        return first.sub(n, reverse=True)

    def logsumexp(self: Tensor, axis: Axis = -1, keepdim: bool = False) -> Tensor:
        """log Σ e^x, computed as m + log Σ e^(x−m) with m the max, so it cannot overflow."""
        x = self._float()
        m = x.max(axis, keepdim=True).detach()  # its gradient is 0: 1 − Σ softmax
        out = x.sub(m)._exp_of_shifted().sum(axis, keepdim=True).log().add(m)
        return out if keepdim else out.squeeze(normalize_axes(axis, self.ndim))

    @templated
    def softmax(self: Tensor, axis: int = -1) -> Tensor:
        x = self._float()
        e = x.sub(x.max(axis, keepdim=True).detach())._exp_of_shifted()  # the max shifts, and has no gradient to give
        return e.div(e.sum(axis, keepdim=True))

    @templated
    def log_softmax(self: Tensor, axis: int = -1) -> Tensor:
        """(x − m) − log Σ e^(x−m): subtracting m first keeps the digits of a row far from 0 (x − (m + log Σ) rounds
        log Σ to the ulp of m, 1e-3 at -10000 in float32)."""
        x = self._float()
        s = x.sub(x.max(axis, keepdim=True).detach())
        return s.sub(s._exp_of_shifted().sum(axis, keepdim=True).log())

    def _prefix_windows(self: Tensor, ax: int, fill: bool | int | float) -> Tensor:
        """SPEC's prefix_sum composition up to its reduce, for every row with axis ax moved last: (..., n, n) where
        window i holds x[0..i] and `fill` (the reduction's identity) in the other n − 1 − i places. Over a symbolic
        axis the windows are x masked by position j <= i, as padding by n − 1 and cutting windows of a count that
        varies would need sizes no interval can check."""
        n = self.shape[ax]
        x = self.transpose(ax, -1)
        if not isinstance(n, int):
            pos = type(self).arange(n, device=self.device)
            return pos.unsqueeze(0).le(pos.unsqueeze(1)).where(x.unsqueeze(-2), fill)
        lead = x.shape[:-1]
        x = x.pad([(0, 0)] * len(lead) + [(n - 1, 0)], value=fill)                # (..., 2n-1)
        x = x.unsqueeze(-2).expand(*lead, n + 1, 2 * n - 1)                       # tile
        x = x.reshape(*lead, (n + 1) * (2 * n - 1)).shrink([None] * len(lead) + [(0, 2 * n * n)])  # trim
        return x.reshape(*lead, n, 2 * n).shrink([None] * len(lead) + [None, (0, n)])            # windows

    def _cumulative(self: Tensor, axis: int | None, op: Ops, fill: bool | int | float) -> Tensor:
        """A running reduction along an axis (None: of the flattened tensor), self's dtype kept."""
        if axis is None:
            return self.flatten()._cumulative(0, op, fill)
        if self.ndim == 0:
            normalize_axis(axis, 1)
            return self
        ax = normalize_axis(axis, self.ndim)
        if self.shape[ax] == 0:
            return self
        return self._prefix_windows(ax, fill)._reduce_op(op, (self.ndim,), False).transpose(ax, -1)

    def cumsum(self: Tensor, axis: int | None = 0, dtype: Any = None) -> Tensor:
        """Running sum along an axis (None: of the flattened tensor), by SPEC's prefix_sum composition applied
        to every row with the axis moved last: pad, tile, reshape into sliding windows, sum. dtype: the result's
        and the accumulator's (torch's), else sum's rule."""
        acc, out = self._acc_dtype(dtype)
        return self.cast(acc)._cumulative(axis, Ops.ADD, 0).cast(out)

    def cumprod(self: Tensor, axis: int | None = 0) -> Tensor:
        """Running product (ones fill the windows)."""
        acc, out = self._acc_dtype(None)
        return self.cast(acc)._cumulative(axis, Ops.MUL, 1).cast(out)

    def _cum_extreme(self: Tensor, axis: int, largest: bool) -> tuple[Tensor, Tensor]:
        x = self if largest else (-self if self.dtype.is_float else ~self)
        lo = float("-inf") if x.dtype.is_float else x.dtype.min
        values = x._cumulative(axis, Ops.MAX, lo)
        values = values if largest else (-values if self.dtype.is_float else ~values)
        if self.ndim == 0:
            return values, type(self).zeros((), dtype=dtypes.int64, device=self.device)
        ax = normalize_axis(axis, self.ndim)
        n = self.shape[ax]
        pos = type(self).arange(n, dtype=dtypes.int64, device=self.device).reshape(n, *(1,) * (self.ndim - ax - 1))
        # the last position so far that holds the running extreme (PyTorch's choice on ties)
        at = self.eq(values).where(pos, -1)
        return values, at._cumulative(ax, Ops.MAX, -1)

    def cummax(self: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
        """(running max, index of where it was reached last) along axis, as torch.cummax."""
        return self._cum_extreme(axis, True)

    def cummin(self: Tensor, axis: int = 0) -> tuple[Tensor, Tensor]:
        """(running min, index of where it was reached last) along axis, as torch.cummin."""
        return self._cum_extreme(axis, False)

    def logcumsumexp(self: Tensor, axis: int = 0) -> Tensor:
        """log of the running sum of e^x: a logsumexp over each prefix window (−inf fill), so it neither overflows
        nor loses small terms to a larger later one."""
        x = self._float()
        if x.ndim == 0:
            normalize_axis(axis, 1)
            return x
        ax = normalize_axis(axis, x.ndim)
        return x._prefix_windows(ax, float("-inf")).logsumexp(-1).transpose(ax, -1)

    def softmin(self: Tensor, axis: int = -1) -> Tensor:
        return self._float().neg().softmax(axis)

    def std_mean(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        """(std, mean), as torch.std_mean."""
        return self.std(axis, keepdim, correction), self.mean(axis, keepdim)

    def var_mean(self: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> tuple[Tensor, Tensor]:
        return self.var(axis, keepdim, correction), self.mean(axis, keepdim)

    # ---------------------------------------------------------------- sorting
    def _ranks(self: Tensor, ax: int, descending: bool) -> Tensor:
        """Each element's place in the stable sorted order along ax (moved last): how many elements sort before it
        (smaller, or equal and earlier); NaN sorts after every number, as NumPy."""
        x = self.transpose(ax, -1)
        n = x.shape[-1]
        a, b = x.unsqueeze(-1), x.unsqueeze(-2)                     # a: element i, b: element j, (..., n, n)
        if self.dtype.is_float:
            before = (b.gt(a) if descending else b.lt(a)).bitwise_or(a.isnan().bitwise_and(b.isnan().logical_not()))
            ties = b.eq(a).bitwise_or(a.isnan().bitwise_and(b.isnan()))
        else:
            before, ties = (b.gt(a) if descending else b.lt(a)), b.eq(a)
        i = type(self).arange(n, dtype=dtypes.int32, device=self.device)
        earlier = i.reshape(1, n).lt(i.reshape(n, 1))              # j < i
        return before.bitwise_or(ties.bitwise_and(earlier)).cast(dtypes.int32).sum(-1)   # (..., n)

    def _sort(self: Tensor, axis: int, descending: bool) -> tuple[Tensor, Tensor]:
        if self.ndim == 0:
            normalize_axis(axis, 1)
            return self, type(self).zeros((), dtype=dtypes.int64, device=self.device)
        ax = normalize_axis(axis, self.ndim)
        n = self.shape[ax]
        rank = self._ranks(ax, descending)                          # (..., n): i -> its place
        slots = type(self).arange(n, dtype=dtypes.int32, device=self.device)
        at = rank.unsqueeze(-1).eq(slots)                           # (..., n_i, n_place)
        x = self.transpose(ax, -1).unsqueeze(-1)
        if self.dtype.is_bool:
            values = at.bitwise_and(x).any(-2)
        else:
            values = at.where(x, x.zeros_like()).sum(-2).cast(self.dtype)
        order = at.where(slots.cast(dtypes.int64).reshape(n, 1), 0).sum(-2)
        return values.transpose(ax, -1), order.transpose(ax, -1)

    def sort(self: Tensor, axis: int = -1, descending: bool = False) -> tuple[Tensor, Tensor]:
        """(sorted values, their int64 indices) along axis, stable (equal values keep their order), NaN last."""
        return self._sort(axis, descending)

    def argsort(self: Tensor, axis: int = -1, descending: bool = False) -> Tensor:
        return self._sort(axis, descending)[1]

    def topk(self: Tensor, k: int, axis: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:
        """(the k largest (or smallest) values along axis, their indices), in sorted order."""
        ax = normalize_axis(axis, max(self.ndim, 1))
        n = self.shape[ax] if self.ndim else 1
        if not isinstance(k, int) or not 0 <= k <= n:
            raise IndexError(f"topk: k={k!r} is out of range for an axis of size {n}")
        values, order = self._sort(ax, largest)
        if self.ndim == 0:
            return values, order
        keep = [None] * ax + [(0, k)] + [None] * (self.ndim - ax - 1)
        return values.shrink(keep), order.shrink(keep)
