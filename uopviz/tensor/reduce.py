"""Reductions over axes: sum, prod, max, min, mean, var, std, argmax, any/all, softmax family and cumsum.

Reduce keeps reduced axes as size 1 (SPEC); keepdim=False reshapes them away. Sums of small ints and halves
accumulate in `sum_acc_dtype` (ints keep the wider dtype, halves are rounded back, as tinygrad does). Min is
built from Max: −max(−x) for floats and ~max(~x) for ints and bools, which cannot overflow.

Over an axis of size 0 a reduction is its identity, since the compiler never runs an empty range: sum 0,
prod 1, max the dtype's lowest value (-inf), min its highest, any False, all True, and mean 0/0 = nan. NumPy
raises for an empty max/min; argmax/argmin raise here too, as they have no index to give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uopviz.dtype import DType, dtypes, sum_acc_dtype
from uopviz.tensor.util import normalize_axes, normalize_axis, numel, to_dtype
from uopviz.uop.ops import Ops

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

Axis = int | tuple[int, ...] | None


class ReduceMixin:
    """Reductions of Tensor."""

    __slots__ = ()

    def _reduce_op(self: Tensor, op: Ops, axes: tuple[int, ...], keepdim: bool) -> Tensor:
        """Reduce over normalized axes in self's dtype."""
        out = self._new(self.uop.reduce(op, axes=axes)) if axes else self
        return out if keepdim else out.reshape(tuple(d for k, d in enumerate(self.shape) if k not in axes))

    def _reduce(self: Tensor, op: Ops, axis: Axis, keepdim: bool) -> Tensor:
        return self._reduce_op(op, normalize_axes(axis, self.ndim), keepdim)

    def _acc_dtype(self: Tensor, dtype: Any) -> tuple[DType, DType]:
        """(accumulator, result) dtypes of a sum or product."""
        if dtype is not None:
            dt = to_dtype(dtype)
            return dt, dt
        acc = sum_acc_dtype(self.dtype)
        return acc, self.dtype if self.dtype in (dtypes.float16, dtypes.bfloat16) else acc

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
        return dev.mul(dev).sum(axes, keepdim).div(max(n - correction, 0))

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
        if axis is None:
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
        m = x.max(axis, keepdim=True)
        out = x.sub(m).exp().sum(axis, keepdim=True).log().add(m)
        return out if keepdim else out.squeeze(normalize_axes(axis, self.ndim))

    def softmax(self: Tensor, axis: int = -1) -> Tensor:
        x = self._float()
        e = x.sub(x.max(axis, keepdim=True)).exp()
        return e.div(e.sum(axis, keepdim=True))

    def log_softmax(self: Tensor, axis: int = -1) -> Tensor:
        x = self._float()
        return x.sub(x.logsumexp(axis, keepdim=True))

    def cumsum(self: Tensor, axis: int | None = 0) -> Tensor:
        """Running sum along an axis (None: of the flattened tensor), by SPEC's prefix_sum composition applied
        to every row with the axis moved last: pad, tile, reshape into sliding windows, sum."""
        if axis is None:
            return self.flatten().cumsum(0)
        ax = normalize_axis(axis, self.ndim)
        acc, out = self._acc_dtype(None)
        n = self.shape[ax]
        if n == 0:
            return self.cast(out)
        x = self.cast(acc).transpose(ax, -1)
        lead = x.shape[:-1]
        x = x.pad([(0, 0)] * len(lead) + [(n - 1, 0)])                         # (..., 2n-1)
        x = x.unsqueeze(-2).expand(*lead, n + 1, 2 * n - 1)                     # tile
        x = x.reshape(*lead, (n + 1) * (2 * n - 1)).shrink([None] * len(lead) + [(0, 2 * n * n)])  # trim
        x = x.reshape(*lead, n, 2 * n).shrink([None] * len(lead) + [None, (0, n)])              # windows
        return x._reduce_op(Ops.ADD, (len(lead) + 1,), False).transpose(ax, -1).cast(out)
