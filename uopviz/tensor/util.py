"""Shared rules of the Tensor front-end: its named errors and the checks every method applies to its arguments.

Kept apart from the Tensor methods so each topic module (creation, movement, elementwise, reductions, nn)
reads the same shape, axis and dtype rules and raises the same errors with the same wording.

A dimension is an int, or a symbolic size: an index-typed scalar UOp built from bound variables
(`uopviz.Variable("n", 1, 64).bind(10)`, and arithmetic on it). A symbolic size is the same node wherever the
same expression is built (hash-consing), so two dims are equal when they are the same object.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import Any

from uopviz.dtype import DType, DTypeError, dtypes
from uopviz.uop.alu import size_value
from uopviz.uop.ops import Ops, UOp, prod
from uopviz.uop.pattern import recording
from uopviz.uop.props import fmt_shape

Dim = int | UOp
Shape = tuple[Dim, ...]
Dims = Dim | Sequence[Dim]
"""A shape argument: its sizes as arguments, `f(2, 3)`, or one sequence of them, `f((2, 3))` (shape_arg)."""


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not fit together: broadcasting, reshape sizes, matmul dims, concatenation (a RuntimeError too,
    as PyTorch raises for them)."""


class AxisError(ValueError, IndexError, RuntimeError):
    """An axis outside a tensor's dimensions, or one named twice (a ValueError and an IndexError, like NumPy's
    AxisError, and a RuntimeError, which PyTorch raises for repeated or identical dims)."""


class ArgumentError(ValueError, RuntimeError):
    """An argument an op does not take (an unknown mode's name, shifts that do not pair with dims, both of two
    exclusive options): a ValueError, and a RuntimeError as PyTorch raises for these."""


def fmt(shape: Sequence[Dim]) -> str:
    return fmt_shape(tuple(shape)) if any(isinstance(d, UOp) for d in shape) else str(tuple(shape))


def is_symbolic(d: Any) -> bool:
    """Whether d is a symbolic size: an index-typed scalar UOp that cannot be negative."""
    return isinstance(d, UOp) and d.dtype == dtypes.index and d.shape == () and d.vmin >= 0


def shape_arg(args: Sequence[Any], what: str = "shape") -> Shape:
    """A shape given as `f(2, 3)` or `f((2, 3))`; every size a non-negative int or a symbolic size."""
    dims = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)
    for d in dims:
        if not is_symbolic(d) and (isinstance(d, bool) or not isinstance(d, int) or d < 0):
            raise ShapeError(f"{what} {fmt(dims)} must hold non-negative ints or bound variables, got {d!r}")
    return dims


def sym(d: Dim) -> Dim:
    """A dim in canonical form: a symbolic size simplified (so equal sizes are the same node), an int if it
    simplifies to a constant."""
    if isinstance(d, int):
        return d
    s: UOp | None  # the cached simplification is read from the node's __dict__, which holds Any
    if recording():  # the simplification is recorded: do it
        s = d.simplify()
    elif (s := d.__dict__.get(_SYM)) is None:
        s = d.__dict__[_SYM] = _simplified(d)
    return int(s.arg.value) if s.op is Ops.CONST else s


_SYM = "_sym"  # in a UOp's __dict__: its simplification (the front-end asks for the same dims often)


def _simplified(d: UOp) -> UOp:
    """d.simplify(), done once per expression over the variables themselves: a Bind is a leaf of its variable's
    range to the rules (its value is not looked at), so a size over `n.bind(37)` simplifies as the one over n does,
    with n bound again after. A decoder's sizes take a new value every token; their expressions do not change."""
    nodes = d.toposort()
    binds = {u: u.src[0] for u in nodes if u.op is Ops.BIND}
    variables = set(binds.values())
    if not binds or len(variables) != len(binds) or \
            any(s in variables for u in nodes if u.op is not Ops.BIND for s in u.src):  # n also used unbound
        return d.simplify()
    return _simplified_unbound(d.substitute(binds)).substitute({v: b for b, v in binds.items()})


@functools.lru_cache(maxsize=4096)
def _simplified_unbound(d: UOp) -> UOp:
    return d.simplify()


def same_dim(a: Dim, b: Dim) -> bool:
    """Whether two dims are the same size for every value of their variables."""
    return a == b if isinstance(a, int) and isinstance(b, int) else sym(a - b) == 0


