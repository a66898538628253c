"""Symbolic simplification: constant folding, algebra, and interval (min_max) driven rules.

Every rule is exact for the dialect's semantics, not only for small values: integers wrap at their dtype's
width, and Idiv/Mod are floor division and floor modulo (negative values included). So:
- ring identities (reassociation, factoring, distribution) hold for integers even when they wrap;
- rules about division, modulo and order (which wrapping breaks) first prove from the operands' intervals
  that nothing overflows;
- float rules are limited to the exact ones (x*1, -(-x), ...): x+0 is not x for x = -0.0, x*0 is not 0 for
  inf or nan, and reassociating rounds differently.
A rule that would replace a node by a constant (or by one of its sources) checks that the shape is kept.
Rules only move constants outward and shrink expressions, so a fixpoint is always reached.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from uopviz.dtype import DType, dtypes
from uopviz.uop.alu import exec_alu
from uopviz.uop.ops import GroupOp, Ops, SpecError, UOp
from uopviz.uop.pattern import PatternMatcher, UPat

INTS = frozenset(d for d in dtypes.all() if d.is_int)
INTS_BOOL = INTS | {dtypes.bool}


# ---------------------------------------------------------------- helpers
def _shape_kept(new: UOp, old: UOp) -> bool:
    """Replacing old by new keeps the graph well-shaped (a Const is shape (); broadcasting may make old bigger)."""
    try:
        return new.shape == old.shape
    except SpecError:
        return False


def _const(old: UOp, value: bool | int | float) -> UOp | None:
    """old as a constant of its dtype, if old is a scalar (a Const cannot stand for a shaped value)."""
    c = UOp.const(old.dtype, value)
    return c if _shape_kept(c, old) else None


def _source(old: UOp, new: UOp) -> UOp | None:
    return new if _shape_kept(new, old) else None


def _fold(op: Ops, dtype: DType, *vals: bool | int | float) -> UOp:
    """A Const computed exactly as the op would compute it at run time (wrapping, rounding)."""
    return UOp.const(dtype, exec_alu(op, dtype, vals))


# ---------------------------------------------------------------- constant folding
def fold_const(x: UOp) -> UOp | None:
    """An elementwise op of constants is a constant. Declines where evaluation raises (int division by zero,
    a negative shift, nan cast to int): that is for the runtime to report, not for the compiler to hide."""
    try:
        return UOp.const(x.dtype, exec_alu(x.op, x.dtype, [s.arg.value for s in x.src]))
    except (ArithmeticError, ValueError, TypeError):  # DTypeError is a TypeError
        return None


constant_folding = PatternMatcher([
    (UPat(GroupOp.Elementwise, src=UPat(Ops.CONST), name="x"), fold_const),
], name="constant_folding")


# ---------------------------------------------------------------- interval rules
def fold_point_interval(x: UOp) -> UOp | None:
    """An int/bool value whose interval is one point is that constant; this decides comparisons by bounds.
    Float sources are excluded: their intervals ignore nan and rounding, so they cannot decide anything."""
    lo, hi = x.min_max
    if lo != hi or any(s.dtype.is_float for s in x.src):
        return None
    return _const(x, lo)


def max_by_bounds(x: UOp, y: UOp, m: UOp) -> UOp | None:
    """max(x, y) is x when x is never below y (ints: float intervals are not exact)."""
    return _source(m, x) if x.vmin >= y.vmax else None


def _nonzero(x: UOp) -> bool:
    return x.vmin > 0 or x.vmax < 0


# ---------------------------------------------------------------- sums of terms, division and modulo
def _terms(x: UOp) -> tuple[list[tuple[UOp, int]], int] | None:
    """x as Σ term·coefficient + constant, flattening the Add tree (iteratively) and Mul-by-Const leaves.
    None if a source has another dtype (the rebuilt sum must keep x's dtype)."""
    terms: list[tuple[UOp, int]] = []
    const = 0
    stack = [x]
    while stack:
        u = stack.pop()
        if u.dtype != x.dtype:
            return None
        if u.op is Ops.ADD:
            stack.extend(reversed(u.src))
        elif u.op is Ops.CONST:
            const += u.arg.value
        elif u.op is Ops.MUL and u.src[1].op is Ops.CONST:
            terms.append((u.src[0], u.src[1].arg.value))
        else:
            terms.append((u, 1))
    return terms, const


def affine(x: UOp) -> tuple[dict[UOp, int], int]:
    """Index arithmetic x as Σ atom·coefficient + constant, Adds and products by constants distributed
    (`(r1 + t*512) * 1024` is r1·1024 + t·524288); any other node (a Range, a Mod, ...) is an atom. What an address
    does per step of a loop is read from it (`step`)."""
    terms: dict[UOp, int] = {}
    const = 0
    todo = [(x, 1)]
    while todo:
        u, k = todo.pop()
        if u.op is Ops.ADD:
            todo += [(s, k) for s in u.src]
        elif u.op is Ops.CONST:
            const += int(u.arg.value) * k
        elif u.op is Ops.MUL and u.src[1].op is Ops.CONST:
            todo.append((u.src[0], k * int(u.src[1].arg.value)))
        else:
            terms[u] = terms.get(u, 0) + k
    return {t: c for t, c in terms.items() if c}, const


def moves_evenly(terms: dict[UOp, int], r: UOp) -> bool:
    """Whether the address moves by a constant per iteration of r: r appears in no atom but itself."""
    return all(t is r or r not in t.sparents() for t in terms)


def step(x: UOp, r: UOp) -> int | None:
    """How far index x moves per iteration of range r; None where that is not one constant (r inside a Mod, a
    Idiv or a product of ranges)."""
    terms, _ = affine(x)
    return terms.get(r, 0) if moves_evenly(terms, r) else None


def _sum(dtype: DType, terms: list[tuple[UOp, int]], const: int) -> UOp:
    """Rebuild Σ term·coefficient + constant (coefficient 1 and constant 0 are left out)."""
    out: UOp | None = None
    for t, c in terms:
        tc = t if c == 1 else t * c
        out = tc if out is None else out + tc
    if out is None:
        return UOp.const(dtype, const)
    return out if const == 0 else out + const


def fold_divmod(d: UOp, x: UOp, c: UOp) -> UOp | None:
    """x // c and x % c for a sum x = c·Q + R, where Q collects the terms whose coefficient c divides (and
    const // c), R the rest (and const % c): in floor semantics, for any nonzero c,
        (c·Q + R) // c = Q + R // c   and   (c·Q + R) % c = R % c,
    and R // c is the constant k where R's interval lies in one step [c·k, c·k + c), so R % c = R - c·k.
    Covers x // c -> 0 and x % c -> x for 0 <= x < c, (y*c) // c -> y, (y*c1) // c2 -> y*(c1//c2) and
    (y*c1) % c2 -> 0 when c2 divides c1, and (r0*4 + r1) // 4 -> r0 for r1 in [0, 3].
    Sound only if no partial sum overflows: the sum of the terms' absolute bounds (and |c|) must fit."""
    cv = c.arg.value
    if cv == 0 or (parts := _terms(x)) is None:
        return None
    terms, const = parts
    dt = x.dtype
    bound = abs(const) + abs(cv)
    for t, k in terms:
        bound += max(abs(t.vmin * k), abs(t.vmax * k))
    if bound > dt.max:
        return None
    if (lanes := _split_lane_constant(d, terms, const, cv)) is not None:
        return lanes
    # a coefficient at least |c| splits as c·q + r: its c·q part joins Q (so (r0*14 + r1) % 13 -> (r0 + r1) % 13)
    quots = [k // cv if k % cv == 0 or abs(k) >= abs(cv) else 0 for _, k in terms]
    q_terms = [(t, q) for (t, _), q in zip(terms, quots) if q != 0]
    r_terms = [(t, k - cv * q) for (t, k), q in zip(terms, quots) if k - cv * q != 0]
    r_lo = sum(min(t.vmin * k, t.vmax * k) for t, k in r_terms) + const % cv
    r_hi = sum(max(t.vmin * k, t.vmax * k) for t, k in r_terms) + const % cv
    floor_known = r_lo // cv == r_hi // cv
    if not q_terms and const // cv == 0 and not floor_known:
        return _drop_low_terms(d, terms, const, cv)  # nothing to pull out: drop what cannot reach the next step
    k = r_lo // cv if floor_known else 0
    rem = _sum(dt, r_terms, const % cv - cv * k)
    if d.op is Ops.MOD:
        return _source(d, rem if floor_known else rem % c)
    quot = _sum(dt, q_terms, const // cv + k)
    return _source(d, quot if floor_known else quot + rem // c)


def _split_lane_constant(d: UOp, terms: list[tuple[UOp, int]], const: int, cv: int) -> UOp | None:
    """(S + k) // c and (S + k) % c for S a sum whose coefficients share a factor g > 1 with c > 0 (a vector
    lane's constant over a base of multiples of the lane count: `(r2*16 + 3) % 32`): with r = k % g,
        (S + k) // c = ((S + k - r)/g) // (c/g)   and   (S + k) % c = (((S + k - r)/g) % (c/g))·g + r,
    since S + k - r = g·T for an integer T, floor division and modulo scale by g > 0 (g·T % g·c' = g·(T % c')),
    and g·(T % c') is at most c - g, so adding r < g does not carry. Every lane of a vector then shares one
    quotient and one remainder, plus its constant (`(r2 % 2)*16 + 3`, whose interval is exact). The caller
    checked that no partial sum overflows (T and its parts are smaller than S + k's)."""
    if cv <= 0 or not terms:
        return None
    g = math.gcd(cv, *(k for _, k in terms))
    if g == 1:
        return None
    r = const % g
    inner = _sum(d.dtype, [(t, k // g) for t, k in terms], (const - r) // g)
    if d.op is Ops.IDIV:
        return _source(d, inner // (cv // g))
    rem = (inner % (cv // g)) * g
    return _source(d, rem + r if r else rem)


def _drop_low_terms(d: UOp, terms: list[tuple[UOp, int]], const: int, cv: int) -> UOp | None:
    """(g·T + s) // c = T // (c/g) where g > 1 divides c > 0 and the coefficients of T's terms, and the other terms
    s (with const % g) stay in [0, g): T and s/g < 1 share their floor by c/g, as no multiple of c/g lies in
    (T, T + s/g]. A copy's index `(r0 + r1*4) // 128` for r0 in [0, 3] reads `r1 // 32`. Division only: the
    remainder would need s added back, no simpler than it was. Tries g from the terms' common factors with c,
    largest first; the caller checked that no partial sum overflows."""
    if d.op is not Ops.IDIV or cv <= 0:
        return None
    for g in sorted({math.gcd(cv, k) for _, k in terms} - {1}, reverse=True):
        high = [(t, k // g) for t, k in terms if k % g == 0]
        low = [(t, k) for t, k in terms if k % g != 0]
        r = const % g
        if high and low and r + sum(min(t.vmin * k, t.vmax * k) for t, k in low) >= 0 \
                and r + sum(max(t.vmin * k, t.vmax * k) for t, k in low) < g:
            return _source(d, _sum(d.dtype, high, (const - r) // g) // (cv // g))
    return None


def less_by_factor(x: UOp, c: UOp, u: UOp) -> UOp | None:
    """S + k < c as S/g < ceil((c - k) / g), where g is the greatest common factor of S's coefficients: S + k < c
    exactly when S < c - k, and S/g is an integer. Every lane of a vector's guard (`r2*16 + k < 128` for k in
    0..15) then reads the same `r2 < 8`. Sound if S + k does not overflow (the sum of the terms' bounds fits)."""
    if (parts := _terms(x)) is None:
        return None
    terms, const = parts
    if not terms:
        return None
    g = math.gcd(*(k for _, k in terms))
    if g <= 1 and const == 0:
        return None  # already S < c
    cv = int(c.arg.value)
    bound = abs(const) + abs(cv) + sum(max(abs(t.vmin * k), abs(t.vmax * k)) for t, k in terms)
    if bound > x.dtype.max:
        return None
    return _source(u, _sum(x.dtype, [(t, k // g) for t, k in terms], 0) < -((const - cv) // g))


def merge_mods(x: UOp, c: UOp, c2: UOp) -> UOp | None:
    """x%c + ((x//c)%d)*c = x % (c·d) for c, d > 0 (a row index split into digits, as a head's (h, d) in a merged
    axis): x = (x//c)·c + x%c and x//c = (x//(c·d))·d + (x//c)%d, so x = (x//(c·d))·(c·d) + [((x//c)%d)·c + x%c],
    and the bracket lies in [0, c·d - 1]: it is the remainder by c·d. If c·d fits the dtype."""
    cv, dv = c.arg.value, c2.arg.value
    return x % (cv * dv) if cv > 0 and dv > 0 and cv * dv <= x.dtype.max else None


def nested_idiv(x: UOp, a: UOp, b: UOp) -> UOp | None:
    """(x // a) // b = x // (a·b) for a, b > 0 (floor division composes), if a·b fits the dtype."""
    av, bv = a.arg.value, b.arg.value
    return x // (av * bv) if av > 0 and bv > 0 and av * bv <= x.dtype.max else None


def nested_mod(x: UOp, a: UOp, b: UOp) -> UOp | None:
    """(x % a) % b = x % b when b divides a: x % a differs from x by a multiple of a, hence of b."""
    av, bv = a.arg.value, b.arg.value
    return x % b if av != 0 and bv != 0 and av % bv == 0 else None


# ---------------------------------------------------------------- the rule set
x, y = UPat.var("x"), UPat.var("y")
xi, yi, xib = UPat.var("x", INTS), UPat.var("y", INTS), UPat.var("x", INTS_BOOL)
c, c1, c2 = UPat.cvar("c"), UPat.cvar("c1"), UPat.cvar("c2")


def _op(op: Ops, *src: UPat, name: str | None = None) -> UPat:
    """op(src...) with the sources in this order (commutative ops have their constant on the right)."""
    return UPat(op, src=tuple(src), name=name)


def _any_order(op: Ops, a: UPat, b: UPat, name: str | None = None) -> UPat:
    return UPat(op, src=[a, b], name=name)


def _is(u: UOp, v: int) -> bool:
    return u.arg.value == v


_symbolic_rules: list[tuple[UPat, Callable[..., UOp | None]]] = [
    # commutative ops keep their constant on the right, so every other rule looks there only
    (UPat(GroupOp.Commutative, src=(UPat.cvar("c"), UPat.var("y")), name="u"),
     lambda u, c, y: None if y.op is Ops.CONST else u.replace(src=(y, c))),
    # decided by intervals
    (UPat(GroupOp.Elementwise, dtype=INTS_BOOL, name="x"), fold_point_interval),
    # ---- Add (ints: a ring even when it wraps; bools: Add is Or)
    (_op(Ops.ADD, xib, c), lambda x, c: x if _is(c, 0) else None),
    (_op(Ops.ADD, _op(Ops.ADD, xi, c1), c2), lambda x, c1, c2: x + _fold(Ops.ADD, x.dtype, c1.arg.value, c2.arg.value)),
    (_any_order(Ops.ADD, _op(Ops.ADD, xi, c1), y),  # (x+c)+y -> (x+y)+c: constants move outward, then merge
     lambda x, c1, y: None if y.op is Ops.CONST else (x + y) + c1),
    # collect like terms: x*c1 + x*c2, x + x*c and x + x (so x - x is x*0, hence 0)
    (_any_order(Ops.ADD, _op(Ops.MUL, xi, c1), _op(Ops.MUL, xi, c2)),
     lambda x, c1, c2: x * _fold(Ops.ADD, x.dtype, c1.arg.value, c2.arg.value)),
    (_any_order(Ops.ADD, xi, _op(Ops.MUL, xi, c)), lambda x, c: x * _fold(Ops.ADD, x.dtype, c.arg.value, 1)),
    (_op(Ops.ADD, xi, xi), lambda x: x * 2),
    (_any_order(Ops.ADD, _op(Ops.MOD, xi, c), _op(Ops.MUL, _op(Ops.IDIV, xi, c), c)),  # x%c + (x//c)*c
     lambda x, c: None if _is(c, 0) else x),
    (_any_order(Ops.ADD, _op(Ops.MOD, xi, c), _op(Ops.MUL, _op(Ops.MOD, _op(Ops.IDIV, xi, c), c2), c)), merge_mods),
    # ---- Mul
    (_op(Ops.MUL, x, c), lambda x, c: x if _is(c, 1) else None),  # exact for floats too (nan*1 is nan)
    (_op(Ops.MUL, xib, c, name="m"), lambda x, c, m: _const(m, 0) if _is(c, 0) else None),  # not floats: inf*0
    (_op(Ops.MUL, _op(Ops.MUL, x, c1), c2), lambda x, c1, c2:  # (x*-1)*-1 is exact for floats too
     x * _fold(Ops.MUL, x.dtype, c1.arg.value, c2.arg.value) if x.dtype in INTS
     else x if _is(c1, -1) and _is(c2, -1) else None),
    (_op(Ops.MUL, _op(Ops.ADD, xi, c1), c2),  # distribute constants, so sums stay flat for fold_divmod
     lambda x, c1, c2: x * c2 + _fold(Ops.MUL, x.dtype, c1.arg.value, c2.arg.value)),
    # ---- Idiv, Mod (ints)
    (_op(Ops.IDIV, xi, c), lambda x, c: x if _is(c, 1) else None),
    (_op(Ops.MOD, xi, c, name="m"), lambda x, c, m: _const(m, 0) if _is(c, 1) else None),
    (_op(Ops.IDIV, xi, xi, name="d"), lambda x, d: _const(d, 1) if _nonzero(x) else None),  # x//x: x may be 0
    (_op(Ops.MOD, xi, xi, name="d"), lambda x, d: _const(d, 0) if _nonzero(x) else None),
    (_op(Ops.IDIV, _op(Ops.IDIV, xi, UPat.cvar("a")), UPat.cvar("b")), nested_idiv),
    (_op(Ops.MOD, _op(Ops.MOD, xi, UPat.cvar("a")), UPat.cvar("b")), nested_mod),
    (UPat((Ops.IDIV, Ops.MOD), dtype=INTS, src=(UPat.var("x"), UPat.cvar("c")), name="d"), fold_divmod),
    # ---- Max
    (_op(Ops.MAX, x, x), lambda x: x),  # any dtype: max(nan, nan) is nan
    (_any_order(Ops.MAX, xi, yi, name="m"), max_by_bounds),
    # ---- bitwise (ints and bools)
    (_op(Ops.AND, xib, xib), lambda x: x),
    (_op(Ops.OR, xib, xib), lambda x: x),
    (_op(Ops.XOR, xib, xib, name="u"), lambda x, u: _const(u, 0)),
    (_op(Ops.AND, UPat.var("x", dtypes.bool), UPat.cvar("c", dtypes.bool)), lambda x, c: x if c.arg.value else c),
    (_op(Ops.OR, UPat.var("x", dtypes.bool), UPat.cvar("c", dtypes.bool)), lambda x, c: c if c.arg.value else x),
    # ---- comparisons (ints and bools: a float x may be nan, and nan != nan)
    (_op(Ops.CMPLT, xib, xib, name="u"), lambda x, u: _const(u, False)),
    (_op(Ops.CMPLT, xi, c, name="u"), less_by_factor),
    (_op(Ops.CMPNE, xib, xib, name="u"), lambda x, u: _const(u, False)),
    (_op(Ops.CMPNE, _op(Ops.CMPNE, UPat.var("x", dtypes.bool), UPat.const(dtypes.bool, True)),
         UPat.const(dtypes.bool, True)), lambda x: x),  # not(not(x)) for bools
    # ---- Where, Cast
    (_op(Ops.WHERE, UPat.cvar("c"), x, y, name="w"), lambda c, x, y, w: _source(w, x if c.arg.value else y)),
    (_op(Ops.WHERE, UPat.var("c"), x, x, name="w"), lambda c, x, w: _source(w, x)),
    # a bool mask spelled as a select of its own values (a bool gather's ne(0), a mask's gradient)
    (_op(Ops.WHERE, UPat.var("c", dtypes.bool), UPat.const(dtypes.bool, True), UPat.const(dtypes.bool, False),
         name="w"), lambda c, w: _source(w, c)),
    (_op(Ops.WHERE, UPat.var("c", dtypes.bool), UPat.const(dtypes.bool, False), UPat.const(dtypes.bool, True),
         name="w"), lambda c, w: _source(w, c.logical_not())),
    (UPat(Ops.CAST, name="u"), lambda u: u.src[0] if u.src[0].dtype == u.dtype else None),  # a no-op cast
]

symbolic = PatternMatcher([*constant_folding.rules, *_symbolic_rules], name="symbolic")
