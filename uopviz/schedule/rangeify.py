"""Rangeify: a kernel's Tensor-level value, indexed by its output ranges, broken down to scalar code.

A kernel starts as `Store(out.index(flat(ranges)), Index(T, *ranges))`. The rules here push each Index
through T's ops until only scalar arithmetic over Loads of buffers is left: movement ops become index
arithmetic (Reshape: flatten and unflatten; Permute: reorder; Expand: 0 on broadcast axes; Shrink: offset;
Flip: n-1-i; Pad: a validity mask, with the index clamped so the masked read stays in bounds), elementwise ops
apply to indexed sources, and a Reduce over axes becomes a Reduce over fresh REDUCE ranges. Index by tensors
reads its index values and masks those out of range, Stack selects over its leading index, a size-changing
Bitcast regroups the bytes of the last axis with integer shifts, Slice is a Reshape, Shrink and Bitcast of its
source, and a Tensor-level Load is its buffer's value, selected against alt where a gate is false. Every read
stays in bounds, so no gate reaches memory. An op with no rule here is refused when its kernel is made
(`check_lowerable`), naming the op, before any kernel pass runs.

`collapse` then removes reductions whose closed form is known: a range the reduced value does not use, and a
sum of a value masked to an interval of the range (what SPEC's prefix_sum makes of arange), so arange costs
O(n), not O(n^2). It also removes empty ranges (bound 0) whole, before anything else could drop them from a
body that then runs once: a reduction over one is its identity, a loop over one does nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import AddrSpace, AxisType, GroupOp, Ops, SliceArg, SpecError, UOp, prod
from uopviz.uop.pattern import PatternMatcher, UPat
from uopviz.uop.spec import load_slots

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
    out = idx0()
    stride: int | UOp = 1
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


def _in_axis(v: UOp, n: int | UOp) -> tuple[UOp, UOp]:
    """(valid, index) of an index value v into an axis of n: -n..-1 wrap, and a value outside [-n, n) is not
    valid and its index is 0, so that the masked read stays in bounds. Compared as int64 (uint64 as it is), wide
    enough for every index value and every size, before the index narrows to the kernel's index type."""
    v = v if v.dtype == dtypes.uint64 else v.cast(dtypes.int64)
    size = UOp.const(v.dtype, n) if isinstance(n, int) else n.cast(v.dtype)
    if v.dtype.is_unsigned:
        ok, at = v < size, v
    else:
        ok, at = (v < -size).logical_not() & (v < size), (v < 0).where(v + size, v)
    return ok, ok.where(at, 0).cast(dtypes.index)


def _gather(ix: UOp, x: UOp) -> UOp:
    """Index(T, i0, i1, ...) by index tensors: each is read at the output's ranges (a ()-shaped one at none, a
    (k,)-shaped one at the range of the axis it makes) and its value indexes T's axis (_in_axis: as in the Tensor
    front-end's indexing, negatives wrap and a value out of range reads 0); T's remaining axes take the remaining
    ranges."""
    src, outer = x.src[0], list(ix.src[1:])
    new: list[UOp] = []
    valid: UOp | None = None
    for i, n in zip(x.src[1:], src.shape):
        if isinstance(n, int) and n == 0:  # no element to read, and none to clamp the read to
            return x.const_like(0)
        ok, at = _in_axis(_index(i, [outer.pop(0)] if i.shape else []), n)
        new.append(at)
        valid = ok if valid is None else valid & ok
    inner = _index(src, [*new, *outer])
    return inner if valid is None else valid.where(inner, inner.const_like(0))


def _stack(ix: UOp, x: UOp) -> UOp:
    """Stack(T0, T1, ...) at (k, *rest) is T_k at rest: a select over k (each T_j is read in bounds, so none
    needs a gate); a constant k picks its source."""
    k, rest = ix.src[1], ix.src[2:]
    if k.op is Ops.CONST:
        return _index(x.src[k.arg.value], rest)
    out = _index(x.src[-1], rest)
    for j in range(len(x.src) - 2, -1, -1):
        out = k.eq(j).where(_index(x.src[j], rest), out)
    return out


_UINT = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}


def _bits(v: UOp) -> UOp:
    """v's bit pattern as the unsigned integer of its size (a bool is stored as 0 or 1)."""
    u = _UINT[v.dtype.itemsize]
    return v.cast(u) if v.dtype.is_bool else v if v.dtype == u else v.bitcast(u)


