"""Derived properties of a UOp (dtype, shape, device, min_max, axis), exactly per SPEC's table.

Each function computes one property of one node from its op, arg and its sources' (cached) properties.
Shape rules that can fail raise SpecError, so an ill-shaped node is rejected wherever its shape is asked for.

Two deliberate refinements of the table, both sound: Idiv and Mod get tight intervals when the divisor's
sign is known (the simplifier needs them), and an integer interval that would overflow its dtype widens
to the dtype range (real arithmetic wraps).

A Range (or Special) of bound n is [0, n-1] as in the table, so a bound of 0 gives the empty interval
[0, -1] (lo > hi): no value under it is ever computed, so what the simplifier derives from it holds
vacuously, and the rules that meet its Reduce or End (schedule/rangeify.py) make sure it never runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import GroupOp, Ops, SpecError, UOp, prod, toposort

Shape = tuple[int | UOp, ...]

_VOID_OPS = frozenset({Ops.STORE, Ops.END, Ops.GROUP, Ops.SINK, Ops.LINEAR, Ops.BARRIER, Ops.IF, Ops.ENDIF,
                       Ops.CUSTOM_FUNCTION, Ops.PROGRAM, Ops.SOURCE, Ops.PREFETCH})
_BOOL_OPS = GroupOp.Comparison | {Ops.NOT}
_FROM_ARG_DTYPE = frozenset({Ops.BUFFER, Ops.PARAM, Ops.CONST, Ops.SLICE})
_SRC0_DTYPE = frozenset(Ops) - _FROM_ARG_DTYPE - _BOOL_OPS - _VOID_OPS - {
    Ops.CAST, Ops.BITCAST, Ops.BINARY, Ops.RANGE, Ops.DEFINE_VAR, Ops.SPECIAL, Ops.WHERE, Ops.WMMA, Ops.ATOMIC_ADD,
    Ops.INS, Ops.CUSTOM, Ops.GETTUPLE, Ops.STACK, Ops.TUPLE}
"""The ops whose dtype_of is their first source's (every op dtype_of does not name before its last line)."""


# ---------------------------------------------------------------- dtype
def dtype_of(u: UOp) -> DType:
    op = u.op
    if op in _SRC0_DTYPE and u.src:  # most nodes: what the last line below gives, without the tests before it
        return u.src[0].dtype
    if op in _FROM_ARG_DTYPE:
        return u.arg.dtype
    if op in (Ops.CAST, Ops.BITCAST):
        return u.arg
    if op is Ops.BINARY:
        return dtypes.uint8
    if op in (Ops.RANGE, Ops.DEFINE_VAR, Ops.SPECIAL):
        return dtypes.index
    if op in _BOOL_OPS:
        return dtypes.bool
    if op in _VOID_OPS:
        return dtypes.void
    if op is Ops.WHERE:
        return u.src[1].dtype
    if op is Ops.WMMA:
        return u.src[2].dtype
    if op is Ops.ATOMIC_ADD:
        return u.src[1].dtype
    if op in (Ops.INS, Ops.CUSTOM):
        return u.arg[1] if isinstance(u.arg, tuple) else dtypes.void
    if op is Ops.GETTUPLE:
        return _tuple_elem(u).dtype
    if op in (Ops.STACK, Ops.TUPLE) and not u.src:
        return dtypes.index if op is Ops.STACK else dtypes.void
    if not u.src:
        raise SpecError(u, "needs at least one source to derive its dtype", rule="arity")
    return u.src[0].dtype


def _tuple_elem(u: UOp) -> UOp:
    """The Tuple element a GetTuple reads, looking through Function/Call to their body."""
    t = u.src[0]
    if t.op in (Ops.FUNCTION, Ops.CALL):
        t = t.src[0]
    if t.op is not Ops.TUPLE:
        raise SpecError(u, f"reads from {t.op.value}, not a Tuple (or a Function/Call of one)", 0, rule="gettuple")
    if not isinstance(u.arg, int) or not 0 <= u.arg < len(t.src):
        raise SpecError(u, f"index {u.arg!r} out of range for a Tuple of {len(t.src)}", rule="gettuple")
    return t.src[u.arg]


