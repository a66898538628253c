"""Rangeify: a kernel's Tensor-level value, indexed by its output ranges, broken down to scalar code.

A kernel starts as `Store(out.index(flat(ranges)), Index(T, *ranges))`. The rules here push each Index
through T's ops until only scalar arithmetic over Loads of buffers is left: movement ops become index
arithmetic (Reshape: flatten and unflatten; Permute: reorder; Expand: 0 on broadcast axes; Shrink: offset;
Flip: n-1-i; Pad: a validity mask, with the index clamped so the masked read stays in bounds), elementwise ops
apply to indexed sources, and a Reduce over axes becomes a Reduce over fresh REDUCE ranges.

`collapse` then removes reductions whose closed form is known: a range the reduced value does not use, and a
sum of a value masked to an interval of the range (what SPEC's prefix_sum makes of arange), so arange costs
O(n), not O(n^2). It also removes empty ranges (bound 0) whole, before anything else could drop them from a
body that then runs once: a reduction over one is its identity, a loop over one does nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import AxisType, GroupOp, Ops, UOp, prod
from uopviz.uop.pattern import PatternMatcher, UPat

BUFFERS = frozenset({Ops.PARAM, Ops.BUFFER})


class RangeCounter:
    """Hands out the idx of each new Range of one kernel (the output ranges took 0..k-1)."""

    def __init__(self, start: int) -> None:
        self.next = start

    def new(self, bound: int | UOp, type: AxisType) -> UOp:
        if isinstance(bound, int) and bound == 1:
            return UOp.const(dtypes.index, 0)
        self.next += 1
        return UOp.range(bound, self.next - 1, type)


def idx0() -> UOp:
    return UOp.const(dtypes.index, 0)


def flatten(idx: Sequence[UOp], shape: Sequence[int | UOp]) -> UOp:
    """The row-major offset of an index tuple into `shape`."""
    out, stride = idx0(), 1
    for i, s in zip(reversed(idx), reversed(shape)):
        if not (isinstance(s, int) and s == 1):
            out = out + i * stride if not (isinstance(stride, int) and stride == 1) else out + i
        stride = stride * s
    return out


def unflatten(flat: UOp, shape: Sequence[int | UOp]) -> list[UOp]:
    """The index tuple of a row-major offset into `shape` (size-1 axes get 0)."""
    out: list[UOp] = []
    stride: int | UOp = 1
    for k in range(len(shape) - 1, -1, -1):
        s = shape[k]
        if isinstance(s, int) and s == 1:
            out.append(idx0())
            continue
        q = flat if isinstance(stride, int) and stride == 1 else flat // stride
        out.append(q if k == 0 else q % s)
        stride = stride * s
    return out[::-1]


def _static(x: UOp) -> list[int | UOp]:
    """A shape source (Stack of index scalars) as ints where constant."""
    return [s.arg.value if s.op is Ops.CONST else s for s in x.src]


_SCALARS = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.BIND, Ops.RANGE, Ops.SPECIAL})


def _index(x: UOp, idx: Sequence[UOp]) -> UOp:
    """Index x by idx; a scalar leaf is its own value at every index, other shape-() values are still indexed
    (with no indices) so that the rules break them down too."""
    if x.op in _SCALARS:
        return x
    return UOp(Ops.INDEX, (x,)) if x.shape == () else UOp(Ops.INDEX, (x, *idx))


def _reshape(ix: UOp, x: UOp) -> UOp:
    src, idx = x.src[0], ix.src[1:]
    flat = flatten(idx, x.shape)
    if src.op in BUFFERS:
        return src.index(flat).load()
    return _index(src, unflatten(flat, src.shape))


def _permute(ix: UOp, x: UOp) -> UOp:
    new: list[UOp] = [idx0()] * len(x.arg)
    for k, p in enumerate(x.arg):
        new[p] = ix.src[1 + k]
    return _index(x.src[0], new)


def _expand(ix: UOp, x: UOp) -> UOp:
    src = x.src[0]
    new = [idx0() if (isinstance(a, int) and a == 1) and not (isinstance(b, int) and b == 1) else i
           for i, a, b in zip(ix.src[1:], src.shape, x.shape)]
    return _index(src, new)


def _shrink(ix: UOp, x: UOp) -> UOp:
    offs = _static(x.src[1])
    return _index(x.src[0], [i if isinstance(o, int) and o == 0 else i + o for i, o in zip(ix.src[1:], offs)])


def _flip(ix: UOp, x: UOp) -> UOp:
    return _index(x.src[0], [(s - 1) + i * -1 if f else i for i, s, f in zip(ix.src[1:], x.shape, x.arg)])


def _pad(ix: UOp, x: UOp) -> UOp:
    src = x.src[0]
    valid: UOp | None = None
    new: list[UOp] = []
    for i, o, s, t in zip(ix.src[1:], _static(x.src[1]), src.shape, x.shape):
        at_zero = isinstance(o, int) and o == 0
        if at_zero and (s is t or s == t):
            new.append(i)
            continue
        hi = i < o + s
        ok = hi if at_zero else (i < o).logical_not() & hi
        new.append(ok.where(i if at_zero else i + o * -1, 0))
        valid = ok if valid is None else valid & ok
    inner = _index(src, new)
    return inner if valid is None else valid.where(inner, inner.const_like(0))


def _reduce(ctx: RangeCounter, ix: UOp, x: UOp) -> UOp:
    src = x.src[0]
    new = list(ix.src[1:])
    ranges = []
    for a in x.arg.axes:
        new[a] = ctx.new(src.shape[a], AxisType.REDUCE)
        if new[a].op is Ops.RANGE:
            ranges.append(new[a])
    inner = _index(src, new)
    return inner.reduce(x.arg.op, *ranges) if ranges else inner


def _elementwise(ix: UOp, x: UOp) -> UOp:
    return x.replace(src=tuple(_index(s, ix.src[1:]) for s in x.src))


def _passthrough(ix: UOp, x: UOp) -> UOp:
    return _index(x.src[0], ix.src[1:])


def _on(op: Ops | frozenset[Ops]) -> UPat:
    return UPat(Ops.INDEX, src=(UPat(op, name="x"),), allow_any_len=True, name="ix")


pushdown = PatternMatcher([
    (_on(Ops.RESHAPE), _reshape),
    (_on(Ops.PERMUTE), _permute),
    (_on(Ops.EXPAND), _expand),
    (_on(Ops.SHRINK), _shrink),
    (_on(Ops.FLIP), _flip),
    (_on(Ops.PAD), _pad),
    (_on(Ops.REDUCE), _reduce),
    (_on(GroupOp.Elementwise | {Ops.BITCAST}), _elementwise),
    (_on(frozenset({Ops.CONTIGUOUS, Ops.DETACH, Ops.CONTIGUOUS_BACKWARD})), _passthrough),
    (UPat(Ops.INDEX, src=(UPat(_SCALARS, name="x"),)), lambda x: x),
], name="rangeify")


# ---------------------------------------------------------------- closed forms of reductions
def _uses(x: UOp, r: UOp) -> bool:
    return r in x.sparents()


def identity(op: Ops, dtype: DType) -> bool | int | float:
    """The value a reduction starts from."""
    if op is Ops.ADD:
        return False if dtype.is_bool else 0
    if op is Ops.MUL:
        return True if dtype.is_bool else 1
    return dtype.min if not dtype.is_float else -float("inf")


def is_empty(r: UOp) -> bool:
    """A Range that never runs: its bound is 0, so its interval [0, n-1] is empty (props.min_max_of)."""
    return r.vmin > r.vmax


def empty_reduce(red: UOp) -> UOp | None:
    """A reduction over an empty range reads nothing: it is its identity (0, 1, the dtype's lowest value)."""
    return red.const_like(identity(red.arg.op, red.dtype)) if any(map(is_empty, red.src[1:])) else None


def empty_loop(end: UOp) -> UOp | None:
    """A loop over an empty range, or around nothing, does nothing: the empty Group (which renders as nothing)."""
    body, r = end.src
    return UOp(Ops.GROUP, ()) if is_empty(r) or (body.op is Ops.GROUP and not body.src) else None


def drop_unused_range(red: UOp) -> UOp | None:
    """A range the reduced value does not depend on: Add multiplies by its size, Max (and bool Add/Mul, which
    are Or/And) ignore it — but only a range that surely runs: over no element they give the identity."""
    val, ranges = red.src[0], red.src[1:]
    idempotent = red.arg.op is Ops.MAX or red.dtype.is_bool
    unused = [r for r in ranges if not _uses(val, r) and (r.src[0].vmin >= 1 or not idempotent)]
    if not unused or (red.arg.op is Ops.MUL and not red.dtype.is_bool):
        return None
    kept = tuple(r for r in ranges if r not in unused)
    out = val.reduce(red.arg.op, *kept) if kept else val
    if red.arg.op is Ops.ADD and not red.dtype.is_bool:
        n = prod(r.src[0] for r in unused)
        out = out * (UOp.const(red.dtype, n) if isinstance(n, int) else n.cast(red.dtype))
    return out


def _bound(cond: UOp, r: UOp) -> tuple[str, UOp] | None:
    """cond as one side of an interval of r: ("lt", k) for r < k, ("ge", k) for r >= k (k free of r)."""
    neg = cond.op is Ops.CMPNE and cond.src[1].op is Ops.CONST and cond.src[1].arg.value is True
    c = cond.src[0] if neg else cond
    if c.op is not Ops.CMPLT:
        return None
    a, b = c.src
    if a is r and not _uses(b, r):  # r < b
        return ("ge", b) if neg else ("lt", b)
    if b is r and not _uses(a, r):  # a < r  <=>  r >= a+1
        return ("lt", a + 1) if neg else ("ge", a + 1)
    return None


def _conjuncts(c: UOp) -> list[UOp]:
    return [*_conjuncts(c.src[0]), *_conjuncts(c.src[1])] if c.op is Ops.AND and c.dtype.is_bool else [c]


def isolate_range(c: UOp, r: UOp, a: UOp, k: UOp) -> UOp | None:
    """(a + r) < k  ->  r < k - a, so a mask on a sum of ranges becomes a bound on one of them."""
    if r.arg.type is not AxisType.REDUCE or _uses(a, r) or _uses(k, r):
        return None
    return r < k + a * -1


def sum_of_masked(red: UOp) -> UOp | None:
    """Sum over r of where(lo <= r < hi, v, 0) with v free of r: v times the number of r in [lo, hi)."""
    val, ranges = red.src[0], red.src[1:]
    if red.arg.op is not Ops.ADD or len(ranges) != 1 or val.op is not Ops.WHERE or red.dtype.is_bool:
        return None
    (r,), (cond, v, z) = ranges, val.src
    if z.op is not Ops.CONST or z.arg.value != 0 or _uses(v, r):
        return None
    lo, hi = idx0(), r.src[0]
    for c in _conjuncts(cond):
        b = _bound(c, r)
        if b is None:
            return None
        lo, hi = (lo.maximum(b[1]), hi) if b[0] == "ge" else (lo, hi.minimum(b[1]))
    count = (hi + lo * -1).maximum(0)
    return v * count.cast(red.dtype)


_i = UPat.var("a", dtypes.index)
collapse = PatternMatcher([
    (UPat(Ops.REDUCE, name="red", src=UPat()), lambda red: empty_reduce(red) if len(red.src) > 1 else None),
    (UPat(Ops.END, name="end"), empty_loop),
    (UPat(Ops.REDUCE, name="red", src=UPat()), lambda red: drop_unused_range(red) if len(red.src) > 1 else None),
    (UPat(Ops.REDUCE, name="red", src=UPat()), lambda red: sum_of_masked(red) if len(red.src) > 1 else None),
    (UPat(Ops.CMPLT, src=(UPat(Ops.ADD, src=[_i, UPat(Ops.RANGE, name="r")]), UPat.var("k")), name="c"),
     isolate_range),
], name="collapse reductions")


def output_ranges(shape: Sequence[int | UOp]) -> list[UOp]:
    """One LOOP range per output axis (a constant 0 for size-1 axes), numbered from 0."""
    return [UOp.range(s, k, AxisType.LOOP) if not (isinstance(s, int) and s == 1) else idx0()
            for k, s in enumerate(shape)]


def kernel_ast(value: UOp, out: UOp) -> UOp:
    """The kernel that computes Tensor-level `value` into buffer param `out`, before rangeify."""
    ranges = output_ranges(value.shape)
    store = out.index(flatten(ranges, value.shape)).store(_index(value, ranges))
    return UOp.sink(store.end(*[r for r in ranges if r.op is Ops.RANGE]))


def range_start(ast: UOp) -> int:
    """The first Range idx free in a kernel."""
    return 1 + max((u.arg.idx for u in ast.toposort() if u.op is Ops.RANGE), default=-1)

