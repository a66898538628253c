"""Row caches: an expensive value a reduction loop computes per element is kept for a later loop that needs it again.

A row kernel runs several loops over each row: softmax's max, its sum of exp(x - max), and its output
exp(x - max) / sum. Without this pass the exponential is computed twice per element, in the sum's loop and again in
the output's; decomposed into a polynomial on the CPU it is some 30 vector instructions, which make softmax
compute-bound. Here the reduction's loop also stores each such value into a kernel-local REG buffer (the row's
cache, one slot per iteration and lane), and the later loop loads it from there instead of computing it again.

A value is cached when it depends on the reduction loop's ranges, contains an expensive op (a transcendental, a
root, a power, a reciprocal or a division), reads memory only from parameters the kernel never writes, and a later
loop computes exactly it with that loop's ranges in place of the reduction's (node for node, the ranges mapped in
order: as many, of equal sizes). That equality is the proof of correctness: slot s of the cache holds the value
that the later loop's iteration s computes. So any opts that split both loops alike (lanes or copies of UPCAST
and UNROLL, THREAD splits of the rows) keep the pass working, and loops split differently do not match and stay as
they are. The later loop's load waits for the reduction's End (After), and the later loop must lie in every loop
the reduction lies in, so a row's cache is read before the next row's reduction writes it again.

It runs in Instruction Selection, after `reduce to accumulator` and `merge loops` and before `decompose`: only
there are the loops explicit (an End to put the stores in and to order the loads after) while an exponential is
still one op, recognized as expensive and then decomposed once, where it is computed. A target opts in with
`Target.private_memory`, the bytes of per-call arrays it keeps in cache (the CPU's stack); a GPU would spill such
an array to slow memory, so its Target leaves it 0 and its kernels keep computing.
"""

from __future__ import annotations

import math

from uopviz.codegen.group_reduce import free_by_node
from uopviz.codegen.lanes import iota, width
from uopviz.dtype import dtypes
from uopviz.schedule.rows import ROW_BYTES
from uopviz.target import Target
from uopviz.uop.ops import AddrSpace, AxisType, GroupOp, Ops, UOp

EXPENSIVE = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.POW, Ops.RECIP, Ops.DIV, Ops.THREEFRY})
"""Ops that cost far more than a store and a load of the first-level cache: transcendentals (decomposed, tens of
instructions), and divisions and square roots (slow instructions where they are native)."""
STACK_BYTES = ROW_BYTES
"""The row caches a CPU kernel call may keep on its stack (Target.private_memory): as large as a fused row may be,
far below any thread's stack (8 MiB by default on Linux), and with the row itself within a core's L2."""
_IMPURE = frozenset({Ops.STORE, Ops.END, Ops.AFTER, Ops.BARRIER, Ops.GROUP, Ops.WMMA, Ops.CUSTOM})


def cache_row_values(sink: UOp, target: Target) -> UOp:
    """sink with every expensive per-element value of a reduction loop that a later loop computes again stored in a
    row cache by the reduction and loaded by the later loop (unchanged where nothing matches or fits)."""
    budget = target.private_memory
    if budget <= 0:
        return sink
    inner = {u.src[0] for u in sink.toposort() if u.op is Ops.END}
    firsts = [u.src[1] for u in sink.toposort() if u.op is Ops.END and u not in inner
              and all(r.arg.type is AxisType.REDUCE and r.src[0].op is Ops.CONST for r in _chain(u))]
    for r in firsts:  # found again by its range: each rewrite rebuilds the graph above the loops it changes
        first = next(u for u in sink.toposort() if u.op is Ops.END and u.src[1] is r)
        sink, used = _cache_loop(sink, first, budget, target.device)
        budget -= used
    return sink


def _chain(end: UOp) -> list[UOp]:
    """The ranges an End closes with the Ends directly inside it, outermost first: End(End(body, r1), r0) -> r0, r1."""
    out = []
    while end.op is Ops.END:
        out.append(end.src[1])
        end = end.src[0]
    return out


def _body(end: UOp) -> UOp:
    while end.op is Ops.END:
        end = end.src[0]
    return end


def _slot(ranges: list[UOp], value: UOp) -> UOp:
    """The cache slot of value's lanes in the loops' current iteration (row-major over the loops, then lanes)."""
    flat = ranges[0]
    for r in ranges[1:]:
        flat = flat * r.src[0] + r
    n = width(value)
    return flat * UOp.const(dtypes.index, n) + iota(n) if value.shape else flat