# ---------------------------------------------------------------- shape
def shape_from_src(u: UOp, i: int) -> Shape:
    """Decode a shape source: a Stack of index scalars; Const entries become ints. A valid Stack's shape is kept on
    it (its entries decide it alone): the same few shapes are the sources of most movement nodes an eager step
    builds, and each decoded anew was a walk of its entries and a tuple more for the garbage collector."""
    s = u.src[i] if i < len(u.src) else None
    if s is None or s.op is not Ops.STACK:
        raise SpecError(u, "shape source must be a Stack of index scalars", i, rule="shape-source")
    if (kept := s.__dict__.get(_AS_SHAPE)) is not None:
        return kept
    out: list[int | UOp] = []
    for e in s.src:
        if (e.dtype is not dtypes.index and e.dtype != dtypes.index) or e.shape != ():  # is: no DType.__ne__ call
            raise SpecError(u, f"shape entry {e.op.value} must be an index scalar, not {e.dtype.name} "
                            f"{fmt_shape(e.shape)}", i, rule="shape-source")
        out.append(int(e.arg.value) if e.op is Ops.CONST else e)
    shape = s.__dict__[_AS_SHAPE] = tuple(out)
    return shape


_AS_SHAPE = "_as_shape"
"""Where shape_from_src keeps a Stack's decoded shape (in the node's __dict__)."""


def fmt_shape(s: Shape) -> str:
    return "(" + ", ".join(str(x) if isinstance(x, int) else x.render() for x in s) + (",)" if len(s) == 1 else ")")


def _same(a: int | UOp, b: int | UOp) -> bool:
    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)


def broadcast(u: UOp, shapes: list[Shape]) -> Shape:
    """Right-align the shapes and take the element-wise max; each axis must be equal or 1."""
    nd = max(len(s) for s in shapes)
    padded = [(1,) * (nd - len(s)) + tuple(s) for s in shapes]
    out: list[int | UOp] = []
    for k in range(nd):
        dims = [s[k] for s in padded if not (isinstance(s[k], int) and s[k] == 1)]
        d = dims[0] if dims else 1
        if any(not _same(d, x) for x in dims):
            raise SpecError(u, "cannot broadcast " + " with ".join(fmt_shape(s) for s in shapes) +
                            f" (axis {k - nd})", rule="broadcast")
        out.append(d)
    return tuple(out)


def _known(x: int | UOp) -> bool:
    return isinstance(x, int)


def shape_of(u: UOp) -> Shape:
    op, src = u.op, u.src
    if op in _ELEMENTWISE and src:  # the most common node, and its sources' shapes most often one
        s0 = src[0].shape
        for s in src:
            if (t := s.shape) is not s0 and t != s0:
                return broadcast(u, [x.shape for x in src])
        return s0
    if (rule := _SHAPE_ALONE.get(op)) is not None:
        return rule(u)
    if not src:
        raise SpecError(u, "needs a source to derive its shape", rule="arity")
    s0 = src[0].shape
    # movement/marker/load/copy/after/tuple/codegen values keep their first source's shape
    return s0 if (from_src := _SHAPE_FROM_SRC0.get(op)) is None else from_src(u, s0)


def _buffer_shape(u: UOp) -> Shape:
    n = len(u.arg.device) if isinstance(u.arg.device, tuple) else 1
    return (n * u.arg.size,)


def _stack_shape(u: UOp) -> Shape:
    src = u.src
    if not src:
        return (0,)
    s0 = src[0].shape
    for i, s in enumerate(src):
        if len(s.shape) != len(s0) or not all(_same(a, b) for a, b in zip(s.shape, s0)):
            raise SpecError(u, f"all shapes must match: {fmt_shape(s.shape)} vs {fmt_shape(s0)}", i,
                            rule="stack-shapes")
    return (len(src), *s0)