def _from_bits(b: UOp, dt: DType) -> UOp:
    """Unsigned bits read as dt; a byte read as a bool is true where it is not 0."""
    return b.ne(0) if dt.is_bool else b if b.dtype == dt else b.bitcast(dt)


def _widen(ix: UOp, x: UOp) -> UOp:
    """A Bitcast to n times wider elements: element j of the last axis is source elements jn..jn+n-1, the first
    in the lowest bytes (little-endian, the byte order of every runtime and of NumPy's views on them)."""
    src, idx = x.src[0], ix.src[1:]
    n, step, wide = x.dtype.itemsize // src.dtype.itemsize, 8 * src.dtype.itemsize, _UINT[x.dtype.itemsize]

    def part(m: int) -> UOp:
        return _bits(_index(src, [*idx[:-1], idx[-1] * n + m])).cast(wide)

    word = part(0)
    for m in range(1, n):
        word = word | (part(m) << (step * m))
    return _from_bits(word, x.dtype)


def _narrow(ix: UOp, x: UOp) -> UOp:
    """A Bitcast to n times narrower elements: element j of the last axis is bytes of source element j // n,
    from byte (j % n) * size on (little-endian, as in _widen)."""
    src, idx = x.src[0], ix.src[1:]
    n, size = src.dtype.itemsize // x.dtype.itemsize, x.dtype.itemsize
    word = _bits(_index(src, [*idx[:-1], idx[-1] // n]))
    shift = (idx[-1] % n).cast(word.dtype) * (8 * size)
    return _from_bits((word >> shift).cast(_UINT[size]), x.dtype)


def _bitcast(ix: UOp, x: UOp) -> UOp:
    """A Bitcast that keeps the element size reinterprets each element; one that changes it regroups the bytes
    of the last axis. Integer shifts of bit patterns, not a reinterpreting read of memory: that works on values
    computed in the kernel too, and C forbids reading memory through a pointer of another type (aliasing,
    alignment)."""
    old, new = x.src[0].dtype.itemsize, x.dtype.itemsize
    if old == new:
        return _elementwise(ix, x)
    return _widen(ix, x) if old < new else _narrow(ix, x)


def _slice(ix: UOp, x: UOp) -> UOp:
    """Slice(T, offset) of `size` elements of a dtype: T's elements in row-major order from offset on, read as that
    dtype: a Reshape to one axis, a Shrink to the elements the slice covers and a Bitcast (then a Shrink to `size`
    where one element of T holds several of the new dtype)."""
    t, off = x.src
    a: SliceArg = x.arg
    covered = -(-a.size * a.dtype.itemsize // t.dtype.itemsize)  # elements of T, rounded up
    view = t.reshape((prod(t.shape),)).shrink((off,), (covered,))
    if a.dtype != t.dtype:
        view = view.bitcast(a.dtype)
    if view.shape[0] != a.size:
        view = view.shrink((0,), (a.size,))
    return _index(view, ix.src[1:])


def _load(ix: UOp, x: UOp) -> UOp:
    """A Tensor-level Load(buf, alt?, gate?) copies buf: its value, or alt's where the gate is false. buf is read in
    bounds everywhere, so the gate is a select."""
    idx = ix.src[1:]
    a, g = load_slots(x)
    value = _index(x.src[0], idx)
    if g is None:
        return value
    alt = _index(x.src[a], idx) if a is not None else value.const_like(0)
    return _index(x.src[g], idx).where(value, alt)


def explicit_alt(x: UOp) -> UOp | None:
    """A gated Load with no alt reads 0 where the gate is false: the 0 is made a source, so that later passes and
    the runtimes see a gated Load in one form, (buf, alt, gate)."""
    a, g = load_slots(x)
    return x.replace(src=(x.src[0], x.const_like(0), x.src[g])) if g is not None and a is None else None


class _Ranged(UPat):
    """An Index by the kernel's own indices: index-typed (ranges and their arithmetic). A Tensor-level Index is
    by integer tensors (kernel_ast gives index-typed ones int64), so it is left alone until an Index of this kind
    reaches it (_gather)."""

    __slots__ = ()

    def _extra(self, u: UOp) -> bool:
        return all(i.dtype == dtypes.index for i in u.src[1:])


def _on(op: Ops | frozenset[Ops]) -> UPat:
    return _Ranged(Ops.INDEX, src=(UPat(op, name="x"),), allow_any_len=True, name="ix")


_LOWERINGS: tuple[tuple[Ops | frozenset[Ops], Callable[..., UOp]], ...] = (
    (Ops.RESHAPE, _reshape),
    (Ops.PERMUTE, _permute),
    (Ops.EXPAND, _expand),
    (Ops.SHRINK, _shrink),
    (Ops.FLIP, _flip),
    (Ops.PAD, _pad),
    (Ops.REDUCE, _reduce),
    (GroupOp.Elementwise, _elementwise),
    (Ops.BITCAST, _bitcast),
    (frozenset({Ops.CONTIGUOUS, Ops.DETACH, Ops.CONTIGUOUS_BACKWARD, Ops.COPY}), _passthrough),
    (Ops.INDEX, _gather),
    (Ops.STACK, _stack),
    (Ops.SLICE, _slice),
    (Ops.LOAD, _load),
)
pushdown = PatternMatcher([
    (UPat(Ops.LOAD, name="x"), explicit_alt),
    *((_on(op), fn) for op, fn in _LOWERINGS),
    (UPat(Ops.INDEX, src=(UPat(_SCALARS, name="x"),)), lambda x: x),
], name="rangeify")

LOWERED: frozenset[Ops] = frozenset().union(*({op} if isinstance(op, Ops) else op for op, _ in _LOWERINGS),
                                            _SCALARS, BUFFERS)
"""The ops a kernel's Tensor-level value may hold: those a rule above lowers, and the leaves."""

_NOT_LOWERED = {
    Ops.COPY: "it moves data to another device, and a kernel runs on one device",
    Ops.REPLICATED: "it marks a value held on several devices, and a kernel runs on one device",
    Ops.LOAD: "it reads into another device or address space, and a kernel computes into global memory of one device",
}


def transfers(u: UOp) -> bool:
    """A Copy to another device than its value's: the kernel split makes it a copy step of its own."""
    return u.op is Ops.COPY and u.arg != u.src[0].device


def _moves(u: UOp) -> bool:
    """A Copy to another device, or a Load to a device or address space other than its buffer's (global memory):
    on its own device, each is the value it reads."""
    if u.op is Ops.COPY:
        return transfers(u)
    a = u.arg
    return u.op is Ops.LOAD and a is not None and (a.device not in (None, u.src[0].device) or
                                                   a.addrspace not in (None, AddrSpace.GLOBAL))


def check_lowerable(value: UOp) -> None:
    """Refuse a kernel's Tensor-level value that holds an op rangeify cannot lower, with a SpecError naming the op
    and why, when the kernel is made: not later, where a pass or a renderer meets the op."""
    for u in value.toposort():
        if u.op not in LOWERED or _moves(u):
            why = _NOT_LOWERED.get(u.op, "no rule of rangeify lowers it (a kernel computes movement, elementwise, "
                                         "reduce, marker and Load ops of buffers and constants)")
            raise SpecError(u, f"cannot be lowered in a kernel: {why}", rule="lowerable")


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


def _data_indices(value: UOp) -> UOp:
    """value with the index-typed indices of its Tensor-level Index ops cast to int64: a Tensor's indices are data
    (negatives wrap, values out of range read 0), and index-typed ones are the kernel's own (_Ranged)."""
    new: dict[UOp, UOp] = {}
    for u in value.toposort():
        src = tuple(new[s] for s in u.src)
        if u.op is Ops.INDEX:
            src = (src[0], *(i.cast(dtypes.int64) if i.dtype == dtypes.index else i for i in src[1:]))
        new[u] = u.replace(src=src)
    return new[value]


def kernel_ast(values: Sequence[UOp], outs: Sequence[UOp]) -> UOp:
    """The kernel that computes Tensor-level `values` (one shape) into buffer params `outs`, before rangeify: one
    Store per value in one loop nest, Grouped where there are several (SpecError for a value it could not lower:
    check_lowerable)."""
    shape = values[0].shape
    ranges = output_ranges(shape)
    stores = []
    for value, out in zip(values, outs, strict=True):
        check_lowerable(value)
        value = _data_indices(value)
        stores.append(out.index(flatten(ranges, shape)).store(_index(value, ranges)))
    body = stores[0] if len(stores) == 1 else UOp(Ops.GROUP, tuple(stores))
    return UOp.sink(body.end(*[r for r in ranges if r.op is Ops.RANGE]))


def range_start(ast: UOp) -> int:
    """The first Range idx free in a kernel."""
    return 1 + max((u.arg.idx for u in ast.toposort() if u.op is Ops.RANGE), default=-1)

