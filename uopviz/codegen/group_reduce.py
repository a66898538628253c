"""GROUP_REDUCE: the work-items of a work-group share one reduction through local memory.

Opts split GROUP_REDUCE ranges from REDUCE ranges; like LOCAL ones they become local ids (lidx), so each index
is a work-item of the group. A Reduce over them is done in two steps. Each work-item reduces its own slice (the
Reduce's other ranges) into a partial and stores it into a LOCAL buffer, one slot per work-item and per UPCAST
copy; after a Barrier the reduction goes on over the partials, read back from local memory in order, in new
REDUCE ranges. Every work-item of a group would compute the same result, so stores to global memory are gated
to the work-items whose group-reduce ids are 0; `gate_blocks` then puts the work only those stores need (the
combine of the partials) under an If, so the other work-items skip it. A group reduction inside a loop waits
at a Barrier before storing its partials, so that no work-item overwrites a slot another still reads from the
previous iteration.
"""

from __future__ import annotations

import functools
import math
import operator

from uopviz.dtype import DType
from uopviz.uop.ops import AddrSpace, AxisType, Ops, UOp
from uopviz.uop.pattern import PatternMatcher, UPat

LANES = frozenset({AxisType.LOCAL, AxisType.GROUP_REDUCE})  # ranges that are work-items of one work-group
LOOPS = frozenset({AxisType.LOOP, AxisType.REDUCE})  # ranges that stay sequential loops


def free_by_node(root: UOp) -> dict[UOp, frozenset[UOp]]:
    """For every node under root, the ranges its value varies with: the Ranges under it that no Reduce or End
    below it closes."""
    free: dict[UOp, frozenset[UOp]] = {}
    for u in root.toposort():
        fs = frozenset().union(*(free[s] for s in u.src))
        if u.op is Ops.RANGE:
            fs |= {u}
        elif u.op is Ops.REDUCE:
            fs -= set(u.src[1:])
        elif u.op is Ops.END:
            fs -= {u.src[1]}
        free[u] = fs
    return free


def free_ranges(root: UOp) -> frozenset[UOp]:
    """The ranges root's value varies with: the Ranges under it that no Reduce or End below it closes."""
    return free_by_node(root)[root]


def _by_idx(rs: frozenset[UOp] | list[UOp], *types: AxisType) -> list[UOp]:
    return sorted((r for r in rs if r.arg.type in types), key=lambda r: r.arg.idx)


def _size(r: UOp) -> int:
    return int(r.src[0].arg.value)  # opts only make constant-size LOCAL, GROUP_REDUCE and UPCAST ranges


def slot_axes(red: UOp) -> list[UOp] | None:
    """The ranges a grouped Reduce's partials are stored by (UPCAST copies, LOCAL and its GROUP_REDUCE work-items,
    outer to inner, so neighbouring work-items write neighbouring slots); None for a Reduce without
    GROUP_REDUCE ranges."""
    groups = _by_idx(list(red.src[1:]), AxisType.GROUP_REDUCE)
    if not groups:
        return None
    outer = free_ranges(red.src[0]) - set(red.src[1:])
    return [*_by_idx(outer, AxisType.UPCAST), *_by_idx(outer, AxisType.LOCAL), *groups]


def local_memory(k: UOp) -> int:
    """Bytes of local memory the group reductions of kernel k take (one buffer each)."""
    total = 0
    for u in k.toposort():
        if u.op is Ops.REDUCE and (axes := slot_axes(u)) is not None:
            total += math.prod(_size(r) for r in axes) * u.dtype.itemsize
    return total


def _slot(axes: list[UOp]) -> UOp | int:
    """Row-major position of a slot among the axes' sizes."""
    out: UOp | int = 0
    for r in axes:
        out = out * _size(r) + r
    return out


def first(lanes: list[UOp]) -> UOp | None:
    """The gate of the first work-item along lanes (all their ids 0); None without lanes."""
    return functools.reduce(operator.and_, [r < 1 for r in lanes]) if lanes else None


class GroupContext:
    """Per kernel: its work-item ranges, the gate of stores to global memory (group-reduce ids 0), the numbering
    of new ranges (after every existing one) and of LOCAL buffers."""

    def __init__(self, k: UOp, device: str) -> None:
        ranges = [u for u in k.toposort() if u.op is Ops.RANGE]
        self.lanes = _by_idx(ranges, *LANES)
        self.gate = first(_by_idx(ranges, AxisType.GROUP_REDUCE))
        self.next_idx = 1 + max((r.arg.idx for r in ranges), default=-1)
        self.device, self.count = device, 0

    def buffer(self, size: int, dtype: DType) -> UOp:
        self.count += 1
        return UOp.buffer(size, dtype, self.device, AddrSpace.LOCAL, uid=self.count)


def group(ctx: GroupContext, red: UOp) -> UOp | None:
    """Reduce over GROUP_REDUCE ranges -> partials in local memory, Barrier, reduce of the partials."""
    axes = slot_axes(red)
    if axes is None:
        return None
    val, ranges = red.src[0], red.src[1:]
    groups = [r for r in ranges if r.arg.type is AxisType.GROUP_REDUCE]
    rest = [r for r in ranges if r not in groups]
    partial = val.reduce(red.arg.op, *rest) if rest else val
    buf = ctx.buffer(math.prod(_size(r) for r in axes), red.dtype)
    loops = _by_idx(free_ranges(val) - set(ranges), *LOOPS)
    mem = buf.after(UOp(Ops.BARRIER, tuple(loops))) if loops else buf  # the previous iteration's reads are done
    copies = [r for r in axes if r.arg.type is AxisType.UPCAST]
    same = first([r for r in ctx.lanes if r not in axes])  # work-items with equal partials: one of them stores
    slot = mem.index(_slot(axes))
    put = (slot.store(partial, same) if same is not None else slot.store(partial)).end(*copies)
    # one new range per GROUP_REDUCE range, numbered from it: the UPCAST copies of this Reduce share their loop
    finals = {g: UOp.range(g.src[0], ctx.next_idx + g.arg.idx, AxisType.REDUCE) for g in groups}
    read = buf.after(UOp(Ops.BARRIER, (put,))).index(_slot([finals.get(r, r) for r in axes])).load()
    return read.reduce(red.arg.op, *finals.values())