def _permute_shape(u: UOp, s0: Shape) -> Shape:
    if sorted(u.arg) != list(range(len(s0))):
        raise SpecError(u, f"{u.arg} is not a permutation of the {len(s0)} axes of {fmt_shape(s0)}",
                        rule="permutation")
    return tuple([s0[i] for i in u.arg])


def _flip_shape(u: UOp, s0: Shape) -> Shape:
    if len(u.arg) != len(s0):
        raise SpecError(u, f"{len(u.arg)} flags for a shape of {len(s0)} axes {fmt_shape(s0)}", rule="flip-arity")
    return s0


def _reshape_shape(u: UOp, s0: Shape) -> Shape:
    new = shape_from_src(u, 1)
    a, b = prod(s0), prod(new)
    if (isinstance(a, int) and isinstance(b, int) and a != b) or (not isinstance(a, int) and a is not b
                                                                  and all(map(_known, new))):
        raise SpecError(u, f"{a if isinstance(a, int) else a.render()} elements cannot become {fmt_shape(new)}",
                        rule="reshape-size")
    return new


def _expand_shape(u: UOp, s0: Shape) -> Shape:
    new = shape_from_src(u, 1)
    if len(new) == len(s0):
        for a, b in zip(s0, new):  # each axis the same size, or 1 that grows
            if a is not b and not (isinstance(a, int) and (a == 1 or (isinstance(b, int) and a == b))):
                break
        else:
            return new
    raise SpecError(u, f"cannot expand {fmt_shape(s0)} to {fmt_shape(new)}: each axis must be equal or 1",
                    rule="expand")


def _pad_shrink_shape(u: UOp, s0: Shape) -> Shape:
    op = u.op
    off, new = shape_from_src(u, 1), shape_from_src(u, 2)
    if not len(off) == len(new) == len(s0):
        raise SpecError(u, f"offsets {fmt_shape(off)} and shape {fmt_shape(new)} must both have {len(s0)} axes",
                        rule="pad-arity")
    for k, (o, old, nw) in enumerate(zip(off, s0, new)):
        if not (_known(o) and _known(old) and _known(nw)):
            continue
        inner, outer = (old, nw) if op is Ops.PAD else (nw, old)
        if o < 0 or o + inner > outer:
            word = "pad" if op is Ops.PAD else "shrink"
            raise SpecError(u, f"{word} axis {k}: offset {o} + {inner} exceeds {outer}", rule=f"{word}-bounds")
    return new


def _replicated_shape(u: UOp, s0: Shape) -> Shape:
    if any(not 0 <= a < len(s0) for a in u.arg):
        raise SpecError(u, f"axes {u.arg} out of range for {fmt_shape(s0)}", rule="axes-range")
    return tuple(1 if k in u.arg else d for k, d in enumerate(s0))


def _reduce_shape(u: UOp, s0: Shape) -> Shape:
    if len(u.src) > 1:
        return s0
    n, out = len(s0), list(s0)
    for a in u.arg.axes:
        if not -n <= a < n:
            raise SpecError(u, f"axes {u.arg.axes} out of range for {fmt_shape(s0)}", rule="axes-range")
        out[a] = 1
    return tuple(out)


def _gettuple_shape(u: UOp, s0: Shape) -> Shape:
    elem = _tuple_elem(u)
    return _call_shape(u.src[0], u.arg) if u.src[0].op in (Ops.FUNCTION, Ops.CALL) else elem.shape


