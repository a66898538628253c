"""Epilogue loops: the work a tiled reduction kernel does on each output after its sums (a fused activation's
derivative) runs in a loop over the register tile's outputs instead of once per copy.

A matmul's register tile is UPCAST axes: Expand copies the kernel's body for every index of the tile's rows and
column vectors, and so every op of an epilogue too. A cheap epilogue (a bias, a ReLU) costs nothing copied, but
the GPT step's MLP backward, dy.Wᵀ times the exact GELU's derivative (an erf and an exp per output, some 110
vector ops), was copied 16 times in an 8-row tile: the heuristic's code budget (codegen/opt/size.py) stopped the
tile at 4 rows, which ran 1.25 ms where 8 rows run 1.02 ms. Here each tile's sums are stored, after their loop,
into a REG array of the tile (one slot per copy and lane), and a loop over the tile's copies (LOOP ranges in
place of the UPCAST ones, the lane axes kept as vectors) loads them and computes the epilogue once per vector of
outputs: the code has one epilogue whatever the tile.

A store is looped when its value sums over Reduces, its End closes UPCAST or UNROLL ranges that are copies (not
lane axes, codegen/expand.py) and that its sums vary with (a tile of sums: a row kernel's copies along a row it
summed before, as softmax's, share one sum and are left to the row cache), what it computes from the sums contains
an expensive op (codegen/rowcache.py's EXPENSIVE: decomposed into tens of instructions, where the tile's store and
load cost two), and the tile's array fits the target's private memory (`Target.private_memory`; 0 on GPUs, whose
registers would spill such an array, keeps the pass off). The pass runs just before Expand, and the heuristic's code
size counts such an epilogue once (`looped_epilogues`, the one rule both read).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

from uopviz.codegen.expand import EXPANDED
from uopviz.codegen.group_reduce import free_ranges
from uopviz.codegen.rowcache import EXPENSIVE
from uopviz.dtype import dtypes
from uopviz.uop.ops import AddrSpace, AxisType, Ops, UOp


class Epilogue(NamedTuple):
    """A store to loop: its End chain (outermost first), the copy ranges and lane ranges it closes, the sums it
    computes from, and the epilogue's nodes (what the store computes from the sums, the store included)."""

    end: UOp
    store: UOp
    outer: tuple[UOp, ...]
    copies: tuple[UOp, ...]
    lanes: tuple[UOp, ...]
    sums: tuple[UOp, ...]
    nodes: frozenset[UOp]

    @property
    def tile_bytes(self) -> int:
        """The bytes of the tile's arrays: a slot per copy and lane for each sum."""
        per = math.prod(_size(r) for r in (*self.copies, *self.lanes))
        return per * sum(s.dtype.itemsize for s in self.sums)


def looped_epilogues(sink: UOp, lanes: frozenset[UOp], private_memory: int) -> list[Epilogue]:
    """The stores of an optimized kernel (before Expand) whose epilogues `loop_epilogues` loops, on a target with
    `private_memory` bytes for per-call arrays, where `lanes` are the kernel's lane axes (expand.lane_axes)."""
    if private_memory <= 0:
        return []
    out = []
    for end in _store_ends(sink):
        chain, store = _chain(end)
        if store.op is not Ops.STORE:
            continue
        copies = tuple(r for r in chain if r.arg.type in EXPANDED and r not in lanes)
        nodes, sums = _epilogue(store)
        tiled = frozenset().union(*(free_ranges(s) for s in sums))
        if not copies or not set(copies) <= tiled or not any(u.op in EXPENSIVE and u.dtype != dtypes.index
                                                                for u in nodes):
            continue
        e = Epilogue(end, store, tuple(r for r in chain if r.arg.type not in EXPANDED), copies,
                     tuple(r for r in chain if r in lanes), sums, frozenset(nodes))
        if e.tile_bytes <= private_memory:
            out.append(e)
            private_memory -= e.tile_bytes
    return out


def loop_epilogues(sink: UOp, lanes: frozenset[UOp], private_memory: int) -> UOp:
    """sink with each store of `looped_epilogues` in two steps: its sums stored into the tile's arrays (the copies
    and lanes as they were), then a loop over the copies computing the epilogue from them."""
    plans = looped_epilogues(sink, lanes, private_memory)
    if not plans:
        return sink
    nodes = sink.toposort()
    uid = 1 + max((u.arg.uid for u in nodes if u.op is Ops.BUFFER), default=0)
    idx = 1 + max(u.arg.idx for u in nodes if u.op is Ops.RANGE)
    mapping: dict[UOp, UOp] = {}
    for e in plans:
        loops = tuple(UOp.range(r.src[0], idx + k, AxisType.LOOP) for k, r in enumerate(e.copies))
        idx += len(loops)
        tiles = [UOp.buffer(math.prod(_size(r) for r in (*e.copies, *e.lanes)), s.dtype, s.device, AddrSpace.REG,
                            uid=uid + k) for k, s in enumerate(e.sums)]
        uid += len(tiles)
        fill = UOp(Ops.GROUP, tuple(t.index(_slot(e.copies, e.lanes)).store(s)
                                    for t, s in zip(tiles, e.sums, strict=True))).end(*e.copies, *e.lanes)
        moved = dict(zip(e.copies, loops, strict=True))
        moved.update({s: t.after(fill).index(_slot(loops, e.lanes)).load() for t, s in zip(tiles, e.sums, strict=True)})
        looped = e.store.substitute(moved).end(*loops, *e.lanes)
        mapping[e.end] = UOp(Ops.GROUP, (fill, looped)).end(*e.outer) if e.outer else UOp(Ops.GROUP, (fill, looped))
    return sink.substitute(mapping)


def _store_ends(sink: UOp) -> Iterator[UOp]:
    """The outermost Ends of the kernel's stores: the Sink's sources (through Groups)."""
    todo = list(sink.src)
    while todo:
        u = todo.pop()
        if u.op is Ops.GROUP:
            todo += u.src
        elif u.op is Ops.END:
            yield u


def _chain(end: UOp) -> tuple[tuple[UOp, ...], UOp]:
    """The ranges an End chain closes, outermost first, and what it closes them over."""
    ranges = []
    while end.op is Ops.END:
        ranges.append(end.src[1])
        end = end.src[0]
    return tuple(ranges), end


def _epilogue(store: UOp) -> tuple[set[UOp], tuple[UOp, ...]]:
    """The nodes a store's value computes from its Reduces (not inside them), the store included, and those
    Reduces, in the order met."""
    seen: set[UOp] = set()
    sums: list[UOp] = []
    todo = [store.src[1], *store.src[2:]]
    while todo:
        u = todo.pop()
        if u in seen:
            continue
        seen.add(u)
        if u.op is Ops.REDUCE:
            sums.append(u)
            continue
        todo += u.src
    return {u for u in seen if u.op is not Ops.REDUCE} | {store}, tuple(sums)


def _slot(copies: tuple[UOp, ...], lanes: tuple[UOp, ...]) -> UOp:
    """A tile's slot: row-major over the copies, then the lanes."""
    rs = (*copies, *lanes)
    flat = rs[0]
    for r in rs[1:]:
        flat = flat * r.src[0] + r
    return flat


def _size(r: UOp) -> int:
    return int(r.src[0].arg.value)
