"""Stored pads: a padded value that a reduction reads many times is computed once, into a buffer of its own.

A Pad fused into a kernel is a guard on every read: each load checks that its index falls inside the value and
reads zero outside it. Inside a reduction that re-reads the same elements over and over (a convolution reads
every pixel of its padded input once per filter tap and per output channel), those guards sit in the innermost
loop, where they cost more than the arithmetic, and they break the loads that the tile's vector spans into
per-lane gathers. Storing the padded value first (one small kernel, one pass over it) leaves the reduction plain
loads of memory. The pass stores a Pad when the Reduce that reads it reads at least `REUSE` elements per element
of the padded value, and the padded value reads memory (a pad of constants is cheaper computed than loaded). The
copy's own kernel is one guarded load per element; on a CPU the heuristic copies its rows in long runs
(codegen/opt/heuristic.py `_pad_runs`), so the guards fold away but at the edges. Pads that are added (a sum of
pads: the gradient of slices of one value, as the GPT's fused q, k, v projection's, dq + dk + dv each padded to the
width of all three) are stored as their sum, one buffer the reduction reads once per element: stored one by one,
each pad wrote its zeros in full and the reduction read three buffers and added them for each multiply-add.
"""

from __future__ import annotations

from uopviz.schedule.program import program_order, stored
from uopviz.uop.ops import GroupOp, Ops, UOp, all_ints, prod

REUSE = 8
"""The fewest reads per element of the padded value, by the Reduce reading it, for the Pad to be stored."""
_THROUGH = GroupOp.Movement | GroupOp.Elementwise
"""The ops a Reduce reads a Pad through in the same kernel (anything else ends the kernel or is a leaf)."""


def store_pads(fn: UOp) -> UOp:
    """Function fn with each Pad that a reduction re-reads at least REUSE times made Contiguous (stored); fn
    unchanged when there is none."""
    order = program_order(fn.src[0])
    pads = {p for u in order if u.op is Ops.REDUCE for p in _reread_pads(u)}
    return stored(fn, order, pads)


def _reread_pads(red: UOp) -> list[UOp]:
    """The Pads (or sums of Pads) that Reduce red reads in its own kernel (through movement and elementwise ops) and
    re-reads at least REUSE times per element, and that read memory."""
    reads = _size(red.src[0].shape)
    if reads is None:
        return []
    out, todo, seen = [], [red.src[0]], set()
    while todo:
        u = todo.pop()
        if u in seen or u.op not in _THROUGH:
            continue
        seen.add(u)
        if _sum_of_pads(u) and (n := _size(u.shape)) and reads >= REUSE * n and _reads_memory(u):
            out.append(u)
            continue
        todo += u.src
    return out


def _sum_of_pads(u: UOp) -> bool:
    """Whether u is a Pad, or an Add of sums of Pads."""
    return u.op is Ops.PAD or (u.op is Ops.ADD and all(_sum_of_pads(s) for s in u.src))


def _size(shape: tuple[int | UOp, ...]) -> int | None:
    """The element count of a shape of constant sizes (None for a symbolic one: its reuse is not known)."""
    return prod(shape) if all_ints(shape) else None


def _reads_memory(u: UOp) -> bool:
    return any(s.op in (Ops.PARAM, Ops.BUFFER) for s in u.toposort())