def _index_shape(u: UOp, s0: Shape) -> Shape:
    idxs = u.src[1:]
    if len(idxs) > len(s0):
        raise SpecError(u, f"{len(idxs)} indices for a shape of {len(s0)} axes {fmt_shape(s0)}", rule="index-arity")
    out: list[int | UOp] = []
    for k, i in enumerate(idxs):
        if not i.dtype.is_int:
            raise SpecError(u, f"index {k} has dtype {i.dtype.name}; indices must be integers", k + 1,
                            rule="index-dtype")
        if len(i.shape) > 1:
            raise SpecError(u, f"index {k} has shape {fmt_shape(i.shape)}; indices are () or (k,)", k + 1,
                            rule="index-shape")
        out.extend(i.shape)
    return (*out, *s0[len(idxs):])


def _bitcast_shape(u: UOp, s0: Shape) -> Shape:
    old, new = u.src[0].dtype.itemsize, u.arg.itemsize
    if old == new:
        return s0
    if not s0 or not _known(s0[-1]) or (s0[-1] * old) % new:
        raise SpecError(u, f"{fmt_shape(s0)} of {u.src[0].dtype.name} ({old} B) does not fill a whole "
                        f"{u.arg.name} ({new} B) on the last axis", rule="bitcast-bytes")
    return (*s0[:-1], s0[-1] * old // new)


def _call_shape(fn: UOp, idx: int) -> Shape:
    """Shape of element idx of a Function/Call body, its Params' symbolic sizes replaced by the arguments'."""
    body = fn.src[0]
    if body.op is not Ops.TUPLE:
        return body.shape
    if not 0 <= idx < len(body.src):
        raise SpecError(fn, f"index {idx} out of range for a Tuple of {len(body.src)}", rule="gettuple")
    shape = body.src[idx].shape
    if all(map(_known, shape)):
        return shape
    args = fn.src[1:]
    mapping: dict[UOp, UOp] = {}
    for p in body.toposort():
        if p.op is Ops.PARAM and p.arg.slot < len(args):
            for d, a in zip(p.shape, args[p.arg.slot].shape):
                if isinstance(d, UOp):
                    mapping[d] = a if isinstance(a, UOp) else UOp.const(dtypes.index, a)
    out = tuple(d if isinstance(d, int) else d.substitute(mapping) for d in shape)
    return tuple(int(d.arg.value) if isinstance(d, UOp) and d.op is Ops.CONST else d for d in out)


_ELEMENTWISE = GroupOp.Elementwise
_SHAPE_ALONE: dict[Ops, Callable[[UOp], Shape]] = {
    Ops.BUFFER: _buffer_shape,
    Ops.PARAM: lambda u: shape_from_src(u, 0),
    Ops.BINARY: lambda u: (len(u.arg),),
    Ops.SLICE: lambda u: (u.arg.size,),
    Ops.TUPLE: lambda u: u.src[0].shape if u.src else (),
    Ops.STACK: _stack_shape,
    **{op: lambda u: () for op in (Ops.CONST, Ops.RANGE, Ops.DEFINE_VAR, Ops.BIND, Ops.SPECIAL, Ops.ATOMIC_ADD,
                                   *_VOID_OPS)},
}
"""Shape rules of ops that do not (always) take their first source's: ops without sources, a Stack and a Tuple."""
_SHAPE_FROM_SRC0: dict[Ops, Callable[[UOp, Shape], Shape]] = {
    Ops.PERMUTE: _permute_shape, Ops.FLIP: _flip_shape, Ops.RESHAPE: _reshape_shape, Ops.EXPAND: _expand_shape,
    Ops.PAD: _pad_shrink_shape, Ops.SHRINK: _pad_shrink_shape, Ops.INDEX: _index_shape,
    Ops.REPLICATED: _replicated_shape, Ops.BITCAST: _bitcast_shape, Ops.REDUCE: _reduce_shape,
    Ops.FUNCTION: lambda u, s0: _call_shape(u, 0), Ops.CALL: lambda u, s0: _call_shape(u, 0),
    Ops.GETTUPLE: _gettuple_shape, Ops.WMMA: lambda u, s0: u.src[2].shape,
}
"""Shape rules of the other ops given their first source's shape (one that is not here keeps it)."""


# ---------------------------------------------------------------- device
def device_of(u: UOp) -> Any:
    op = u.op
    if op in (Ops.BUFFER, Ops.PARAM):
        return u.arg.device
    if op is Ops.COPY:
        return u.arg
    if op is Ops.LOAD and u.arg is not None and u.arg.device is not None:
        return u.arg.device
    if op in (Ops.CONST, Ops.RANGE, Ops.DEFINE_VAR, Ops.BINARY, Ops.SPECIAL):
        return None
    if op in (Ops.FUNCTION, Ops.CALL):
        return u.src[1].device if len(u.src) > 1 else None
    # elementwise ops take src[0]'s device; a Const there has none, so fall back to the first source that has one
    for s in u.src:
        if (d := s.device) is not None:
            return d
    return None


# ---------------------------------------------------------------- min_max
def dtype_range(dt: DType) -> tuple[Any, Any]:
    if dt.kind in "vx" and dt == dtypes.void:
        return (None, None)
    return (dt.min, dt.max)


def _fit(u: UOp, lo: Any, hi: Any) -> tuple[Any, Any]:
    """An interval for u, or its dtype range if the interval is undefined (NaN) or overflows an integer dtype."""
    dt = u.dtype
    if (isinstance(lo, float) and math.isnan(lo)) or (isinstance(hi, float) and math.isnan(hi)):
        return dtype_range(dt)
    if dt.is_int and (lo < dt.min or hi > dt.max):
        return dtype_range(dt)
    if dt.is_bool:
        return (bool(lo), bool(hi))
    return (lo, hi)


def min_max_of(u: UOp) -> tuple[Any, Any]:
    op, src = u.op, u.src
    if op is Ops.CONST:
        return (u.arg.value, u.arg.value)
    if op is Ops.DEFINE_VAR:
        return (u.arg.min, u.arg.max)
    if op in (Ops.RANGE, Ops.SPECIAL):
        return (0, src[0].vmax - 1)  # empty (lo > hi) when the bound is 0: see the module docstring
    if op in (Ops.BIND, Ops.AFTER, Ops.INDEX, Ops.COPY) or op in GroupOp.Marker:
        return src[0].min_max
    if op is Ops.STACK:
        return (min(s.vmin for s in src), max(s.vmax for s in src)) if src else dtype_range(u.dtype)
    if op in GroupOp.Movement and op not in (Ops.BITCAST, Ops.SLICE):
        return src[0].min_max
    if op is Ops.CAST:
        return _cast_range(u)
    if op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.IDIV, Ops.MOD, Ops.CMPLT, Ops.CMPNE, Ops.WHERE):
        return _alu_range(u)
    if op is Ops.NEG:
        return _alu_interval(u, [src[0].min_max])
    return dtype_range(u.dtype)


