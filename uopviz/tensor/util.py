"""Shared rules of the Tensor front-end: its named errors and the checks every method applies to its arguments.

Kept apart from the Tensor methods so each topic module (creation, movement, elementwise, reductions, nn)
reads the same shape, axis and dtype rules and raises the same errors with the same wording.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from uopviz.dtype import DType, DTypeError, dtypes
from uopviz.uop.ops import UOp

Shape = tuple[int, ...]


class ShapeError(ValueError):
    """Shapes that do not fit together: broadcasting, reshape sizes, matmul dims, concatenation."""


class AxisError(ValueError, IndexError):
    """An axis outside a tensor's dimensions (a ValueError and an IndexError, like NumPy's AxisError)."""


def fmt(shape: Sequence[int]) -> str:
    return str(tuple(shape))


def shape_arg(args: Sequence[Any], what: str = "shape") -> Shape:
    """A shape given as `f(2, 3)` or `f((2, 3))`; every size a non-negative int."""
    dims = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise ShapeError(f"{what} {dims} must hold non-negative ints, got {d!r}")
    return dims


def int_args(args: Sequence[Any]) -> tuple[int, ...]:
    """Ints given as `f(1, 0)` or `f((1, 0))` (axis orders, sizes with -1)."""
    vals = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"expected ints, got {v!r} in {vals}")
    return vals


def normalize_axis(axis: int, ndim: int) -> int:
    """axis in [-ndim, ndim) as a non-negative axis number."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"an axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise AxisError(f"axis {axis} is out of range for a tensor of {ndim} dims (use -{ndim}..{ndim - 1})"
                        if ndim else f"axis {axis} is out of range: a 0-d tensor has no axes")
    return axis % ndim


def normalize_axes(axis: int | Iterable[int] | None, ndim: int) -> tuple[int, ...]:
    """None means every axis; an int or a tuple of ints, negatives allowed, each at most once; sorted."""
    if axis is None:
        return tuple(range(ndim))
    axes = [normalize_axis(a, ndim) for a in ((axis,) if isinstance(axis, int) else axis)]
    if len(set(axes)) != len(axes):
        raise AxisError(f"axis {tuple(axis)} names an axis twice")  # type: ignore[arg-type]
    return tuple(sorted(axes))


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting: right-align, every axis equal or 1."""
    nd = max(len(s) for s in shapes)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
    out = []
    for k in range(nd):
        sizes = {s[k] for s in padded} - {1}
        if len(sizes) > 1:
            raise ShapeError(f"cannot broadcast shapes {' and '.join(fmt(s) for s in shapes)}: axis {k - nd} has "
                             f"sizes {sorted(sizes)}; each axis must match or be 1 (reshape one operand)")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def to_dtype(dt: Any) -> DType:
    """A DType from a DType, its name ("float32") or a NumPy dtype."""
    if isinstance(dt, DType):
        return dt
    if isinstance(dt, str):
        return dtypes.from_name(dt)
    try:
        return dtypes.from_numpy(dt)
    except TypeError:
        raise DTypeError(f"not a dtype: {dt!r}; use e.g. dtypes.float32 or 'float32'") from None


def const_uop(value: bool | int | float, dtype: DType, shape: Shape) -> UOp:
    """A constant at the Tensor level: a scalar Const, brought to shape by reshape + expand."""
    c = UOp.const(dtype, value)
    if not shape:
        return c
    c = c.reshape((1,) * len(shape))
    return c if all(d == 1 for d in shape) else c.expand(shape)


def expand_to(u: UOp, shape: Shape) -> UOp:
    """u broadcast to shape: size-1 axes added on the left by a reshape, then an expand."""
    if u.shape == shape:
        return u
    if len(u.shape) != len(shape):
        u = u.reshape((1,) * (len(shape) - len(u.shape)) + tuple(u.shape))
    return u if u.shape == shape else u.expand(shape)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)