def _cache_loop(sink: UOp, first: UOp, budget: int, device: str) -> tuple[UOp, int]:
    """Cache the values of reduction loop `first` that later loops compute again: (the new sink, bytes used)."""
    nodes, free = sink.toposort(), free_by_node(sink)
    ranges, body = _chain(first), _body(first)
    order = body.toposort()
    worth = _candidates(order, set(ranges), free, {u.src[0].src[0].memory() for u in nodes if u.op is Ops.STORE})
    if not worth:
        return sink, 0
    before = first.sparents()
    laters = []  # loops with as many ranges of the same sizes, not inside `first`, inside every loop `first` is in
    for e in nodes:
        if e.op is Ops.END and e not in before and free[first] <= free[e]:
            theirs = _chain(e)[:len(ranges)]
            if len(theirs) == len(ranges) and not set(theirs) & set(ranges) \
                    and all(a.src[0] is b.src[0] for a, b in zip(ranges, theirs, strict=True)):
                laters.append((dict(zip(ranges, theirs, strict=True)), set(_body(e).toposort())))
    if not laters:
        return sink, 0
    moved = [_moved(order, m) for m, _ in laters]
    trips = math.prod(int(r.src[0].arg.value) for r in ranges)
    found: list[tuple[UOp, list[tuple[UOp, list[UOp]]]]] = []  # a value, and where later loops compute it again
    covered: set[UOp] = set()
    used = 0
    for v in reversed(order):  # users before their sources: the largest values first
        if v in covered or v not in worth:
            continue
        again = [(mv[v], [m[r] for r in ranges]) for mv, (m, inside) in zip(moved, laters, strict=True)
                 if mv[v] in inside]
        size = trips * width(v) * v.dtype.itemsize
        if again and used + size <= budget:
            found.append((v, again))
            used += size
            covered |= v.sparents()
    if not found:
        return sink, 0
    uid = 1 + max((u.arg.uid for u in nodes if u.op is Ops.BUFFER), default=0)
    bufs = [UOp.buffer(trips * width(v), v.dtype, device, AddrSpace.REG, uid=uid + k) for k, (v, _) in enumerate(found)]
    stores = [b.index(_slot(ranges, v)).store(v) for b, (v, _) in zip(bufs, found, strict=True)]
    new_first = UOp(Ops.GROUP, (*(body.src if body.op is Ops.GROUP else (body,)), *stores)).end(*ranges)
    mapping = {first: new_first}
    for b, (_, again) in zip(bufs, found, strict=True):
        for s, theirs in again:
            mapping[s] = b.after(new_first).index(_slot(theirs, s)).load()
    return sink.substitute(mapping), used


def _candidates(order: list[UOp], ranges: set[UOp], free: dict[UOp, frozenset[UOp]], written: set[UOp]) -> set[UOp]:
    """The values of a loop body worth caching: elementwise, varying with the loop, containing an expensive op that
    does, and pure (no side effects, loads only from parameters the kernel does not write)."""
    pure: dict[UOp, bool] = {}
    costly: dict[UOp, bool] = {}
    out = set()
    for u in order:
        if not free[u] & ranges:  # computed outside the loop: the same value wherever it is used
            pure[u], costly[u] = True, False
            continue
        mem = u.src[0].src[0].memory() if u.op is Ops.LOAD else None
        reads = mem is None or (mem.op is Ops.PARAM and mem not in written)
        pure[u] = u.op not in _IMPURE and reads and all(pure[s] for s in u.src)
        costly[u] = u.op in EXPENSIVE or any(costly[s] for s in u.src)
        if pure[u] and costly[u] and u.op in GroupOp.Elementwise and u.dtype not in (dtypes.index, dtypes.bool):
            out.add(u)
    return out


def _moved(order: list[UOp], mapping: dict[UOp, UOp]) -> dict[UOp, UOp]:
    """Each node of a loop body with the loop's ranges replaced by another loop's."""
    out: dict[UOp, UOp] = {}
    for u in order:
        if u in mapping:
            out[u] = mapping[u]
        else:
            src = tuple(out[s] for s in u.src)
            out[u] = u if src == u.src else u.replace(src=src)
    return out