def _alu_range(u: UOp) -> tuple[Any, Any]:
    if u.op is Ops.WHERE:
        return _where_range(u)
    return _alu_interval(u, [s.min_max for s in u.src])


def _alu_interval(u: UOp, ivs: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """u's interval (an op of _alu_range, or Neg) when its sources take the intervals ivs."""
    op = u.op
    if op is Ops.NEG:
        return _fit(u, -ivs[0][1], -ivs[0][0])
    if op is Ops.WHERE:
        (c, C), (b, B), (d, D) = ivs
        if c == C:
            return (b, B) if c else (d, D)
        return (min(b, d), max(B, D))
    (a, A), (b, B) = ivs[0], ivs[1]
    if op is Ops.ADD:
        return _fit(u, a + b, A + B)
    if op is Ops.MUL:
        ps = [_mul(x, y) for x in (a, A) for y in (b, B)]
        return _fit(u, min(ps), max(ps))
    if op is Ops.MAX:
        return _fit(u, max(a, b), max(A, B))
    if op in (Ops.CMPLT, Ops.CMPNE) and u.src[0].dtype.is_float:
        return (False, True)  # float intervals ignore NaN and rounding: never decide a float comparison by them
    if op is Ops.CMPLT:
        return (True, True) if A < b else (False, False) if a >= B else (False, True)
    if op is Ops.CMPNE:
        if A < b or B < a:
            return (True, True)
        return (False, False) if a == A == b == B else (False, True)
    if op is Ops.IDIV and u.dtype.is_int and (b > 0 or B < 0):
        qs = [x // y for x in (a, A) for y in (b, B)]
        return _fit(u, min(qs), max(qs))
    if op is Ops.MOD and u.dtype.is_int and (b > 0 or B < 0):
        if b > 0 and 0 <= a and A < b:
            return (a, A)
        if b > 0:
            return (0, B - 1 if a < 0 else min(A, B - 1))
        return (b + 1, 0)
    return dtype_range(u.dtype)


# ---- a select's branches under its condition
_GUARDED_OPS = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.IDIV, Ops.MOD, Ops.CMPLT, Ops.CMPNE, Ops.WHERE, Ops.NEG})
"""The int ops whose interval _alu_interval recomputes from their sources' intervals under a condition."""
MAX_GUARDED_NODES = 64
"""A branch with more int nodes than this over the nodes its condition bounds keeps its own interval (a bound on
the work per select)."""

