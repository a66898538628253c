"""Row fusion: a reduction that is broadcast back over the row it reduced (softmax's max and sum, layernorm's mean
and variance, logsumexp) stays in its consumer's kernel when the row fits in cache.

The kernel split stores every Reduce that its kernel's output reads other than elementwise, because a broadcast
reduction would otherwise be recomputed for every element that reads it. A row reduction is the exception: its
value depends only on the row (the output's other axes), so in the fused kernel it is computed once per row,
before the row's loop (Linearize hoists it), and the row is read from memory once, then again from cache, and
written once, instead of one kernel and one pass over memory per reduction. This pass marks such Reduces (tag
`ROW`), and the split leaves marked ones fused.

A Reduce is a row reduction when every path from it to a stored value goes only through elementwise ops, markers
(Contiguous, Detach), Expands of its reduced axes, Reshapes that add or remove axes of size 1, and further Reduces
over the same axes (which the rule checks in turn), its reduced axes are the innermost, and its row (the reduced
elements of its input) is at most `ROW_BYTES`. Not on a GPU (`Target.simt`): there a row's outputs are spread
over threads, which would each compute the row's reductions again (softmax 4096x4096 on an H200: 1.24 ms fused,
BEAM's best, against 0.12 ms as a kernel per reduction), so each reduction is a kernel of its own, shared by a
work-group.
"""

from __future__ import annotations

from uopviz.runtime import device as devices
from uopviz.schedule.program import program_order
from uopviz.uop.ops import GroupOp, Ops, UOp, prod

ROW = "row"
"""The tag of a Reduce that stays fused in its row's kernel."""
ROW_BYTES = 32 * 1024
"""The largest row kept in one kernel: its passes after the first read it from the first-level cache."""


def fuse_rows(fn: UOp) -> UOp:
    """Function fn with its row reductions tagged ROW (unchanged when it has none)."""
    body = fn.src[0]
    order = [u for u in program_order(body) if u.op is not Ops.FUNCTION]
    users: dict[UOp, list[UOp]] = {}
    for u in order:
        for s in u.src:
            users.setdefault(s, []).append(u)
    stored = set(body.src) | {u for u in order if u.op is Ops.CONTIGUOUS}
    rows: set[UOp] = set()
    ends: set[UOp] = set()
    for u in order:
        if _fits(u) and (points := _row_ends(u, users, stored)) is not None:
            rows.add(u)
            ends |= points
    if not rows:
        return fn
    new: dict[UOp, UOp] = {}
    for u in order:  # sources first, so a row reduction over another keeps both tags
        new[u] = u.replace(src=tuple(new.get(s, s) for s in u.src), tag=ROW if u in rows else u.tag)
        if u in ends:
            new[u] = UOp(Ops.CONTIGUOUS, (new[u],))
    return fn.replace(src=(new[body], *fn.src[1:]))


def untag(value: UOp) -> UOp:
    """value without ROW tags: once the split has made its kernels, the tags have done their work, and a kernel is
    the same kernel (one compile, one tuning key) whichever way it was chosen."""
    if not any(u.tag == ROW for u in value.toposort()):
        return value
    new: dict[UOp, UOp] = {}
    for u in value.toposort():
        new[u] = u.replace(src=tuple(new[s] for s in u.src), tag=None if u.tag == ROW else u.tag)
    return new[value]


def _fits(u: UOp) -> bool:
    if u.op is not Ops.REDUCE or u.tag is not None or u.arg.op not in (Ops.ADD, Ops.MAX):
        return False
    if (target := devices.target_of(u.device)) is not None and target.simt:
        return False  # a GPU spreads a row's outputs over threads: each would compute the row's reductions again
    src, axes = u.src[0], set(u.arg.axes)
    inner = [i for i, n in enumerate(src.shape) if n != 1 and i > min(axes)]
    if not all(i in axes for i in inner):  # the rows must be the innermost axes: else a row is not a loop's body
        return False
    row = prod(src.shape[a] for a in axes)
    return isinstance(row, int) and row > 1 and row * src.dtype.itemsize <= ROW_BYTES


def _in_row(u: UOp, v: UOp, axes: set[int]) -> bool:
    """Whether user v of u keeps to u's rows: elementwise, an Expand of the row axes, a Reduce over them."""
    if v.op is Ops.EXPAND:
        return all(i in axes for i, (a, b) in enumerate(zip(u.shape, v.shape)) if a != b)
    if v.op is Ops.REDUCE:
        return set(v.arg.axes) == axes
    if v.op is Ops.RESHAPE:  # only adding or removing axes of size 1 (logsumexp's squeeze)
        return _squeezed(v.shape) == _squeezed(u.shape)
    return v.op in GroupOp.Elementwise or v.op in GroupOp.Marker  # a Detach (softmax's max) computes nothing


def _squeezed(shape: tuple[int | UOp, ...]) -> tuple[int | UOp, ...]:
    return tuple(n for n in shape if n != 1)


def _row_ends(red: UOp, users: dict[UOp, list[UOp]], stored: set[UOp]) -> set[UOp] | None:
    """None unless every path from red to a stored value keeps to red's rows (see the module's doc); else the
    values where such a path leaves the rows (a full row used otherwise, e.g. by a matmul: attention's
    probabilities), which are then stored, so the row kernel ends there and the rest reads its result."""
    axes = set(red.arg.axes)
    narrow, full = _squeezed(red.shape), _squeezed(red.src[0].shape)
    todo, seen, ends = [red], set(), set()
    while todo:
        u = todo.pop()
        if u in seen:
            continue
        seen.add(u)
        if u in stored and u is not red:
            continue
        if _squeezed(u.shape) not in (narrow, full):
            return None
        nexts = []
        for v in users.get(u, []):
            if _in_row(u, v, axes):
                nexts.append(v)
            elif v.op is not Ops.TUPLE:
                if _squeezed(u.shape) != full or u is red:
                    return None
                ends.add(u)
        todo += nexts
    return ends
