"""Vectors as shapes: the (N,)-shaped values Expand makes, and the lanes they are made of.

A vector is any value of shape (N,). Its lanes are Index(x, i) with a constant i (SPEC: a ()-shaped index removes
the axis); the lanes of a Stack are its sources and a scalar is every lane of itself, so taking lanes folds away
wherever the vector was built from scalars.
"""

from __future__ import annotations

from uopviz.dtype import dtypes
from uopviz.uop.ops import Ops, UOp

LANE_WIDTHS = (2, 4, 8, 16)  # vector lengths every vector target has (C vector extensions, OpenCL floatN)


def iota(n: int) -> UOp:
    """The index vector (0, 1, …, n−1): what an expanded range becomes."""
    return UOp(Ops.STACK, tuple(UOp.const(dtypes.index, i) for i in range(n)))


def width(x: UOp) -> int:
    """Lanes of a value: N for a vector of shape (N,), 1 for a scalar."""
    return int(x.shape[0]) if x.shape else 1


def lane(x: UOp, i: int) -> UOp:
    """Lane i of x (x itself when x is a scalar)."""
    if not x.shape:
        return x
    if x.op is Ops.STACK:
        return x.src[i]
    return UOp(Ops.INDEX, (x, UOp.const(dtypes.index, i)))


def broadcast(x: UOp, n: int) -> UOp:
    """x as a vector of n lanes (a scalar repeated)."""
    return x if x.shape else UOp(Ops.STACK, (x,) * n)
