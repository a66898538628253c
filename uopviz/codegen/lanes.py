"""Vectors as shapes: the (N,)-shaped values Expand makes, and the lanes they are made of.

A vector is any value of shape (N,). Its lanes are Index(x, i) with a constant i (SPEC: a ()-shaped index removes
the axis); the lanes of a Stack are its sources and a scalar is every lane of itself, so taking lanes folds away
wherever the vector was built from scalars.
"""

from __future__ import annotations

from functools import cache

from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import Ops, UOp

LANE_WIDTHS = (2, 4, 8, 16)  # vector lengths every vector target has (C vector extensions, OpenCL floatN)


@cache
def iota(n: int) -> UOp:
    """The index vector (0, 1, …, n−1): what an expanded range becomes (made once per width: every contiguous
    access of a kernel's lowering names one)."""
    return UOp(Ops.STACK, tuple(UOp.const(dtypes.index, i) for i in range(n)))


def width(x: UOp) -> int:
    """Lanes of a value: N for a vector of shape (N,), 1 for a scalar. Lanes are concrete (expand makes them from
    UPCAST and UNROLL sizes); a symbolic one is a ValueError naming it."""
    if not x.shape:
        return 1
    if not isinstance(n := x.shape[0], int):
        raise ValueError(f"{x.op.value}: a vector of a symbolic number of lanes ({n})")
    return n


def lane(x: UOp, i: int) -> UOp:
    """Lane i of x (x itself when x is a scalar)."""
    if not x.shape:
        return x
    if x.op is Ops.STACK:
        return x.src[i]
    return UOp(Ops.INDEX, (x, UOp.const(dtypes.index, i)))


def broadcast(x: UOp, n: int) -> UOp:
    """x as a vector of n lanes (a scalar repeated; one lane is the scalar itself)."""
    return x if x.shape or n == 1 else UOp(Ops.STACK, (x,) * n)


MASKS = {4: dtypes.int32, 8: dtypes.int64}  # a vector comparison's lanes are all ones or all zeros, this wide


def mask_dtype(u: UOp) -> DType | None:
    """The lane type of a vector bool kept as a lane mask: signed integers as wide as the lanes its comparison
    compared (logic on masks keeps that width). None for a bool vector built from scalar lanes (a Stack)."""
    while u.dtype.is_bool:
        shaped = [x for x in u.src if x.shape]
        if u.op is Ops.STACK or not shaped:
            return None
        if u.op in (Ops.CMPLT, Ops.CMPNE) and not shaped[0].dtype.is_bool:
            return MASKS.get(shaped[0].dtype.itemsize)
        u = shaped[0]
    return None
