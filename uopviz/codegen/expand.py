"""Expand: UPCAST and UNROLL ranges are not loops but copies of the code, one per index.

Some expanded ranges, the lane axes, become vectors instead (DESIGN: vectors are shapes): such a range is
replaced by the index vector Stack(0, 1, …, N−1), so every value that depends on it has the shape (N,), and
Instruction Selection makes those values the target's vector types or scalar code. Lane axes have a width every
vector target has (2, 4, 8 or 16), and no value varies with two of them (a vector has one axis): the innermost
UPCAST range is the first, then other UPCAST and UNROLL ranges, innermost first, that share no value with one
chosen. An output axis vectorizes loads, arithmetic and stores alike, a reduce axis the work before the
accumulator; a row kernel (softmax: a max, a sum and the normalized row, one after another) gets one of each.

Every other expanded range is copied: an End over it becomes a Group of the copies of its stores, a Reduce over
it the combination of the copies of its value, in order. A Reduce over the lane axis keeps N partial results in a
vector accumulator and combines the lanes after its loop (at once when no loop is left) in halves (`_halve`).
"""

from __future__ import annotations

from uopviz.codegen.accumulate import combine
from uopviz.codegen.group_reduce import free_by_node
from uopviz.codegen.lanes import LANE_WIDTHS, iota, lane, width
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


def lane_axes(kernel: UOp) -> frozenset[UOp]:
    """The ranges Expand turns into vectors (see the module's doc); none in a kernel with a Wmma (codegen/tc.py),
    whose vectors are its fragments."""
    nodes = kernel.toposort()
    if any(u.op is Ops.WMMA for u in nodes):
        return frozenset()
    ranges = [u for u in nodes if u.op is Ops.RANGE and u.arg.type in EXPANDED]
    fits = sorted((r for r in ranges if r.src[0].op is Ops.CONST and r.src[0].arg.value in LANE_WIDTHS),
                  key=lambda r: (r.arg.type is not AxisType.UPCAST, -r.arg.idx))
    if len(fits) < 2:
        return frozenset(fits)
    together = {fs & set(fits) for fs in free_by_node(kernel).values()}
    chosen: list[UOp] = []
    for r in fits:
        if not any(r in fs and c in fs for fs in together for c in chosen):
            chosen.append(r)
    return frozenset(chosen)


def _copies(x: UOp, r: UOp) -> list[UOp]:
    return [x.substitute({r: UOp.const(dtypes.index, i)}) for i in range(_size(r))]


def expand_end(ctx: frozenset[UOp], body: UOp, r: UOp) -> UOp | None:
    if r.arg.type not in EXPANDED:
        return None
    if r in ctx:
        return body.substitute({r: iota(_size(r))})
    return UOp(Ops.GROUP, tuple(_copies(body, r)))


def expand_reduce(ctx: frozenset[UOp], red: UOp) -> UOp | None:
    val, ranges = red.src[0], red.src[1:]
    ex = [r for r in ranges if r.arg.type in EXPANDED]
    if not ex:
        return None
    vals = [val]
    for r in ex:
        if r not in ctx:
            vals = [c for v in vals for c in _copies(v, r)]
    out = _fold(red.arg.op, vals)
    rest = tuple(r for r in ranges if r not in ex)
    lanes = next((r for r in ex if r in ctx), None)
    if lanes is not None:
        out = out.substitute({lanes: iota(_size(lanes))})
    out = out.reduce(red.arg.op, *rest) if rest else out  # the loop over the other ranges reduces the copies
    return _halve(red.arg.op, out) if lanes is not None else out


def _halve(op: Ops, v: UOp) -> UOp:
    """A vector's lanes combined by op in halves: its low half with its high half, lane by lane, as one vector op,
    until one lane is left (a lane width is a power of two). Four vector steps for 16 lanes, where a left-to-right
    fold was a chain of 15 dependent scalar ops after every row's loop: a layernorm's rows of 128 spent more time
    in its two chains than in its loops."""
    n = width(v)
    while n > 1:
        n //= 2
        lo, hi = (UOp(Ops.STACK, tuple(lane(v, i) for i in range(k, k + n))) for k in (0, n))
        v = combine(op, lo, hi)
    return lane(v, 0)


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
