"""Linearize: a kernel graph to one instruction list, with each Range's body between the Range and its End.

Every node lives in the block of the innermost range it depends on (Ranges nest as their Ends do: a Range
whose End depends on another range sits inside that range's loop). Within a block, nodes keep a topological
order, and a nested loop is emitted whole where its End falls. Values that depend on no range of a loop are
thereby computed before the loop opens: loop-invariant code motion falls out of the block assignment.
"""

from __future__ import annotations

from uopviz.uop.ops import Ops, UOp


class LinearizeError(ValueError):
    """A kernel graph whose ranges cannot be put in loops (a Range with no End, or ranges that do not nest)."""


def _ranges(order: list[UOp]) -> dict[UOp, frozenset[UOp]]:
    out: dict[UOp, frozenset[UOp]] = {}
    for u in order:
        rs = frozenset().union(*(out[s] for s in u.src))
        if u.op is Ops.RANGE:
            rs = rs | {u}
        elif u.op is Ops.END:
            rs = rs - {u.src[1]}
        out[u] = rs
    return out


def linearize(sink: UOp) -> UOp:
    """Linear(instructions in execution order) for a kernel Sink."""
    order = sink.toposort()
    rs = _ranges(order)
    end_of: dict[UOp, UOp] = {}
    for u in order:
        if u.op is Ops.END:
            if u.src[1] in end_of:
                raise LinearizeError(f"Range r{u.src[1].arg.idx} is closed by two Ends; put the stores of one loop in "
                                     "a Group and End it once")
            end_of[u.src[1]] = u
    for r in (u for u in order if u.op is Ops.RANGE):
        if r not in end_of:
            raise LinearizeError(f"Range r{r.arg.idx} has no End: every loop must be closed")
    depth: dict[UOp, int] = {}

    def depth_of(r: UOp) -> int:
        if r not in depth:
            depth[r] = -1  # guards a cycle: ranges that enclose each other
            outer = rs[end_of[r]]
            if any(depth.get(p) == -1 for p in outer):
                raise LinearizeError(f"Range r{r.arg.idx} is inside a loop that is inside it")
            depth[r] = 1 + max((depth_of(p) for p in outer), default=-1)
        return depth[r]

    def parent(r: UOp) -> UOp | None:
        return max(rs[end_of[r]], key=depth_of, default=None)

    block: dict[UOp, UOp | None] = {}
    for u in order:
        inner = block[u] = max(rs[u], key=depth_of, default=None)
        enclosing = set()
        while inner is not None:
            enclosing.add(inner)
            inner = parent(inner)
        if not rs[u] <= enclosing:
            names = ", ".join(sorted(f"r{r.arg.idx}" for r in rs[u]))
            raise LinearizeError(f"{u.op.value} depends on ranges {names}, which are not nested loops")
    children: dict[UOp | None, list[UOp]] = {}
    for u in order:
        if u.op is not Ops.SINK:
            children.setdefault(block[u], []).append(u)
    out: list[UOp] = []

    def emit(b: UOp | None) -> None:
        for u in children.get(b, ()):
            if u.op is Ops.RANGE:
                continue
            if u.op is Ops.END:
                r = u.src[1]
                out.append(r)
                emit(r)
            out.append(u)

    emit(None)
    return UOp(Ops.LINEAR, tuple(out))
