"""Whether a kernel's memory accesses stay inside its buffers, decided before it runs.

Compiled kernels (C, OpenCL, CUDA) do not check their addresses: a loop that runs past a buffer reads or writes
whatever memory lies beyond it, and a crafted graph (a trace file whose Range bounds were edited, a hand-built
kernel) can do that. So a kernel is checked where it is compiled for a device (uopviz.compiler), where BEAM runs
a candidate built in another process, and where a trace file is loaded: every index of a Load or Store, and every
index-typed Index of a value, must lie in [0, size) for every value the kernel's ranges and variables can take. A
buffer of symbolic size counts at its variables' largest values, the size it is allocated at.

An index's interval is its `min_max` (uop.props). Where a gate guards the access (a Load's or Store's gate, an If
around it in a Linear program, the condition of a Where inside the index), the gate's linear constraints
(`a*r0 + b*r1 + c < d`, their negations and conjunctions) narrow the intervals of the subexpressions and ranges they
bound, which then stand in for them; this is what keeps padded reads, clamped in their Where, from being refused.
A comparison over several ranges (a strided, padded window: `0 <= 2*r1 + r3 - 1 < 5`) also bounds its sum itself,
so that an index which computes the same sum through other nodes (`r1*2 + r3 + -1`, where the gate has `r1*-2`) is
bounded as a whole: term by term, each range alone may still reach the padding. Everything else keeps its full
interval, so the check can only be too cautious, never miss an access. Index arithmetic is rendered as C's 32-bit
`int`, so an address computed through an index value that may leave its range (and wrap) is refused too. An access
under a Range that never runs (bound 0) is never made and is not checked.

The work is a pass over the kernel's nodes per distinct set of gates, memoized: it grows with the kernel, not with
its trip counts or lanes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache
from math import gcd
from typing import Any

from uopviz.dtype import dtypes
from uopviz.uop.ops import AddrSpace, GroupOp, Ops, UOp, prod, toposort

INDEX_RANGE = (-2**31, 2**31 - 1)
"""The values index arithmetic holds on every device (the dialects' `int`)."""
MAX_WHERE_DEPTH = 32
"""Wheres nested deeper than this inside an index keep their full interval (a bound on the check's recursion)."""

Sum = frozenset[tuple[UOp, int]]
"""sum(coef * term) over two or more int-valued terms, its coefficients without a common factor."""
Env = frozenset[tuple[UOp | Sum, tuple[int, int]]]
"""What the gates in force say: the interval each narrowed node, and each Sum a comparison bounds, takes under
them."""
LinearForm = tuple[dict[UOp, int], int]
"""sum(coef * term) + const, over int-valued terms."""


class KernelBoundsError(ValueError):
    """A kernel that may read or write outside a buffer: refused before it runs, naming the buffer, the indices
    it may reach and the buffer's size."""

    def __init__(self, kernel: str, access: str, buffer: str, lo: int, hi: int, size: int, why: str = "") -> None:
        self.kernel, self.buffer, self.lo, self.hi, self.size = kernel, buffer, lo, hi, size
        reach = why or f"may reach indices {lo}..{hi}, outside [0, {size})"
        super().__init__(f"kernel {kernel}: {access} {buffer} of {size} elements {reach}")


def check_bounds(root: UOp, name: str) -> None:
    """KernelBoundsError unless every access of a kernel stays inside its buffer. `root` is a Linear program (its
    If blocks gate what they hold) or a kernel graph (a Sink over Stores, as a kernel context's input is)."""
    nodes = list(root.src) if root.op is Ops.LINEAR else root.toposort()
    check = _Check(name)
    addresses = {u.src[0] for u in nodes if u.op in (Ops.LOAD, Ops.STORE, Ops.ATOMIC_ADD, Ops.PREFETCH) and u.src}
    blocks: list[UOp] = []  # the gates of the If blocks open at this instruction
    for u in nodes:
        if u.op is Ops.IF:
            blocks.append(u.src[0])
        elif u.op is Ops.ENDIF and blocks:
            blocks.pop()
        elif u.op in (Ops.LOAD, Ops.STORE, Ops.ATOMIC_ADD) and u.src and u.src[0].op is Ops.INDEX:
            check.access(u, [*blocks, *_own_gate(u)])
        elif u.op is Ops.INDEX and u not in addresses:
            check.access(u, [])  # a value indexed (a lane, a Tensor-level Index): in its shape, ungated


def _own_gate(u: UOp) -> list[UOp]:
    if u.op is Ops.STORE and len(u.src) == 3:
        return [u.src[2]]
    if u.op is Ops.LOAD and len(u.src) > 1:
        g = 2 if len(u.src) == 3 else 1 if u.src[1].dtype != u.src[0].dtype else None  # spec.load_slots
        return [u.src[g]] if g is not None else []
    return []


def _largest(size: int | UOp) -> int:
    """A size at its variables' largest values."""
    return size if isinstance(size, int) else int(size.vmax)


def _describe(base: UOp) -> str:
    mem = base.memory()
    if mem.op is Ops.PARAM:
        return f"Param {mem.arg.slot} ({mem.arg.dtype.name})"
    if mem.op is Ops.BUFFER:
        space = "" if mem.arg.addrspace is AddrSpace.GLOBAL else f"{mem.arg.addrspace.name} "
        return f"{space}Buffer ({mem.arg.dtype.name})"
    return f"a {base.op.value} value of shape {tuple(_largest(d) for d in base.shape)}"


class _Check:
    """One kernel's check: the nodes rewritten under each set of gates, shared by all its accesses."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rewritten: dict[Env, dict[UOp, UOp | None]] = {}
        self.narrowed: dict[tuple[Env, UOp, bool], Env | None] = {}
        self.wraps: dict[UOp, UOp | None] = {}  # a rewritten node -> an index value on its value path that may wrap
        self.names: dict[UOp, str] = {}

    def access(self, u: UOp, gates: Sequence[UOp]) -> None:
        idx = u.src[0] if u.op is not Ops.INDEX else u
        base, indices = idx.src[0], idx.src[1:]
        memory = base.memory().op in (Ops.PARAM, Ops.BUFFER)
        if not memory and not all(i.dtype == dtypes.index for i in indices):
            return  # a Tensor-level Index by data: out-of-range values read 0 by its semantics, never memory
        env: Env = frozenset()
        for g in gates:
            narrowed = self.narrow(env, g, True, 0)
            if narrowed is None:
                return  # the gates never hold together: the access is never made
            env = narrowed
        what = {Ops.LOAD: "a Load from", Ops.STORE: "a Store to", Ops.ATOMIC_ADD: "an AtomicAdd to"}.get(
            u.op, "an Index of")
        dims = [prod(base.shape)] if memory and len(indices) == 1 else list(base.shape)
        if len(indices) > len(dims):
            raise KernelBoundsError(self.name, what, _describe(base), 0, 0, _largest(prod(base.shape)),
                                    f"is indexed on {len(indices)} axes but has {len(dims)}")
        for i, dim in zip(indices, dims, strict=False):
            size = _largest(dim)
            bounded = self.under(i, env, 0)
            if bounded is None or bounded.vmin > bounded.vmax:
                return  # it depends on a range that never runs: never made
            lo, hi = bounded.min_max
            if (lo < 0 or hi >= size) and not _inside_at_every_point(i, gates, size):
                raise KernelBoundsError(self.name, what, _describe(base), lo, hi, size)
            if (wide := self.wraps[bounded]) is not None:
                raise KernelBoundsError(self.name, what, _describe(base), lo, hi, size,
                                        f"is addressed through an index value in {wide.vmin}..{wide.vmax}, which "
                                        "may wrap around the 32-bit int it is computed in")

    # ---- intervals under gates ----
    def under(self, e: UOp, env: Env, depth: int) -> UOp | None:
        """e with each node the env bounds replaced by a variable of that interval, and each Where's branches
        bounded under its condition: a node whose min_max bounds e under env. None where e is never computed (it
        depends on a range that never runs)."""
        memo = self.rewritten.setdefault(env, {})
        if e in memo:
            return memo[e]
        bounds = dict(env)
        sums = any(isinstance(k, frozenset) for k in bounds)
        for u in toposort([e], lambda x: x not in memo):
            if u in memo:
                continue
            out: UOp | None
            if any(memo[s] is None for s in u.src) or (u.op in _LEAVES and u.vmin > u.vmax):
                out = None
            elif u.op is Ops.WHERE and depth < MAX_WHERE_DEPTH and u.shape == ():
                out = self._where(u, env, memo, depth)
            elif depth < MAX_WHERE_DEPTH and (lane := _lane(u)) is not None:
                out = self.under(lane, env, depth + 1)
            else:
                src = tuple(memo[s] for s in u.src)
                out = u if all(a is b for a, b in zip(src, u.src, strict=True)) else u.replace(src=src)
                if out.op in (Ops.IDIV, Ops.MOD):
                    out = self._divided(out)
                elif out.op in (Ops.ADD, Ops.SUB) and out.dtype.is_int and out.shape == ():
                    out = self._recombined(out)
            bound = bounds.get(u)
            if out is not None and sums and u.op in (Ops.ADD, Ops.SUB) and u.dtype.is_int and u.shape == ():
                self._note_wraps(out)
                bound = self._summed(u, out, memo, bounds, bound)
            if bound is not None and out is not None:
                out = self._bounded(u, out, bound)
            memo[u] = out
            if out is not None:
                self._note_wraps(out)
        return memo[e]

    def _note_wraps(self, out: UOp) -> None:
        if out not in self.wraps:
            self.wraps[out] = self._wrapping(out)

    def _summed(self, u: UOp, out: UOp, memo: dict[UOp, UOp | None], bounds: dict[UOp | Sum, tuple[int, int]],
                bound: tuple[int, int] | None) -> tuple[int, int] | None:
        """u's bound met with what the gates say of the Sum u computes (u = g*Sum + k exactly: nothing on the way
        overflows), if they bound it. `out` is u rewritten under the gates, memo its sources."""
        def exact(s: UOp) -> bool:
            r = out if s is u else memo.get(s)
            return r is not None and self._exact(r)

        terms, k = _split(u, exact)
        if len(terms) < 2:
            return bound
        key, g = _sum(terms)
        if key not in bounds:
            return bound
        lo, hi = bounds[key]
        lo, hi = g * lo + k, g * hi + k
        return (lo, hi) if bound is None else (max(lo, bound[0]), min(hi, bound[1]))

    def _bounded(self, u: UOp, via: UOp, bound: tuple[int, int]) -> UOp | None:
        """A variable standing for a node the gates bound, in that bound and (where its sources' value is exact)
        the interval its sources give under the gates; None where the two do not meet."""
        lo, hi = bound
        if self.wraps.get(via) is None:
            lo, hi = max(lo, via.vmin), min(hi, via.vmax)
        if lo > hi:
            return None
        v = UOp.variable(self.names.setdefault(u, f"b{len(self.names)}"), lo, hi)
        return v if u.dtype == dtypes.index else v.cast(u.dtype)

    def _where(self, u: UOp, env: Env, memo: dict[UOp, UOp | None], depth: int) -> UOp | None:
        branches = []
        for truth, s in ((True, u.src[1]), (False, u.src[2])):
            narrowed = self.narrow(env, u.src[0], truth, depth + 1)
            branches.append(None if narrowed is None else self.under(s, narrowed, depth + 1))
        t, f = branches
        if t is None or f is None:
            return f if t is None else t  # a branch the gates rule out is never taken
        cond = memo[u.src[0]]
        assert cond is not None  # t and f are computed, so the condition they depend on is too
        return u.replace(src=(cond, t, f))

    def _wrapping(self, u: UOp) -> UOp | None:
        """An index value on u's value path (not a condition) whose interval leaves INDEX_RANGE, if any."""
        if u.dtype == dtypes.index and u.op is not Ops.DEFINE_VAR and not _inside(u.min_max, INDEX_RANGE):
            return u
        if u.dtype == dtypes.bool:
            return None
        srcs = u.src[1:] if u.op is Ops.WHERE else u.src
        return next((w for s in srcs if (w := self.wraps.get(s)) is not None), None)

    def _exact(self, u: UOp) -> bool:
        """Whether a (rewritten) node's value is what arithmetic on intervals says: nothing on its value path wraps
        and it does not overflow its own dtype (where it might, its interval is its dtype's whole range)."""
        safe = INDEX_RANGE if u.dtype == dtypes.index else (u.dtype.min + 1, u.dtype.max - 1)
        return self.wraps.get(u) is None and _inside(u.min_max, safe)

    def _recombined(self, u: UOp) -> UOp:
        """The sum u with each d·(x // d) + x % d in it put back together as x, and x's own terms merged with the
        rest (floor division: the pair is x exactly), so the index of a flip after a reshape, -2·r·16 + 16·(x // 16)
        + x % 16 with 8·r in x, is bounded as the one sum it is; u itself where it holds no such pair."""
        terms, const = _split(u, self._exact)
        found = False
        while (pair := _pair(terms)) is not None:
            m, q = pair
            c = terms.pop(m)
            terms.pop(q)
            inner, k = _split(m.src[0], self._exact)
            for t, ct in inner.items():
                terms[t] = terms.get(t, 0) + c * ct
            terms = {t: ct for t, ct in terms.items() if ct}
            const, found = const + c * k, True
        if not found:
            return u
        out = UOp.const(u.dtype, const)
        for t, c in terms.items():
            out = t * c + out if c != 1 else t + out
        return out

    def _divided(self, u: UOp) -> UOp:
        """x // d or x % d with the multiples of d in x taken out exactly ((q*d + r) // d = q + r // d, and
        (q*d + r) % d = r % d), and r // d = 0, r % d = r for a remainder below d: a loop of a symbolic bound d
        (range(d)) is, though its interval (to d's largest value) does not say so."""
        x, d = u.src
        if not (u.dtype.is_int and u.shape == () and d.vmin > 0):
            return u
        terms, const = _split(x, self._exact)
        quotient: list[UOp] = []
        rest: dict[UOp, int] = {}
        for t, c in terms.items():
            if (q := _over(t, d)) is not None and self._exact(t):
                quotient.append(q * c if q.op is not Ops.CONST else UOp.const(u.dtype, c * q.arg.value))
            else:
                rest[t] = c
        loop, coef = next(iter(rest.items())) if len(rest) == 1 else (None, 0)
        below = (not rest and 0 <= const < d.vmin) or \
                (const == 0 and coef == 1 and loop is not None and loop.op is Ops.RANGE and loop.src[0] is d)
        if not quotient and not below:
            return u
        r = UOp.const(u.dtype, const)
        for t, c in rest.items():
            r = t * c + r if c != 1 else t + r
        if u.op is Ops.MOD:
            return r if below else r % d
        q = UOp.const(u.dtype, 0)
        for y in quotient:
            q = y + q
        return q if below else q + r // d

    # ---- what a gate says ----
    def narrow(self, env: Env, gate: UOp, truth: bool, depth: int) -> Env | None:
        """env with what `gate == truth` implies for the subexpressions of its linear comparisons; None where it
        cannot hold."""
        key = (env, gate, truth)
        if key not in self.narrowed:
            self.narrowed[key] = self._narrow(env, gate, truth, depth)
        return self.narrowed[key]

    def _narrow(self, env: Env, gate: UOp, truth: bool, depth: int) -> Env | None:
        comparisons = _comparisons(gate, truth)
        if comparisons is None:
            return None
        bounds = dict(env)
        atoms: list[LinearForm] = []
        for a, b, const in comparisons:  # a - b + const <= 0
            sides = [self.under(a, env, depth), self.under(b, env, depth)]
            if any(s is None for s in sides):
                return None  # the gate reads a value that is never computed: it never holds
            if any(self.wraps[s] is not None for s in sides if s is not None):
                continue  # a side that may wrap: its C value is not what intervals say
            for ta, ca in self._forms(a, env, depth):
                for tb, cb in self._forms(b, env, depth):
                    terms = dict(ta)
                    for t, c in tb.items():
                        terms[t] = terms.get(t, 0) - c
                    atoms.append(({t: c for t, c in terms.items() if c}, ca - cb + const))
        for _ in range(2):  # a second sweep lets each atom use what the others found
            for terms, const in atoms:
                ivs = {t: bounds.get(t) or self._interval(t, env, depth) for t in terms}
                lows = {t: min(c * ivs[t][0], c * ivs[t][1]) for t, c in terms.items()}
                least = sum(lows.values()) + const
                if least > 0:
                    return None
                for t, c in terms.items():
                    room = lows[t] - least  # c*t <= room
                    lo, hi = ivs[t]
                    lo, hi = (lo, min(hi, room // c)) if c > 0 else (max(lo, -(room // -c)), hi)
                    if lo > hi:
                        return None
                    if (lo, hi) != ivs[t]:
                        bounds[t] = ivs[t] = (lo, hi)
        for terms, const in atoms:  # sum <= -const, and in what its terms' intervals give
            if len(terms) < 2:
                continue
            ivs = {t: bounds.get(t) or self._interval(t, env, depth) for t in terms}
            least = sum(min(c * ivs[t][0], c * ivs[t][1]) for t, c in terms.items())
            most = min(sum(max(c * ivs[t][0], c * ivs[t][1]) for t, c in terms.items()), -const)
            key, g = _sum(terms)
            negated = frozenset((t, -c) for t, c in key)
            lo, hi = -(-least // g), most // g  # key's interval (g > 0)
            if lo > hi:
                return None
            for k, (low, high) in ((key, (lo, hi)), (negated, (-hi, -lo))):
                was = bounds.get(k, (low, high))
                bounds[k] = (max(low, was[0]), min(high, was[1]))
        return frozenset(bounds.items())

    def _interval(self, e: UOp, env: Env, depth: int) -> tuple[int, int]:
        bounded = self.under(e, env, depth)
        assert bounded is not None  # a part of a gate's side, which is computed
        return bounded.min_max

    def _forms(self, e: UOp, env: Env, depth: int) -> list[LinearForm]:
        """e as linear forms: whole, with its chain of constant offsets peeled (so that a subexpression the index
        shares is bounded), and split into terms (so that each range in it is). A sum or product is split only
        where it cannot overflow its dtype, so its value is the one arithmetic on intervals gives."""
        def exact(u: UOp) -> bool:
            safe = INDEX_RANGE if u.dtype == dtypes.index else (u.dtype.min + 1, u.dtype.max - 1)
            return _inside(self._interval(u, env, depth), safe)

        out: list[LinearForm] = []
        u, const = e, 0
        while True:
            if u.op is Ops.CONST:
                return [*out, ({}, const + int(u.arg.value))]
            out.append(({u: 1}, const))
            k = _const_src(u) if u.op is Ops.ADD and exact(u) else None
            if k is None:
                break
            const += int(u.src[k].arg.value)
            u = u.src[1 - k]
        return [*out, _split(e, exact)]


_LEAVES = frozenset({Ops.RANGE, Ops.SPECIAL, Ops.DEFINE_VAR})
"""The values a kernel loops or is called over: with an empty interval, nothing that reads one is ever computed."""


MAX_POINTS = 1 << 16
"""Where intervals cannot show an index inside its buffer, and the index and its gates depend on at most this many
combinations of range, id and variable values, every combination is computed (_inside_at_every_point)."""


@cache
def _int_ops() -> dict[Ops, Callable[..., Any]]:
    """NumPy's integer ops by UOp (NumPy imported on first use: `import uopviz` stays light)."""
    import numpy as np
    return {Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.IDIV: np.floor_divide, Ops.MOD: np.mod, Ops.MAX: np.maximum,
            Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.AND: np.bitwise_and, Ops.OR: np.bitwise_or,
            Ops.XOR: np.bitwise_xor, Ops.SHL: np.left_shift, Ops.SHR: np.right_shift, Ops.NEG: np.negative,
            Ops.WHERE: np.where}


def _inside_at_every_point(index: UOp, gates: Sequence[UOp], size: int) -> bool:
    """Whether index lies in [0, size) wherever the gates hold, computed at every point of the ranges, ids and
    variables it depends on, where they are few (MAX_POINTS) and it is integer arithmetic on them alone. Exact where
    intervals are not: a flip after a reshape splits one offset into quotients and remainders of differently
    rewritten sums (60·(f // 60) + 5·((f // 5) % 12) + f % 5 is f, 0..179, by intervals -60..239; fuzzer, CPU seed
    82405). False where it cannot tell (too many points, data in the index, a value past 32 bits): the check stays
    cautious."""
    import numpy as np
    ops = _int_ops()
    nodes = toposort([index, *gates])
    if any(u.shape != () or not (u.dtype.is_int or u.dtype.is_bool) for u in nodes):
        return False
    leaves = [u for u in nodes if u.op in _LEAVES]
    if not all(isinstance(u.vmin, int) and isinstance(u.vmax, int) for u in leaves):
        return False
    counts = [int(u.vmax) - int(u.vmin) + 1 for u in leaves]
    if any(n <= 0 for n in counts) or math.prod(counts) > MAX_POINTS:
        return False
    vals: dict[UOp, Any] = {}
    for k, u in enumerate(leaves):  # each leaf along its own axis: every combination by broadcasting
        vals[u] = np.arange(int(u.vmin), int(u.vmax) + 1, dtype=np.int64).reshape(
            [-1 if j == k else 1 for j in range(len(leaves))])
    with np.errstate(all="ignore"):
        for u in nodes:
            if u in vals:
                continue
            if u.op is Ops.CONST:
                vals[u] = np.int64(int(u.arg.value))
            elif u.op is Ops.CAST and u.dtype.itemsize >= u.src[0].dtype.itemsize:  # a value cast keeps
                vals[u] = vals[u.src[0]]
            elif u.op in ops:
                if u.op in (Ops.IDIV, Ops.MOD) and np.any(vals[u.src[1]] == 0):
                    return False
                vals[u] = ops[u.op](*(vals[x] for x in u.src))
            else:
                return False
            if np.any(vals[u] < INDEX_RANGE[0]) or np.any(vals[u] > INDEX_RANGE[1]):
                return False  # 32-bit index arithmetic would wrap
    taken = np.ones(counts, dtype=bool)
    for g in gates:
        taken &= np.broadcast_to(vals[g].astype(bool), counts)
    at = np.broadcast_to(vals[index], counts)[taken]
    return bool(at.size == 0 or (at.min() >= 0 and at.max() < size))


def _lane(u: UOp) -> UOp | None:
    """An Index of a constant lane of a vector value, as that lane's own scalar expression (a Where over vectors
    becomes one over scalars, which its condition then bounds); None where u is no such Index."""
    if u.op is not Ops.INDEX or len(u.src) != 2 or u.src[1].op is not Ops.CONST or u.src[0].memory().op in (
            Ops.PARAM, Ops.BUFFER) or len(u.src[0].shape) != 1:
        return None
    k = u.src[1].arg.value
    order = toposort([u.src[0]], lambda x: len(x.shape) == 1 and (x.op is Ops.STACK or x.op in GroupOp.Elementwise))
    lanes: dict[UOp, UOp] = {}
    for v in order:
        if v.shape == ():
            lanes[v] = v  # a scalar is the same in every lane
        elif v.op is Ops.STACK and len(v.src) == v.shape[0] and 0 <= k < len(v.src):
            lanes[v] = v.src[k]
        elif v.op in GroupOp.Elementwise and all(s in lanes for s in v.src):
            lanes[v] = UOp(v.op, tuple(lanes[s] for s in v.src), v.arg)
    return lanes.get(u.src[0])


def _pair(terms: dict[UOp, int]) -> tuple[UOp, UOp] | None:
    """(x % d, x // d) among the terms with coefficients c and c·d (d a positive constant), if there is such a pair."""
    for m, c in terms.items():
        if m.op is Ops.MOD and m.src[1].op is Ops.CONST and (d := int(m.src[1].arg.value)) > 0:
            for q, cq in terms.items():
                if q.op is Ops.IDIV and q.src[0] is m.src[0] and q.src[1] is m.src[1] and cq == c * d:
                    return m, q
    return None


def _over(t: UOp, d: UOp) -> UOp | None:
    """t / d where d is one of the factors of the product t (a loop over d·d steps by d·d: r*(n*n) is r*n times n),
    else None."""
    if t is d:
        return UOp.const(t.dtype, 1)
    if t.op is not Ops.MUL:
        return None
    for k, s in enumerate(t.src):
        if (q := _over(s, d)) is not None:
            return t.src[1 - k] if q.op is Ops.CONST and q.arg.value == 1 else t.src[1 - k] * q
    return None


def _inside(iv: tuple[int, int], span: tuple[int | float, int | float]) -> bool:
    return span[0] <= iv[0] and iv[1] <= span[1]


def _const_src(u: UOp) -> int | None:
    return next((i for i, s in enumerate(u.src) if s.op is Ops.CONST), None)


def _split(e: UOp, exact: Callable[[UOp], bool]) -> LinearForm:
    """e as sum(coef * term) + const, through the sums, differences and constant multiples that are exact."""
    terms: dict[UOp, int] = {}
    total, todo = 0, [(e, 1)]
    while todo:
        u, c = todo.pop()
        k = _const_src(u) if u.op is Ops.MUL else None
        if u.op is Ops.CONST:
            total += c * int(u.arg.value)
        elif not (u.op in (Ops.ADD, Ops.SUB, Ops.NEG) or k is not None) or not exact(u):
            terms[u] = terms.get(u, 0) + c
        elif u.op is Ops.ADD:
            todo += [(s, c) for s in u.src]
        elif u.op is Ops.SUB:
            todo += [(u.src[0], c), (u.src[1], -c)]
        elif u.op is Ops.NEG:
            todo.append((u.src[0], -c))
        else:
            assert k is not None
            todo.append((u.src[1 - k], c * int(u.src[k].arg.value)))
    return {t: c for t, c in terms.items() if c}, total


def _sum(terms: dict[UOp, int]) -> tuple[Sum, int]:
    """terms as a Sum and the positive factor g taken out of it (terms = g * Sum)."""
    g = gcd(*terms.values())
    return frozenset((t, c // g) for t, c in terms.items()), g


def _comparisons(gate: UOp, truth: bool) -> list[tuple[UOp, UOp, int]] | None:
    """What `gate == truth` implies, as comparisons (a, b, c) of scalar ints meaning a - b + c <= 0; None where it
    is false whatever the values."""
    out: list[tuple[UOp, UOp, int]] = []
    todo, seen = [(gate, truth)], set()
    while todo:
        g, t = todo.pop()
        if (g, t) in seen:
            continue
        seen.add((g, t))
        op, src = g.op, g.src
        if op is Ops.CONST:
            if bool(g.arg.value) != t:
                return None
        elif (op is Ops.AND and t) or (op is Ops.OR and not t):
            todo += [(s, t) for s in src]
        elif op is Ops.NOT:
            todo.append((src[0], not t))
        elif op in (Ops.CMPNE, Ops.XOR, Ops.CMPEQ) and src[0].dtype == dtypes.bool:
            for a, b in (src, src[::-1]):
                if b.op is Ops.CONST:  # a != b is t, so a is (b != t); a == b is t, so a is (b == t)
                    todo.append((a, (b.arg.value == t) if op is Ops.CMPEQ else (b.arg.value != t)))
        elif op in GroupOp.Comparison and all(s.dtype.is_int and s.shape == () for s in src):
            a, b = src if op in (Ops.CMPLT, Ops.CMPGE, Ops.CMPNE, Ops.CMPEQ) else src[::-1]
            less = t if op in (Ops.CMPLT, Ops.CMPGT) else not t if op in (Ops.CMPGE, Ops.CMPLE) else None
            if less is True:
                found = [(a, b, 1)]  # a < b
            elif less is False:
                found = [(b, a, 0)]  # b <= a
            else:
                found = [(a, b, 0), (b, a, 0)] if (op is Ops.CMPNE) != t else []  # a == b
            out += [f for x in found for f in _undivided(x)]
    return out


def _undivided(comparison: tuple[UOp, UOp, int]) -> list[tuple[UOp, UOp, int]]:
    """The comparison a - b + c <= 0 and, where one side is e // d (d a positive constant) and the other a constant,
    the same fact about e, repeatedly: floor division is monotone, so e // d <= m is e <= m·d + d − 1 and
    e // d >= m is e >= m·d (a vector load's gate bounds `(i*2)//3`, its index `i*2`)."""
    out = [comparison]
    while True:
        a, b, c = out[-1]
        if a.op is Ops.IDIV and b.op is Ops.CONST and _const_src(a) == 1 and a.src[1].arg.value > 0:
            d, m = int(a.src[1].arg.value), int(b.arg.value) - c  # e // d <= m
            out.append((a.src[0], UOp.const(a.dtype, m * d + d - 1), 0))
        elif b.op is Ops.IDIV and a.op is Ops.CONST and _const_src(b) == 1 and b.src[1].arg.value > 0:
            d, m = int(b.src[1].arg.value), int(a.arg.value) + c  # e // d >= m
            out.append((UOp.const(b.dtype, m * d), b.src[0], 0))
        else:
            return out
