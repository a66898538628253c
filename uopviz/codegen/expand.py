"""Expand: UPCAST and UNROLL ranges are not loops but copies of the code, one per index.

An UPCAST range under a Store's End becomes a Group of the stores for each index; an UNROLL range of a
Reduce becomes the reduction of the copies of its value, combined in order. This is the scalar form of
expansion: the copies stay separate scalar operations (a target's vector types are a later refinement of the
same rewrite). The ranges must have constant bounds.
"""

from __future__ import annotations

from uopviz.codegen.accumulate import combine
from uopviz.dtype import dtypes
from uopviz.uop.ops import AxisType, Ops, UOp
from uopviz.uop.pattern import PatternMatcher, UPat

EXPANDED = frozenset({AxisType.UPCAST, AxisType.UNROLL})


class ExpandError(ValueError):
    """An UPCAST/UNROLL range that cannot be expanded (its size is not a constant)."""


def _copies(x: UOp, r: UOp) -> list[UOp]:
    if r.src[0].op is not Ops.CONST:
        raise ExpandError(f"r{r.arg.idx} is {r.arg.type.name} but its size {r.src[0].render()} is not a constant")
    return [x.substitute({r: UOp.const(dtypes.index, i)}) for i in range(r.src[0].arg.value)]


def expand_end(body: UOp, r: UOp) -> UOp | None:
    if r.arg.type not in EXPANDED:
        return None
    return UOp(Ops.GROUP, tuple(_copies(body, r)))


def expand_reduce(red: UOp) -> UOp | None:
    val, ranges = red.src[0], red.src[1:]
    ex = [r for r in ranges if r.arg.type in EXPANDED]
    if not ex:
        return None
    vals = [val]
    for r in ex:
        vals = [c for v in vals for c in _copies(v, r)]
    out = vals[0]
    for v in vals[1:]:
        out = combine(red.arg.op, out, v)
    rest = tuple(r for r in ranges if r not in ex)
    return out.reduce(red.arg.op, *rest) if rest else out  # the loop over the other ranges reduces the copies


expander = PatternMatcher([
    (UPat(Ops.END, src=(UPat.var("body"), UPat(Ops.RANGE, name="r"))), expand_end),
    (UPat(Ops.REDUCE, name="red"), lambda red: expand_reduce(red) if len(red.src) > 1 else None),
], name="expand")
