"""Reductions to accumulators: a Reduce over ranges becomes a REG buffer that a loop updates.

Targets have no reduce instruction, so `Reduce(v, r)` becomes: store the identity into a one-element REG
buffer, then inside the loop over r store acc op v back into it, and after the loop (End) load the result. A
vector v (shape (N,), see lanes.py) gets an N-element buffer, addressed by the index vector: one partial per lane.
After nodes carry the order: the initial store waits for the ranges the value depends on outside the
reduction, so the accumulator restarts for every output element that needs its own sum, and is computed
once, hoisted, when the value does not depend on them.
"""

from __future__ import annotations

from uopviz.codegen.group_reduce import free_ranges
from uopviz.codegen.lanes import broadcast, iota, width
from uopviz.dtype import DType, dtypes
from uopviz.schedule.rangeify import identity
from uopviz.uop.ops import AddrSpace, Ops, UOp
from uopviz.uop.pattern import PatternMatcher, UPat


class Accumulators:
    """Numbers the REG buffers of one kernel (equal-looking buffers are different storage), after those the kernel
    has already (an epilogue's tile, codegen/epilogue.py)."""

    def __init__(self, device: str, kernel: UOp | None = None) -> None:
        self.device, self.count = device, 0
        if kernel is not None:
            self.count = max((u.arg.uid for u in kernel.toposort() if u.op is Ops.BUFFER), default=0)

    def new(self, dtype: DType, size: int = 1) -> UOp:
        self.count += 1
        return UOp.buffer(size, dtype, self.device, AddrSpace.REG, uid=self.count)


def combine(op: Ops, acc: UOp, v: UOp) -> UOp:
    """acc op v, with bools as logic (a sum of bools is any, a product all)."""
    if acc.dtype.is_bool and op in (Ops.ADD, Ops.MAX):
        return acc | v
    if acc.dtype.is_bool:
        return acc & v
    return acc + v if op is Ops.ADD else acc.maximum(v) if op is Ops.MAX else acc * v


def to_accumulator(ctx: Accumulators, red: UOp) -> UOp:
    val, ranges = red.src[0], red.src[1:]
    n = width(red)
    acc, at = ctx.new(red.dtype, n), iota(n) if red.shape else UOp.const(dtypes.index, 0)
    outer = sorted(free_ranges(val) - set(ranges), key=lambda r: r.arg.idx)  # not loops closed inside val
    start = broadcast(UOp.const(red.dtype, identity(red.arg.op, red.dtype)), n)
    init = (acc.after(*outer) if outer else acc).index(at).store(start)
    cur = acc.after(init, *ranges)
    loop = cur.index(at).store(combine(red.arg.op, cur.index(at).load(), val)).end(*ranges)
    return acc.after(loop).index(at).load()


accumulate = PatternMatcher([
    (UPat(Ops.REDUCE, name="red"), lambda ctx, red: to_accumulator(ctx, red) if len(red.src) > 1 else None),
], name="reduce to accumulator")


def merge_loops(sink: UOp) -> UOp:
    """Loops over one range whose bodies do not depend on each other become one loop: the copies of a reduction
    that UPCAST made share their loop (one pass over the data updates every accumulator)."""
    while True:
        ends: dict[UOp, list[UOp]] = {}
        for u in sink.toposort():
            if u.op is Ops.END:
                ends.setdefault(u.src[1], []).append(u)
        for r, group in ends.items():
            below = {e: e.sparents() for e in group} if len(group) > 1 else {}  # once each, not once a pair
            free = group[:1]
            for e in group[1:]:
                if all(e not in below[g] and g not in below[e] for g in free):
                    free.append(e)
            if len(free) > 1:
                merged = UOp(Ops.GROUP, tuple(e.src[0] for e in free)).end(r)
                sink = sink.substitute(dict.fromkeys(free, merged))
                break
        else:
            return sink
