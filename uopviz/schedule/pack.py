"""Packing: a matmul operand whose rows alias in the first-level cache is copied into panels before the matmul.

A CPU matmul kernel (the heuristic's tile: a few vectors of B's row k times 8 broadcast elements of A, summed over
k) walks the column strip of B that its tile covers down all K rows, once for every block of A's rows. That strip
is reused from cache only if its rows can stay there. Rows one stride apart fall into `Cache.sets_touched(stride)`
sets; when the stride is a multiple of a large power of two (a 1024-float row is 4 KiB, the L1's whole set span)
that is one set, whose ways hold a dozen rows, and the strip streams from the last-level cache for every block
of A (gemm 1024 ran at a third of the speed of gemm 1000). Copying B into panels of one vector's width (each
panel the K rows of 16 columns, contiguous) makes the walk sequential: every line of the copy is used whole and
no two rows compete for a set. The copy is its own small kernel (a Contiguous); the matmul then reads the panels
through ordinary index math, the same tile as before.

An operand is packed when all of these hold (`_packs`): the Reduce is a sum over one axis of a product of two
broadcast values, each broadcast along an axis the other varies with (a matmul, batched or not); the operand is
the one the output's innermost axis runs along (B, read in vectors; the summed axis may come after it), a view
of memory or an elementwise value of views (attention's k plus the qkv projection's bias: the copy computes it once
an element, where the matmul computed it again for every block of A's rows; the GPT's q @ k.T and dY @ V.T ran
131 and 122 us on one core as 16-load gathers, 79 and 73 us from panels, plus 15 and 12 us for the copies) (A
may be any value: the GPT's MLP projection multiplies GELU(x W1) by W2's transpose, whose gathers made it 10x
slower than a plain gemm); it is re-read for at least REUSE
rows of the other operand, which is what pays for the copy (about two passes over it); and either it is read
along that axis with a stride (a transposed B, as attention's `q @ k.T`: each vector of the tile would be a
gather of 16 loads, where the panels give one load), or its rows (the larger of its strides along that axis and
along the summed one) fall in at most ALIASED_SETS of the target's L1 sets and it does not fit in the L1
itself. Targets without an `l1` description (GPUs, the interpreter) keep the kernel as it is. A's rows alias too,
but the tile reads only 8 of them at a time, which the ways hold: packing A measured no gain.
"""

from __future__ import annotations

import itertools
from typing import Any

from uopviz.runtime import device as devices
from uopviz.schedule.program import program_order
from uopviz.uop.ops import GroupOp, Ops, UOp, all_ints, prod

ALIASED_SETS = 4
"""Rows that fall in at most this many of the L1's sets alias: a stride that is a multiple of a quarter of the set
span (1 KiB on a 4 KiB span) or more."""
REUSE = 64
"""The fewest rows of the other operand (its reads of the packed one: one per 8-row tile block) that pay for the
copy: gemm 64x1024x1024 gained 1.6x, 16x1024x1024 lost."""

View = tuple[tuple[int, ...], tuple[int, ...], UOp]  # shape, strides in elements, the memory read (`MEMORY`)


def pack(fn: UOp) -> UOp:
    """Function fn with every aliasing matmul operand read from a packed copy (unchanged when there is none)."""
    body = fn.src[0]
    packs = {u: found for u in program_order(body) if (found := _packs(u)) is not None}
    if not packs:
        return fn
    # only the packed matmul reads the copy: its broadcast of the view is also what the gradient's matmul of the
    # other operand reads (summed along the other axis), which would read panels laid out for this one as gathers.
    # The copy is made of the operand as rebuilt: a computed one may read another packed matmul's result
    copies: dict[tuple[UOp, int], UOp] = {}  # each operand packed along an axis: one copy, whichever matmuls read it
    out: dict[UOp, UOp] = {}
    for u in body.toposort():
        src = tuple(out[s] for s in u.src)
        if u in packs:
            b, width, axis = packs[u]
            new = out[b]
            if (key := (new.src[0], axis)) not in copies:
                copies[key] = panels(new.src[0], width, axis)
            copy = new.replace(src=(copies[key], *new.src[1:]))
            src = (src[0].replace(src=tuple(copy if s is new else s for s in src[0].src)), *src[1:])
        out[u] = u if src == u.src else u.replace(src=src)
    return fn.replace(src=(out[body], *fn.src[1:]))