def at_most(a: Dim, b: Dim) -> bool:
    """Whether a <= b for every value of the variables (an interval bound, so a kernel stays in bounds for the
    whole range a variable may be bound to, not only its value now)."""
    gap = sym(b - a)
    return gap >= 0 if isinstance(gap, int) else gap.vmin >= 0


def dim_args(args: Sequence[Any]) -> tuple[Dim, ...]:
    """Sizes given as `f(2, -1)` or `f((2, n))`: ints (-1 where a method allows it) or symbolic sizes."""
    vals = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)
    for v in vals:
        if not is_symbolic(v) and (isinstance(v, bool) or not isinstance(v, int)):
            raise TypeError(f"expected ints or bound variables, got {v!r} in {fmt(vals)}")
    return vals


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
    """None means every axis; an int or a tuple of ints, negatives allowed, each at most once; sorted. A 0-d
    tensor takes axis 0 or -1 as PyTorch does (naming no axis: its one element)."""
    if axis is None:
        return tuple(range(ndim))
    if type(axis) is int and -ndim <= axis < ndim:  # one axis in range (most calls)
        return (axis % ndim,)
    given = (axis,) if isinstance(axis, int) else tuple(axis)
    if ndim == 0 and all(a in (0, -1) and not isinstance(a, bool) for a in given):
        return ()
    axes = [normalize_axis(a, ndim) for a in given]
    if len(set(axes)) != len(axes):
        raise AxisError(f"axis {given} names an axis twice")
    return tuple(sorted(axes))


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting: right-align, every axis equal or 1 (a symbolic size equal only to itself). One pass per
    axis that keeps the size found so far: every op of two shapes that differ comes here, in every eager step."""
    nd = max(map(len, shapes))
    out: list[Dim] = []
    for k in range(-nd, 0):
        size: Dim = 1
        for s in shapes:
            if len(s) < -k or (d := s[k]) is size or (type(d) is int and (d == 1 or d == size)):
                continue
            if type(size) is not int or size != 1:
                sizes = list(dict.fromkeys(x[k] for x in shapes if len(x) >= -k and not (type(x[k]) is int and
                                                                                        x[k] == 1)))
                raise ShapeError(f"cannot broadcast shapes {' and '.join(fmt(s) for s in shapes)}: axis {k} has "
                                 f"sizes {fmt(sizes)[1:-1]}; each axis must match or be 1 (reshape one operand)")
            size = d
        out.append(size)
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
    """A constant at the Tensor level: a scalar Const, brought to shape by reshape + expand. Kept for the values a
    cache can tell apart (not NaN, nor NumPy scalars; a float zero with its sign, as 0.0 == -0.0): an eager loop
    makes the same constants (an optimizer's betas, a scale, a gradient rule's zeros) at the same shapes in every
    step, three nodes each time."""
    kind = type(value)
    if kind is int or kind is bool or (kind is float and value == value):
        return _kept_const(value, dtype, tuple(shape), kind is float and math.copysign(1.0, value) < 0)
    return _const_uop(value, dtype, shape)


@functools.lru_cache(maxsize=4096, typed=True)  # typed: True, 1 and 1.0 are three constants
def _kept_const(value: bool | int | float, dtype: DType, shape: Shape, sign_bit: bool) -> UOp:
    """const_uop of a value the cache tells apart; `sign_bit` (a float's) keeps -0.0 apart from 0.0, its equal."""
    return _const_uop(value, dtype, shape)


def _const_uop(value: bool | int | float, dtype: DType, shape: Shape) -> UOp:
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


def numel(shape: Iterable[Dim]) -> Dim:
    """The number of elements: an int, or a symbolic size when a dim is one."""
    return prod(shape)


value_of = size_value  # a dim's size now (symbolic sizes at their variables' bound values)


def int_dims(dims: Sequence[Dim], what: str) -> tuple[int, ...]:
    """dims as ints, where an op needs them concrete (a Python loop, a window count, a float over them): a symbolic
    size there is a ShapeError naming what needed it."""
    ints = tuple(d for d in dims if isinstance(d, int))
    if len(ints) != len(dims):
        raise ShapeError(f"{what} needs concrete sizes, got {fmt(dims)}: symbolic sizes are not supported there")
    return ints


def int_dim(d: Dim, what: str) -> int:
    """One size as an int, as int_dims."""
    return int_dims((d,), what)[0]


def concrete(shape: Iterable[Dim]) -> tuple[int, ...]:
    """The shape now, each symbolic size at its variables' bound values."""
    return tuple(size_value(d) for d in shape)