Facts = dict[UOp, tuple[int, int]]
"""What a condition's truth says: the interval of each int node it bounds."""


def _where_range(u: UOp) -> tuple[Any, Any]:
    """where(c, x, y) takes x's values only where c holds and y's only where it does not, so each branch's interval
    is taken under what c's truth (or falsehood) says of the int nodes c compares (`r >= 1 & r < 33` makes the
    padded read's `where(r >= 1 & r < 33, r - 1, 0)` lie in [0, 31], not [-1, 32], and its `% 32` go). A branch
    the facts rule out (an empty interval) is never taken."""
    c, x, y = u.src
    lo, hi = c.min_max
    if lo == hi:
        return x.min_max if lo else y.min_max
    t, f = _range_under(x, _facts(c, True)), _range_under(y, _facts(c, False))
    if t is None:  # both None: the select is never computed (under a Range that never runs)
        return f if f is not None else _alu_interval(u, [(lo, hi), x.min_max, y.min_max])
    return t if f is None else (min(t[0], f[0]), max(t[1], f[1]))


def _facts(c: UOp, truth: bool) -> Facts | None:
    """The intervals `c == truth` implies for the int nodes c compares: a conjunction's (a disjunction's when false)
    facts met, a negation's flipped, and `Σ k·t + m < n` (or `==` where a `!=` is false) bounding each term t by what
    the others leave; None where `c == truth` cannot hold. Terms whose sum may overflow bound nothing."""
    if c.dtype != dtypes.bool or c.shape != ():
        return {}
    op = c.op
    if op is Ops.NOT or (op is Ops.CMPNE and c.src[1].op is Ops.CONST and c.src[1].dtype == dtypes.bool):
        flip = op is Ops.NOT or bool(c.src[1].arg.value)
        return _facts(c.src[0], truth != flip)
    if (op is Ops.AND and truth) or (op is Ops.OR and not truth):
        a, b = _facts(c.src[0], truth), _facts(c.src[1], truth)
        if a is None or b is None:
            return None
        return _met(a, b)
    if op is Ops.CMPLT and c.src[0].dtype.is_int:  # true: a - b <= -1; false: b - a <= 0
        return _bound_sum(c.src[0], c.src[1], -1) if truth else _bound_sum(c.src[1], c.src[0], 0)
    if op is Ops.CMPNE and c.src[0].dtype.is_int and not truth:
        a, b = _bound_sum(c.src[0], c.src[1], 0), _bound_sum(c.src[1], c.src[0], 0)
        return None if a is None or b is None else _met(a, b)
    return {}


