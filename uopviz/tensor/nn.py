"""Contractions and windows: matmul (SPEC's gemm composition, batched with broadcasting), conv2d and pooling.

Windows are built without any Python loop over output pixels: the input is tiled, cut and reshaped so that
every (output position, kernel offset) pair becomes an axis (`_pool`), and the kernel is then one broadcast
multiply and one sum over the window axes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from uopviz.dtype import least_upper_dtype
from uopviz.tensor.util import ShapeError, broadcast_shapes, fmt

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor


def _two(v: int | tuple[int, int], what: str) -> tuple[int, int]:
    out = (v, v) if isinstance(v, int) else tuple(v)
    if len(out) != 2 or not all(isinstance(x, int) and x >= 1 for x in out):
        raise ShapeError(f"{what} must be a positive int or a pair of them, got {v!r}")
    return out  # type: ignore[return-value]


def _padding(p: Any) -> list[tuple[int, int]]:
    """conv padding: an int, (ph, pw), or ((top, bottom), (left, right))."""
    if isinstance(p, int):
        p = (p, p)
    pairs = [(q, q) if isinstance(q, int) else tuple(q) for q in p]
    if len(pairs) != 2 or not all(len(q) == 2 and all(isinstance(x, int) and x >= 0 for x in q) for q in pairs):
        raise ShapeError(f"padding must be an int, (ph, pw) or ((top, bottom), (left, right)), got {p!r}")
    return pairs  # type: ignore[return-value]


class NNMixin:
    """matmul, conv2d and pooling of Tensor."""

    __slots__ = ()

    def matmul(self: Tensor, w: Any, reverse: bool = False) -> Tensor:
        """NumPy's matmul: 1-D operands get a unit axis added and removed; batch axes broadcast.
        Each product is SPEC's gemm: (A[..., M, K, 1] · B[..., 1, K, N]).sum(K)."""
        a, b = (self, self._coerce(w)) if not reverse else (self._coerce(w), self)
        a._same_device(b)
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul needs operands of at least 1 dim, got {fmt(a.shape)} and {fmt(b.shape)}; "
                             "use * to scale by a scalar")
        dt = least_upper_dtype(a.dtype, b.dtype)
        a2 = a.cast(dt).unsqueeze(0) if a.ndim == 1 else a.cast(dt)
        b2 = b.cast(dt).unsqueeze(-1) if b.ndim == 1 else b.cast(dt)
        (_m, k), (k2, n) = a2.shape[-2:], b2.shape[-2:]
        if k != k2:
            raise ShapeError(f"matmul {fmt(a.shape)} @ {fmt(b.shape)}: the contracted dims differ ({k} vs {k2}); "
                             "the last axis of the left operand must match the second-to-last of the right")
        broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        out = a2.reshape(*a2.shape, 1).mul(b2.reshape(*b2.shape[:-2], 1, k, n)).sum(-2)
        if a.ndim == 1:
            out = out.squeeze(-2)
        return out.squeeze(-1) if b.ndim == 1 else out

    def dot(self: Tensor, w: Any) -> Tensor:
        return self.matmul(w)

    def __matmul__(self, w: Any) -> Tensor:
        return self.matmul(w)

    def __rmatmul__(self, w: Any) -> Tensor:
        return self.matmul(w, reverse=True)

    def _pool(self: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
        """Sliding windows over the last len(kernel) axes: (..., i0, i1) -> (..., o0, o1, k0, k1), where
        out[..., a, b] = x[..., a·s + b·d]. Each axis is tiled, cut to k·(i+d) and reshaped to (k, i+d): row j
        then starts j·d later in x, so column a·s of row j holds x[a·s + j·d]."""
        nd = len(kernel)
        lead, ins = self.shape[:-nd], self.shape[-nd:]
        outs = [(i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(ins, kernel, stride, dilation)]
        if any(o <= 0 for o in outs):
            raise ShapeError(f"a window of {kernel} (dilation {dilation}) does not fit in {fmt(ins)}; "
                             "pad the input or use a smaller kernel")
        reps = [math.ceil(k * (i + d) / i) for i, k, d in zip(ins, kernel, dilation)]
        x = self.reshape(*lead, *(v for i in ins for v in (1, i)))
        x = x.expand(*lead, *(v for r, i in zip(reps, ins) for v in (r, i))).reshape(*lead, *(r * i for r, i in
                                                                                             zip(reps, ins)))
        x = x.shrink([None] * len(lead) + [(0, k * (i + d)) for i, k, d in zip(ins, kernel, dilation)])
        x = x.reshape(*lead, *(v for i, k, d in zip(ins, kernel, dilation) for v in (k, i + d)))
        cols = [(i + d, o * s) for i, d, o, s in zip(ins, dilation, outs, stride)]
        x = x.pad([(0, 0)] * len(lead) + [p for have, want in cols for p in ((0, 0), (0, max(want - have, 0)))])
        x = x.shrink([None] * len(lead) + [p for _, want in cols for p in (None, (0, want))])
        x = x.reshape(*lead, *(v for k, o, s in zip(kernel, outs, stride) for v in (k, o, s)))
        x = x.shrink([None] * len(lead) + [p for _ in kernel for p in (None, None, (0, 1))])
        x = x.reshape(*lead, *(v for k, o in zip(kernel, outs) for v in (k, o)))
        nl = len(lead)
        return x.permute(*range(nl), *(nl + 2 * j + 1 for j in range(nd)), *(nl + 2 * j for j in range(nd)))

    def conv2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int | tuple[int, int] = 1,
               padding: Any = 0, dilation: int | tuple[int, int] = 1, groups: int = 1) -> Tensor:
        """2-D cross-correlation of an (N, Cin, H, W) input with a (Cout, Cin/groups, kH, kW) weight."""
        if self.ndim != 4 or weight.ndim != 4:
            raise ShapeError(f"conv2d needs a 4-D (N, C, H, W) input and a 4-D (Cout, Cin/groups, kH, kW) weight, "
                             f"got {fmt(self.shape)} and {fmt(weight.shape)}")
        n, c, _, _ = self.shape
        cout, cin_g, kh, kw = weight.shape
        if not isinstance(groups, int) or groups < 1 or c % groups or cout % groups or c // groups != cin_g:
            raise ShapeError(f"conv2d: input channels {c}, weight {fmt(weight.shape)} and groups={groups} do not fit; "
                             "need Cin = groups · weight.shape[1] and Cout divisible by groups")
        (pt, pb), (pl, pr) = _padding(padding)
        x = self.pad([(0, 0), (0, 0), (pt, pb), (pl, pr)])
        win = x._pool((kh, kw), _two(stride, "stride"), _two(dilation, "dilation"))   # (N, C, oh, ow, kh, kw)
        oh, ow = win.shape[2:4]
        win = win.reshape(n, groups, 1, cin_g, oh, ow, kh, kw)
        w = weight.reshape(1, groups, cout // groups, cin_g, 1, 1, kh, kw)
        out = win.mul(w).sum((3, 6, 7)).reshape(n, cout, oh, ow)
        if bias is None:
            return out
        if bias.shape != (cout,):
            raise ShapeError(f"conv2d bias must have shape ({cout},), got {fmt(bias.shape)}")
        return out.add(bias.reshape(1, cout, 1, 1))

    def max_pool2d(self: Tensor, kernel_size: int | tuple[int, int] = 2, stride: int | tuple[int, int] | None = None,
                   padding: Any = 0, dilation: int | tuple[int, int] = 1) -> Tensor:
        """Max over windows of the last two axes (padding counts as -inf)."""
        k = _two(kernel_size, "kernel_size")
        lo = float("-inf") if self.dtype.is_float else self.dtype.min
        x = self.pad([(0, 0)] * (self.ndim - 2) + _padding(padding), value=lo)
        win = x._pool(k, _two(stride if stride is not None else k, "stride"), _two(dilation, "dilation"))
        return win.max((-2, -1))

    def avg_pool2d(self: Tensor, kernel_size: int | tuple[int, int] = 2, stride: int | tuple[int, int] | None = None,
                   padding: Any = 0) -> Tensor:
        """Mean over windows of the last two axes (padding counts as zeros in the mean)."""
        k = _two(kernel_size, "kernel_size")
        x = self.pad([(0, 0)] * (self.ndim - 2) + _padding(padding))
        return x._pool(k, _two(stride if stride is not None else k, "stride"), (1, 1)).mean((-2, -1))
