"""Transposed gathers: vectors whose lanes are scalar loads one row apart each (a transposing copy, as matmul
panels of a weight's transpose are: schedule/pack.py) become vector loads along the rows and a network of
two-vector shuffles.

After devectorize, a vector of n lanes that read n rows of a matrix (a column) is a gather: n scalar loads and n
inserts. Where the kernel also holds the next U - 1 columns of the same rows (the heuristic upcasts the axis along
the rows, `_transposed_tile`), the U gathers together read a U x n block row by row: n vector loads of U lanes,
then the block transposed by shuffles, each lane of its vectors taken from one of two vectors (one instruction:
vpermt2ps on AVX-512). The loads are concatenated pairwise until they are n wide (each holding n / U rows), then
log2(U) rounds split each pair's columns in halves, so each vector ends as one column of all n rows, in row order:
for n = 16, U = 8, 32 shuffles for 128 lanes where the gathers took 128 scalar loads and inserts (the GPT's weight
panels ran 1.7-1.9x faster from the L2, 1.5x from the L3). The vector loads read exactly the elements the gathers
read.
"""

from __future__ import annotations

from collections.abc import Callable

from uopviz.codegen.lanes import LANE_WIDTHS, iota
from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import Ops, UOp
from uopviz.uop.symbolic import affine

Cell = tuple[int, int]  # (row, column) of the block: what a lane of a shuffled vector holds
Terms = tuple[frozenset[tuple[UOp, int]], ...]  # each lane's address but its constant


def _column(g: UOp) -> tuple[UOp, tuple[int, ...], Terms] | None:
    """(buffer, each lane's constant, each lane's other terms) of a gather of plain loads from one buffer, else
    None."""
    if g.op is not Ops.STACK or not all(x.op is Ops.LOAD and len(x.src) == 1 and x.src[0].op is Ops.INDEX
                                        and not x.src[0].shape for x in g.src):
        return None
    bufs = {x.src[0].src[0] for x in g.src}
    if len(bufs) != 1:
        return None
    sums = [affine(x.src[0].src[1]) for x in g.src]
    return bufs.pop(), tuple(c for _, c in sums), tuple(frozenset(t.items()) for t, _ in sums)


def _shuffle(a: UOp, b: UOp, picks: list[tuple[UOp, int]]) -> UOp:
    """The vector of the picked lanes (each of a or b), lanes taken as Indexes even of a Stack: a shuffle is not
    folded into the lanes it picks from (the network would become one gather of n vectors' lanes again)."""
    assert all(v is a or v is b for v, _ in picks)
    return UOp(Ops.STACK, tuple(UOp(Ops.INDEX, (v, UOp.const(dtypes.index, i))) for v, i in picks))


def _transposed(loads: list[UOp], width: int) -> list[UOp]:
    """Columns 0..width-1 of the rows `loads` (each a vector of `width` lanes), each a vector of len(loads) lanes
    in row order, by two-vector shuffles."""
    n = len(loads)
    vecs: list[tuple[UOp, list[Cell]]] = [(v, [(j, i) for i in range(width)]) for j, v in enumerate(loads)]
    while len(vecs[0][1]) < n:  # concatenate neighbours: rows stay in order
        vecs = [(_shuffle(a, b, [(a, i) for i in range(len(ca))] + [(b, i) for i in range(len(cb))]), ca + cb)
                for (a, ca), (b, cb) in zip(vecs[::2], vecs[1::2])]
    while len({c for _, c in vecs[0][1]}) > 1:  # split each pair's columns in halves, lanes in (column, row) order
        sets: dict[frozenset[int], list[tuple[UOp, list[Cell]]]] = {}
        for v, cells in vecs:  # pairs hold the same columns, of other rows
            sets.setdefault(frozenset(c for _, c in cells), []).append((v, cells))
        vecs = []
        for same in sets.values():
            half = len(same) // 2
            for (a, ca), (b, cb) in zip(same[:half], same[half:]):
                cols = sorted({c for _, c in ca})
                at = {cell: (v, i) for v, cells in ((a, ca), (b, cb)) for i, cell in enumerate(cells)}
                for part in (cols[:len(cols) // 2], cols[len(cols) // 2:]):
                    picked = sorted((cell for cell in at if cell[1] in part), key=lambda rc: (rc[1], rc[0]))
                    vecs.append((_shuffle(a, b, [at[cell] for cell in picked]), picked))
    by_column = {cells[0][1]: v for v, cells in vecs}
    assert all(cells == [(j, cells[0][1]) for j in range(n)] for _, cells in vecs)
    return [by_column[i] for i in range(width)]


def transpose_gathers(sink: UOp, storable: Callable[[DType, int], bool]) -> UOp:
    """sink with each set of U gathers that read U neighbouring columns of the same n rows read as n vector loads
    and shuffles, where U <= n and vectors of U and of n lanes of their dtype are the target's (`storable`); a
    buffer the kernel also stores to is left alone (its loads keep their place among the stores)."""
    nodes = sink.toposort()
    stored = {u.src[0].src[0] for u in nodes if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}
    groups: dict[tuple[UOp, Terms], dict[tuple[int, ...], UOp]] = {}
    for u in nodes:
        if u.op is Ops.STACK and storable(u.dtype, len(u.src)) and (col := _column(u)) is not None and \
                col[0] not in stored:
            groups.setdefault((col[0], col[2]), {})[col[1]] = u
    mapping: dict[UOp, UOp] = {}
    for by_consts in groups.values():
        for consts in sorted(by_consts):
            n, dt = len(consts), by_consts[consts].dtype
            if by_consts[consts] in mapping:
                continue
            for w in (w for w in reversed(LANE_WIDTHS) if w <= n and storable(dt, w)):
                cols = [by_consts.get(tuple(c + i for c in consts)) for i in range(w)]
                if all(g is not None and g not in mapping for g in cols):
                    first = by_consts[consts]
                    loads = [x.replace(src=(UOp(Ops.INDEX, (x.src[0].src[0], UOp(Ops.ADD, (x.src[0].src[1],
                                                                                       iota(w))))),))
                             for x in first.src]
                    mapping.update(zip(cols, _transposed(loads, w)))  # type: ignore[arg-type]  # none is None
                    break
    return sink.substitute(mapping) if mapping else sink