def panels(x: UOp, width: int, axis: int = -1) -> UOp:
    """x (its axis `axis` N, the others in order R rows) read from a copy laid out as ceil(N/width) panels of R x
    width, N padded with zeros to a multiple of width; the same shape and values as x. The copy keeps the rows'
    axes apart (their product is the same layout): merged into one axis, a view's rows (attention's k, rows of
    batch, head and head dim) read `r % 128 + (r // 128) * stride`, a loop no load moves along by one element, and
    the copy gathered 16 loads a vector where its head dim is read as rows of vectors and transposed by shuffles
    (codegen/transpose.py: the GPT step's E_L4_L1024_u16 10.9 -> 5.4 us on one core)."""
    axis %= len(x.shape)
    order = (*(i for i in range(len(x.shape)) if i != axis), axis)
    moved = x.permute(order) if axis != len(x.shape) - 1 else x
    *lead, n = moved.shape
    r, wide = len(lead), -(-n // width) * width
    padded = moved.pad((0,) * (r + 1), (*lead, wide)) if wide != n else moved
    copy = UOp(Ops.CONTIGUOUS, (padded.reshape((*lead, wide // width, width)).permute((r, *range(r), r + 1)),))
    back = copy.permute((*range(1, r + 1), 0, r + 1)).reshape((*lead, wide))
    if wide != n:
        back = back.shrink((0,) * (r + 1), (*lead, n))
    return back.permute(tuple(order.index(i) for i in range(len(order)))) if moved is not x else back


def _packs(u: UOp) -> tuple[UOp, int, int] | None:
    """The operand of matmul-shaped Reduce u to read packed (its broadcast of a view), its panels' width and the
    axis they run along (the output's innermost: the last but the summed one, which may be last, as in attention's
    backward dP = dY @ V.T), else None."""
    if u.op is not Ops.REDUCE or u.tag is not None or u.arg.op is not Ops.ADD or len(u.arg.axes) != 1:
        return None
    prodn = u.src[0]
    shape = tuple(d for d in prodn.shape if isinstance(d, int) and d > 0)  # concrete and non-empty, or no packing
    if prodn.op is not Ops.MUL or len(shape) != len(prodn.shape) or len(shape) < 3:
        return None
    k = u.arg.axes[0]
    inner = len(shape) - (2 if k == len(shape) - 1 else 1)
    if shape[inner] == 1:
        return None
    x, y = prodn.src
    if x.op is not Ops.EXPAND or y.op is not Ops.EXPAND:
        return None
    a, b = (x, y) if x.src[0].shape[inner] == 1 else (y, x)  # A is broadcast along the tile's columns
    if (vb := _operand(b)) is None or not _broadcast_matmul(a.src[0].shape, vb, k, inner, shape):
        return None
    bshape, bstrides, mem = vb
    target = devices.target_of(mem.device) if isinstance(mem.device, str) else None
    item = mem.dtype.itemsize
    row = max(abs(bstrides[k]), abs(bstrides[inner])) * item
    reuse = prod(shape[i] for i in range(len(shape)) if bshape[i] == 1 and i != k)
    if target is None or (cache := target.l1) is None or reuse < REUSE:
        return None
    gathered = abs(bstrides[inner]) != 1  # a transposed B: the tile's vector of B's row k is a gather
    if not gathered and (cache.sets_touched(row) > ALIASED_SETS or prod(bshape) * item <= cache.size):
        return None
    return b, max(target.vectors, default=0) or cache.line // item, inner  # panels one widest vector wide


def _broadcast_matmul(ash: tuple[Any, ...], vb: View, k: int, inner: int, shape: tuple[int, ...]) -> bool:
    """Whether A (any value, of shape ash before its broadcast) and B (a view) are a matmul's operands: both vary
    with the summed axis k, B with the innermost output axis and A not, and A varies with some output axis that B
    is broadcast along (the rows B is re-read for)."""
    bsh, bst, _ = vb
    if not (ash[k] == shape[k] > 1 and bst[k] and bst[inner] and ash[inner] == 1):
        return False
    return any(ash[i] == shape[i] > 1 and bsh[i] == 1 for i in range(len(shape)) if i not in (k, inner))


def _operand(x: UOp) -> View | None:
    """(shape, strides, memory) of Expand(v) where v is a view of memory, or an elementwise value of such views
    (`_views`), that a stride describes: the view that varies with the most axes, a strided one first (the read
    that decides whether panels pay); None for anything else. A computed B (attention's k plus the qkv bias) is
    computed once into the panels, where the matmul computed it again for every block of A's rows."""
    if x.op is not Ops.EXPAND or (views := _views(x.src[0])) is None or not views:
        return None
    return max(views, key=lambda vw: (sum(1 for s in vw[1] if s), sum(1 for s in vw[1] if abs(s) > 1)))


MEMORY = (Ops.PARAM, Ops.CONTIGUOUS, Ops.REDUCE)
"""What a kernel reads from memory: a realized buffer, a stored value, a Reduce the kernel split stores (row-major
in their shapes; a row reduction, tagged, is computed in its reader's kernel: not memory)."""


def _views(v: UOp) -> list[View] | None:
    """The views of memory (Reshapes, Permutes and Shrinks of a MEMORY node) elementwise value v reads, in v's
    shape, each that a stride describes; reads through a broadcast or a pad (a bias, a constant) have none and are
    left out. None where v holds anything else (a row reduction, a call) or a view no stride describes."""
    out: list[View] = []
    todo: list[tuple[UOp, tuple[UOp, ...] | None]] = [(v, ())]
    while todo:
        u, chain = todo.pop()
        if u.op in (Ops.RESHAPE, Ops.PERMUTE, Ops.SHRINK):
            todo.append((u.src[0], None if chain is None else (*chain, u)))
        elif u.op in (Ops.EXPAND, Ops.PAD, Ops.FLIP):
            todo.append((u.src[0], None))
        elif u.op in GroupOp.Elementwise:
            todo += [(s, chain) for s in u.src]
        elif u.op in MEMORY and (u.op is not Ops.REDUCE or u.tag is None):
            if chain:
                if (view := _strided(u, chain)) is None:
                    return None
                out.append(view)
        elif u.op is not Ops.CONST:
            return None
    return out


def _strided(mem: UOp, chain: tuple[UOp, ...]) -> View | None:
    """(shape, strides, mem) of memory node mem read through chain (its movements, outermost first); None where no
    stride describes it."""
    shape = mem.shape  # a realized buffer's Param is flat; a called function's has its argument's shape
    if not all_ints(shape):
        return None
    strides = tuple(prod(shape[i + 1:]) for i in range(len(shape)))  # row-major
    for m in reversed(chain):
        new = m.shape
        if not all_ints(new) or not all(d > 0 for d in (*shape, *new)):
            return None
        if m.op is Ops.RESHAPE:
            got = _reshaped(shape, strides, new)
            if got is None:
                return None
            strides = got
        elif m.op is Ops.PERMUTE:
            strides = tuple(strides[i] for i in m.arg)
        shape = new
    return shape, strides, mem


def _reshaped(shape: tuple[int, ...], strides: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides of a view reshaped to `new` without copying, or None where its elements are not evenly spaced
    along some new axis: groups of old and new axes with equal products, each old group contiguous."""
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    dims = [i for i, n in enumerate(new) if n != 1]
    out = [0] * len(new)
    i = j = 0
    while i < len(old) or j < len(dims):
        if i == len(old) or j == len(dims):
            return None
        group, news, have, want = [old[i]], [dims[j]], old[i][0], new[dims[j]]
        i, j = i + 1, j + 1
        while have != want:
            if have < want and i < len(old):
                group.append(old[i])
                have, i = have * old[i][0], i + 1
            elif have > want and j < len(dims):
                news.append(dims[j])
                want, j = want * new[dims[j]], j + 1
            else:
                return None
        if any(s != s2 * n2 for (_, s), (n2, s2) in itertools.pairwise(group)):
            return None
        step = group[-1][1]
        for d in reversed(news):
            out[d], step = step, step * new[d]
    return tuple(out)
