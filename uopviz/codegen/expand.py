"""Expand: UPCAST and UNROLL ranges are not loops but copies of the code, one per index.

One expanded range of the kernel, its lane axis, becomes a vector instead (DESIGN: vectors are shapes): the range
is replaced by the index vector Stack(0, 1, …, N−1), so every value that depends on it has the shape (N,), and
Instruction Selection makes those values the target's vector types or scalar code. The lane axis is the innermost
UPCAST range of a width every vector target has (2, 4, 8 or 16), else such an UNROLL range: an output axis
vectorizes loads, arithmetic and stores alike, a reduce axis only the work before the accumulator.

Every other expanded range is copied: an End over it becomes a Group of the copies of its stores, a Reduce over
it the combination of the copies of its value, in order. A Reduce over the lane axis keeps N partial results in a
vector accumulator and combines the lanes in order after its loop (at once when no loop is left).
"""

from __future__ import annotations

from uopviz.codegen.accumulate import combine
from uopviz.codegen.lanes import LANE_WIDTHS, iota, lane
from uopviz.dtype import dtypes
from uopviz.uop.ops import AxisType, Ops, UOp
from uopviz.uop.pattern import PatternMatcher, UPat

EXPANDED = frozenset({AxisType.UPCAST, AxisType.UNROLL})


class ExpandError(ValueError):
    """An UPCAST/UNROLL range that cannot be expanded (its size is not a constant)."""


def _size(r: UOp) -> int:
    if r.src[0].op is not Ops.CONST:
        raise ExpandError(f"r{r.arg.idx} is {r.arg.type.name} but its size {r.src[0].render()} is not a constant")
    return int(r.src[0].arg.value)


def lane_axis(kernel: UOp) -> UOp | None:
    """The range Expand turns into vectors: the innermost UPCAST of a lane width, else the innermost UNROLL one;
    none in a kernel with a Wmma (codegen/tc.py), whose vectors are its fragments."""
    nodes = kernel.toposort()
    if any(u.op is Ops.WMMA for u in nodes):
        return None
    ranges = [u for u in nodes if u.op is Ops.RANGE and u.arg.type in EXPANDED]
    fits = [r for r in ranges if r.src[0].op is Ops.CONST and r.src[0].arg.value in LANE_WIDTHS]
    for t in (AxisType.UPCAST, AxisType.UNROLL):
        if of_type := [r for r in fits if r.arg.type is t]:
            return max(of_type, key=lambda r: r.arg.idx)
    return None


def _copies(x: UOp, r: UOp) -> list[UOp]:
    return [x.substitute({r: UOp.const(dtypes.index, i)}) for i in range(_size(r))]


def expand_end(ctx: UOp | None, body: UOp, r: UOp) -> UOp | None:
    if r.arg.type not in EXPANDED:
        return None
    if r is ctx:
        return body.substitute({r: iota(_size(r))})
    return UOp(Ops.GROUP, tuple(_copies(body, r)))


def expand_reduce(ctx: UOp | None, red: UOp) -> UOp | None:
    val, ranges = red.src[0], red.src[1:]
    ex = [r for r in ranges if r.arg.type in EXPANDED]
    if not ex:
        return None
    vals = [val]
    for r in ex:
        if r is not ctx:
            vals = [c for v in vals for c in _copies(v, r)]
    out = _fold(red.arg.op, vals)
    rest = tuple(r for r in ranges if r not in ex)
    if ctx in ex:
        out = out.substitute({ctx: iota(_size(ctx))})
    out = out.reduce(red.arg.op, *rest) if rest else out  # the loop over the other ranges reduces the copies
    return _fold(red.arg.op, [lane(out, i) for i in range(_size(ctx))]) if ctx in ex else out


def _fold(op: Ops, xs: list[UOp]) -> UOp:
    """xs combined by op, left to right (the order the loop would have combined them in)."""
    out = xs[0]
    for x in xs[1:]:
        out = combine(op, out, x)
    return out


expander = PatternMatcher([
    (UPat(Ops.END, src=(UPat.var("body"), UPat(Ops.RANGE, name="r"))), expand_end),
    (UPat(Ops.REDUCE, name="red"), lambda ctx, red: expand_reduce(ctx, red) if len(red.src) > 1 else None),
], name="expand")
