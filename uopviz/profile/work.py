"""What a kernel launch does, counted from its kernel graph: floating-point and integer operations, and bytes moved.

The counts are the useful work, as the zoo counts it (kernels/zoo.py): every elementwise op once per element of its
shape and a Reduce once per element it reads (so a multiply-add is 2), casts and index arithmetic left out; every
input's memory read once (the elements of its largest view, at most its buffer) and every output written once. They
are read from the kernel before it is optimized, so opts that unroll, upcast or recompute do not change them, and a
profile's GFLOP/s and GB/s compare kernels with different opts fairly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from uopviz.dtype import dtypes
from uopviz.schedule.split import outputs_of
from uopviz.uop.alu import evaluate
from uopviz.uop.ops import GroupOp, Ops, UOp, prod

_COUNTED = GroupOp.Elementwise - {Ops.CAST}


class Work(NamedTuple):
    """A launch's operations and bytes moved."""

    flops: int
    bytes: int


def kernel_work(ast: UOp, vals: Mapping[str, int]) -> Work:
    """The work of one launch of a kernel graph (a Sink over Params, or a Copy between devices) with its variables
    at `vals`."""
    def numel(shape: tuple[int | UOp, ...]) -> int:
        n = prod(shape)
        return n if isinstance(n, int) else int(evaluate(n, vals))

    if ast.op is Ops.COPY:
        src = ast.src[0]
        return Work(0, 2 * numel(src.shape) * src.dtype.itemsize)
    flops, written, outputs = 0, 0, outputs_of(ast)
    views: dict[UOp, int] = {}  # an input Param -> the elements of its largest view
    for u in ast.toposort():
        if u.op in _COUNTED and u.dtype != dtypes.index:
            flops += numel(u.shape)
        elif u.op is Ops.REDUCE:
            flops += numel(u.src[0].shape)
        elif u.op is Ops.PARAM and u.arg.slot >= outputs:
            views.setdefault(u, 0)
        elif u.op is Ops.RESHAPE and u.src[0].op is Ops.PARAM:
            views[u.src[0]] = max(views.get(u.src[0], 0), numel(u.shape))
        elif u.op is Ops.STORE and u.src[1].op is Ops.INDEX:
            written += numel(u.src[1].src[0].shape) * u.src[1].dtype.itemsize
    read = sum((min(n, size) if n else size) * p.dtype.itemsize
               for p, n in views.items() if p.arg.slot >= outputs for size in (numel(p.shape),))
    return Work(flops, read + written)