def gate_store(ctx: GroupContext, st: UOp) -> UOp | None:
    """A store to global memory only by the work-items whose group-reduce ids are 0."""
    buf = st.src[0].src[0].memory()
    if ctx.gate is None or buf.op is not Ops.PARAM:
        return None
    if len(st.src) == 2:
        return UOp(Ops.STORE, (*st.src, ctx.gate))
    if ctx.gate in st.src[2].sparents():
        return None
    return UOp(Ops.STORE, (st.src[0], st.src[1], st.src[2] & ctx.gate))


group_reduce = PatternMatcher([
    (UPat(Ops.REDUCE, name="red"), group),
    (UPat(Ops.STORE, name="st"), gate_store),
], name="group reduce")


_FIXED = frozenset({Ops.BARRIER, Ops.BUFFER, Ops.SPECIAL, Ops.PARAM, Ops.DEFINE_VAR, Ops.IF, Ops.ENDIF})
"""Declarations and synchronization: they stay where the linearizer put them (a Barrier must be reached by every
work-item, and OpenCL declares local memory at function scope)."""


def gate_blocks(linear: UOp) -> UOp:
    """Each gate's Stores, with the instructions only they need, under If(gate) ... Endif: the work-items the gate
    turns away skip that work (those of a group reduction skip combining the partials). Where the instructions
    do not form one block (they cross a loop's bounds) the Stores stay gated one by one."""
    instrs = list(linear.src)
    for gate in dict.fromkeys(u.src[2] for u in instrs if u.op is Ops.STORE and len(u.src) == 3):
        instrs = _gate_block(instrs, gate) or instrs
    if instrs == list(linear.src):
        return linear
    blocks = {u.src[0] for u in instrs if u.op is Ops.IF}
    out: dict[UOp, UOp] = {}  # each instruction rebuilt over rebuilt sources: Stores under an If lose their gate
    for u in instrs:
        if u.op is Ops.STORE and len(u.src) == 3 and u.src[2] in blocks:
            out[u] = UOp(Ops.STORE, tuple(out.get(s, s) for s in u.src[:2]))
        else:
            out[u] = u.replace(src=tuple(out.get(s, s) for s in u.src))
    return UOp(Ops.LINEAR, tuple(out[u] for u in instrs))


def _gate_block(instrs: list[UOp], gate: UOp) -> list[UOp] | None:
    users: dict[UOp, list[UOp]] = {}
    for u in instrs:
        for s in u.src:
            users.setdefault(s, []).append(u)
    stores = [u for u in instrs if u.op is Ops.STORE and len(u.src) == 3 and u.src[2] is gate]
    before = set(gate.toposort())  # the gate is computed before the If
    inside = set(stores)
    for u in reversed(instrs):
        if u in inside or u.op in _FIXED or u in before or (u.op is Ops.STORE and not _private(u)):
            continue
        if users.get(u) and all(x in inside for x in users[u]):
            inside.add(u)
    pos = {u: i for i, u in enumerate(instrs)}
    hi = max(pos[u] for u in stores)
    opened: list[int] = []  # the loops (and Ifs) open at the last store: the If goes inside the innermost
    for i, u in enumerate(instrs[:hi]):
        if u.op in (Ops.RANGE, Ops.IF):
            opened.append(i)
        elif u.op in (Ops.END, Ops.ENDIF):
            opened.pop()
    inside = {u for u in inside if pos[u] > (opened[-1] if opened else -1)}  # what is before it stays there
    lo = min(pos[u] for u in inside)
    span = instrs[lo:hi + 1]
    closers = {u.src[1] if u.op is Ops.END else u.src[0]: i for i, u in enumerate(span) if u.op in (Ops.END, Ops.ENDIF)}
    for i, u in enumerate(span):
        if u.op in (Ops.RANGE, Ops.IF):  # a loop (or If) stays whole, on one side of the new If
            if u not in closers or any((x in inside) != (u in inside) for x in span[i:closers[u] + 1]):
                return None
        elif u.op in (Ops.END, Ops.ENDIF) and (u.src[1] if u.op is Ops.END else u.src[0]) not in span:
            return None
        elif u not in inside and any(x in inside for x in u.src):
            return None  # what uses a gated Store (a Barrier after it) cannot move before the If
        elif u.op is Ops.STORE and u not in inside and not _private(u):
            return None  # moved before the If, a store to memory could change what the If's loads read
    iff = UOp(Ops.IF, (gate,))
    return [*instrs[:lo], *(u for u in span if u not in inside), iff, *(u for u in span if u in inside),
            UOp(Ops.ENDIF, (iff,)), *instrs[hi + 1:]]


def _private(store: UOp) -> bool:
    """Whether a Store writes a REG buffer (an accumulator, private to the work-item) or local memory (ordered by
    Barriers, which stay in place)."""
    buf = store.src[0].src[0].memory()
    return buf.op is Ops.BUFFER and buf.arg.addrspace in (AddrSpace.REG, AddrSpace.LOCAL)