def _met(a: Facts, b: Facts) -> Facts | None:
    out = dict(a)
    for t, (lo, hi) in b.items():
        was = out.get(t, (lo, hi))
        out[t] = (max(lo, was[0]), min(hi, was[1]))
        if out[t][0] > out[t][1]:
            return None
    return out


def _bound_sum(a: UOp, b: UOp, n: int) -> Facts | None:
    """Each term's interval where a - b <= n, a and b sums of int terms times constants."""
    ta, tb = _linear(a), _linear(b)
    if ta is None or tb is None:
        return {}
    terms = dict(ta[0])
    for t, k in tb[0].items():
        terms[t] = terms.get(t, 0) - k
    room = n - ta[1] + tb[1]  # Σ k·t <= room
    lows = {t: min(k * t.vmin, k * t.vmax) for t, k in terms.items() if k}
    least = sum(lows.values())
    if least > room:
        return None
    out: Facts = {}
    for t, low in lows.items():
        k, most = terms[t], room - (least - low)  # k·t <= most
        lo, hi = t.min_max
        lo, hi = (lo, min(hi, most // k)) if k > 0 else (max(lo, -(most // -k)), hi)
        if (lo, hi) != t.min_max:
            out[t] = (lo, hi)
    return out


def _linear(e: UOp) -> tuple[dict[UOp, int], int] | None:
    """e as Σ k·t + m over scalar int terms (Adds and products by constants taken apart), where no Add or Mul on
    the way may overflow (its interval is inside its dtype's: one that may wrap has its dtype's whole range)."""
    terms: dict[UOp, int] = {}
    const = 0
    todo = [(e, 1)]
    while todo:
        u, k = todo.pop()
        if u.shape != ():
            return None
        if u.op is Ops.CONST:
            const += int(u.arg.value) * k
        elif u.op in (Ops.ADD, Ops.MUL) and not (u.dtype.min < u.vmin and u.vmax < u.dtype.max):
            return None
        elif u.op is Ops.ADD:
            todo += [(s, k) for s in u.src]
        elif u.op is Ops.MUL and u.src[1].op is Ops.CONST:
            todo.append((u.src[0], k * int(u.src[1].arg.value)))
        else:
            terms[u] = terms.get(u, 0) + k
    return terms, const


def _range_under(x: UOp, facts: Facts | None) -> tuple[Any, Any] | None:
    """x's interval where the facts hold: its int nodes above the bounded ones recomputed from their sources'
    intervals (and met with their own); None where the facts cannot hold (a node's interval comes out empty)."""
    if facts is None:
        return None
    if not facts or not x.dtype.is_int or not _small(x, facts):
        return x.min_max
    nodes = toposort([x], lambda n: n not in facts and n.op in _GUARDED_OPS)
    ivs: dict[UOp, tuple[Any, Any]] = {}
    for n in nodes:
        own = n.min_max
        if n in facts:
            iv = facts[n]
        elif n.op in _GUARDED_OPS and (n.dtype.is_int or n.dtype.is_bool) and all(s in ivs for s in n.src):
            iv = _alu_interval(n, [ivs[s] for s in n.src])
        else:
            ivs[n] = own
            continue
        lo, hi = max(iv[0], own[0]), min(iv[1], own[1])
        if lo > hi:
            return None
        ivs[n] = (lo, hi)
    return ivs[x]


def _small(x: UOp, facts: Facts) -> bool:
    """Whether x has at most MAX_GUARDED_NODES nodes over the bounded ones (the walk stops past that many)."""
    seen, todo = {x}, [x]
    while todo:
        u = todo.pop()
        if u in facts or u.op not in _GUARDED_OPS:
            continue
        for s in u.src:
            if s not in seen:
                if len(seen) >= MAX_GUARDED_NODES:
                    return False
                seen.add(s)
                todo.append(s)
    return True


def _mul(x: Any, y: Any) -> Any:
    """Interval-end product where 0·∞ counts as 0 (the bound, not the value, is what matters)."""
    return 0 if x == 0 or y == 0 else x * y


def _cast_range(u: UOp) -> tuple[Any, Any]:
    a, A = u.src[0].min_max
    dt = u.dtype
    if dt.is_bool:
        if a == A:
            return (bool(a), bool(a))
        return (False, True) if a <= 0 <= A else (True, True)
    if dt.is_float:
        return (float(a), float(A))
    # an int cast truncates toward zero and then wraps (DType.normalize): the interval is kept only if it fits
    if a is None or A is None or not (math.isfinite(a) and math.isfinite(A)):
        return dtype_range(dt)
    lo, hi = int(a), int(A)
    return (lo, hi) if dt.min <= lo and hi <= dt.max else dtype_range(dt)


# ---------------------------------------------------------------- axis (multi-device shard dimension)
def axis_of(u: UOp) -> int | None:
    op = u.op
    if op is Ops.BUFFER:
        return 0 if isinstance(u.arg.device, tuple) else None
    if op is Ops.COPY:
        return 0 if isinstance(u.arg, tuple) else None
    if not u.src or op in (Ops.RANGE, Ops.SPECIAL, Ops.CONST):
        return None
    a = u.src[0].axis
    if op in GroupOp.Elementwise:
        return next((s.axis for s in u.src if s.axis is not None), None)
    if a is None:
        return None
    if op is Ops.PERMUTE:
        return tuple(u.arg).index(a)
    if op is Ops.RESHAPE:
        return _reshape_axis(u, a)
    if op is Ops.REDUCE:
        axes = {x % max(len(u.src[0].shape), 1) for x in u.arg.axes}
        return None if a in axes else a
    if op is Ops.REPLICATED:
        return None if a in u.arg else a
    if op is Ops.INDEX:
        idxs = u.src[1:]
        if a < len(idxs):
            return None
        return a - sum(1 for i in idxs if i.shape == ())
    if op in (Ops.STACK,):
        return a + 1
    if op in GroupOp.Movement or op in GroupOp.Marker or op in (Ops.LOAD, Ops.AFTER, Ops.CAST, Ops.BITCAST):
        return a
    return None


def _reshape_axis(u: UOp, a: int) -> int:
    """Keep the shard boundary: the new axis starts after the same number of elements and splits n ways, or
    (an axis n does not divide, sharded unevenly) is the old axis itself, at the same place in the elements.
    Where no axis keeps it, the axis that holds the old one's first element: running it then moves the shards
    (uopviz/tensor/multi.py's shard pass gathers and splits them again)."""
    old, new = u.src[0].shape, u.shape
    dev = u.src[0].device
    n = len(dev) if isinstance(dev, tuple) else 1
    before = prod(old[:a])
    starts = [j for j in range(len(new)) if isinstance(before, int) and prod(new[:j]) == before]
    for j in starts:
        d = new[j]
        if isinstance(d, int) and d % n == 0 and d > 1:
            return j
    for j in starts:
        if new[j] == old[a]:
            return j
    if not all(isinstance(d, int) for d in (*old, *new)):
        raise SpecError(u, f"reshape {fmt_shape(old)} -> {fmt_shape(new)} of the shard axis {a} needs concrete "
                           "sizes", rule="shard-axis")
    # no new axis keeps the boundary: the one holding the old axis' first element, which the shards are moved to
    return next((j for j in range(len(new)) if prod(new[:j + 1]) > before), max(len(new) - 1, 0))


DERIVE = {"dtype": dtype_of, "shape": shape_of, "device": device_of, "min_max": min_max_of, "axis": axis_of}
