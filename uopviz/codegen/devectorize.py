"""Devectorize: the vectors Expand made (values of shape (N,)) become what the target has, its vector types where
the dialect has the op in vector form, and scalar code lane by lane everywhere else.

Node by node, in graph order:
- index arithmetic is always split into lanes, so every address is an exact scalar expression; a sum or a product
  by a constant of vectors whose lanes are one base plus constants (`Runs`: what an expanded range starts as) is
  simplified once, its base, and its lanes are that base plus their constants, the rest lane by lane, each lane
  simplified;
- a Load or Store whose lanes address consecutive elements becomes one vector access, Index(buf, base + iota),
  which the renderer writes as a vector load or store; lanes that all address one element load it once (a scalar
  that its users broadcast); a Load of every other element is two vector loads and a shuffle; other addresses
  gather (a Stack of scalar loads) or scatter (a Group of scalar stores in lane order, so the last lane wins as it
  did in the copies); lanes consecutive where their index selects take their first choice (a Pad's clamp) are one
  vector load under that condition, and a select on the same condition of that load (the Pad's) is the load, its
  other value the load's alternative; a gather's lanes clamped by one select each choose between two whole
  addresses (`selects_outside`);
- a comparison of index lanes is simplified as addresses are: lanes that read one node (a concatenation's guard)
  are that scalar, and an op of scalars is one scalar op;
- an ALU op the target has in vector form stays one vector op (a comparison makes a lane mask, which feeds Where
  and logic ops on values of its width); any other op is split into a Stack of its lanes;
- a lane taken of a split vector folds into that lane;
- last, gathers that read neighbouring columns of the same rows become vector loads and shuffles (transpose.py).
A target without vectors (the PYTHON interpreter) gets scalar code only, the program the copies would have made.
"""

from __future__ import annotations

from typing import NamedTuple

from uopviz.codegen.lanes import MASKS, broadcast, iota, lane, mask_dtype, width
from uopviz.codegen.transpose import transpose_gathers
from uopviz.dtype import DType, dtypes
from uopviz.target import Target
from uopviz.uop.ops import GroupOp, Ops, UOp, toposort
from uopviz.uop.pattern import graph_rewrite, set_recorder
from uopviz.uop.symbolic import affine, symbolic

VECTOR_DTYPES = frozenset({dtypes.float32, dtypes.float64, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64})
_LANEWISE = frozenset({Ops.ADD, Ops.MUL, Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR, Ops.MAX, Ops.RECIP, Ops.WHERE})
_COMPARE = frozenset({Ops.CMPLT, Ops.CMPNE})
_MEMORY = frozenset({Ops.PARAM, Ops.BUFFER})


def _simplified(x: UOp, memo: dict[UOp, UOp] | None = None) -> UOp:
    """Symbolic simplification, not recorded: a detail of this pass, not a pass of its own. `memo`: what nodes
    simplified to in earlier calls (one per kernel), so the lanes of an address, which share most of their terms,
    simplify each shared term once."""
    prev = set_recorder(None)
    try:
        return graph_rewrite(x, symbolic, memo=memo)
    finally:
        set_recorder(prev)


def _is_memory(x: UOp) -> bool:
    return x.memory().op in _MEMORY


class Runs(NamedTuple):
    """An index vector whose lane i is base + offsets[i]: base simplified, with no constant term of its own."""

    base: UOp
    offsets: tuple[int, ...]


def _plus(base: UOp, k: int) -> UOp:
    """base + k as symbolic simplification writes it, for a simplified base without a constant term (a constant
    base is 0): the constant alone, base itself, or base + k."""
    if base.op is Ops.CONST:
        return UOp.const(dtypes.index, k)
    return base if k == 0 else base + k


def _runs_of(simplified: UOp, offsets: tuple[int, ...]) -> Runs:
    """Runs of a simplified base whose constant term moves into the offsets (a constant base becomes 0)."""
    if simplified.op is Ops.CONST:
        return Runs(UOp.const(dtypes.index, 0), tuple(o + int(simplified.arg.value) for o in offsets))
    if simplified.op is Ops.ADD and simplified.src[1].op is Ops.CONST:
        k = int(simplified.src[1].arg.value)
        return Runs(simplified.src[0], tuple(o + k for o in offsets))
    return Runs(simplified, offsets)


class _Devectorizer:
    def __init__(self, target: Target, emulated: frozenset[str]) -> None:
        self.target, self.emulated = target, emulated
        self.new: dict[UOp, UOp] = {}
        self.memo: dict[UOp, UOp] = {}  # symbolic simplification's results, shared by every lane (`_simplified`)
        self.runs: dict[UOp, Runs] = {}  # index vectors (their Stacks) known as Runs

    def storable(self, dt: DType, n: int) -> bool:
        """Whether n lanes of dt make one of the target's vector types."""
        return n in self.target.vectors and dt in VECTOR_DTYPES and dt.name not in self.emulated

    def split(self, u: UOp, src: list[UOp]) -> UOp:
        """u computed lane by lane."""
        n = width(u)
        return UOp(Ops.STACK, tuple(u.replace(src=tuple(lane(s, i) for s in src)) for i in range(n)))

    def operand_ok(self, s: UOp, n: int, mask: DType | None) -> bool:
        """Whether a (new) source can feed an n-lane vector op whose lane masks are of type `mask`."""
        if not s.shape:
            return not s.dtype.is_bool or mask is not None
        if s.dtype.is_bool:
            return mask is not None and mask_dtype(s) == mask
        return self.storable(s.dtype, n)

    def alu(self, u: UOp, src: list[UOp]) -> UOp:
        n, op = width(u), u.op
        if op in _COMPARE and u.src[0].dtype == dtypes.index:  # a guard's lanes, simplified as addresses are
            return _uniform(_simplified(self.split(u, src), self.memo))
        if n not in self.target.vectors:
            return self.split(u, src)
        if (form := _vector_form(u, src, self.target.vector_functions)) is not None:
            return self.within(form, src)
        if op is Ops.WHERE and (load := _select_of_guarded(*src)) is not None:
            return load
        values = src[1:] if op is Ops.WHERE else src
        dt = values[0].dtype
        if op in _COMPARE and not dt.is_bool:  # lane masks as wide as the lanes compared
            if self.storable(dt, n) and dt.itemsize in MASKS and all(self.operand_ok(s, n, None) for s in src):
                return u.replace(src=tuple(src))
        elif dt.is_bool and op in (Ops.AND, Ops.OR, Ops.XOR, Ops.CMPNE):  # logic on masks of one width
            masks = {mask_dtype(s) for s in src if s.shape}
            if len(masks) == 1 and None not in masks:
                return u.replace(src=tuple(src))
        elif self.storable(u.dtype, n) and self._has_vector_form(u, dt):
            mask = MASKS.get(u.dtype.itemsize) if op is Ops.WHERE else None  # a select's mask is as wide as its values
            if all(self.operand_ok(s, n, mask) for s in src):
                return u.replace(src=tuple(src))
        return self.split(u, src)

    def _has_vector_form(self, u: UOp, dt: DType) -> bool:
        op = u.op
        if op in _LANEWISE:
            return True
        if op in (Ops.IDIV, Ops.MOD):  # C's truncating / and % are the floor forms only for non-negative operands
            return dt.is_int and (dt.is_unsigned or all(isinstance(s.vmin, int) and s.vmin >= 0 for s in u.src))
        if op is Ops.CAST:
            return self.storable(dt, width(u))
        if op is Ops.BITCAST:
            return self.storable(dt, width(u)) and dt.itemsize == u.dtype.itemsize
        return op in self.target.vector_functions and dt.is_float

    def within(self, form: UOp, leaves: list[UOp]) -> UOp:
        """Devectorize a replacement built on already devectorized sources (its leaves): the nodes between form and
        its leaves only, never the leaves' own graph again (a walk below them made each of a kernel's Truncs and
        shifts cost the whole kernel so far: an 80-op chain's Truncs alone spent 12 s on 700,000 nodes)."""
        outer, self.new = self.new, {x: x for x in leaves}
        try:
            for x in toposort([form], gate=lambda x: x not in self.new):
                if x not in self.new:
                    self.new[x] = self.node(x)
            return self.new[form]
        finally:
            self.new = outer

    def address(self, idx: UOp) -> tuple[UOp, list[UOp] | None, Runs | None]:
        """(buffer, lane addresses, their Runs where known) of a memory Index; lanes None for a scalar address."""
        buf, addr = self.new[idx.src[0]], self.new[idx.src[1]]
        return buf, (list(addr.src) if addr.shape else None), self.runs.get(addr)

    def contiguous(self, addrs: list[UOp], runs: Runs | None = None) -> bool:
        """Whether lane i addresses element base + i: Runs whose offsets step by one, else the lanes are the same
        affine sum plus constants 0, 1, ... (simplification orders a sum's terms as they came, so row r's lanes of
        a tile can differ in order only), else their differences simplify to those constants."""
        if runs is not None:
            return all(o - runs.offsets[0] == i for i, o in enumerate(runs.offsets))
        sums = [affine(a) for a in addrs]
        if all(t == sums[0][0] for t, _ in sums):  # the same terms: the constants decide
            return all(c - sums[0][1] == i for i, (_, c) in enumerate(sums))
        steps = (_simplified(a - addrs[0], self.memo) for a in addrs)  # lazily: the first lane that is not stops
        return all(d.op is Ops.CONST and d.arg.value == i for i, d in enumerate(steps))

    def load(self, u: UOp, src: list[UOp]) -> UOp:
        buf, addrs, runs = self.address(u.src[0])
        rest = src[1:]
        if addrs is None and not any(s.shape for s in rest):
            return u.replace(src=tuple(src))
        n = width(u)
        if not any(s.shape for s in rest) and addrs is not None:
            if all(a is addrs[0] for a in addrs):
                return u.replace(src=(buf.index(addrs[0]), *rest))
            if self.storable(u.dtype, n) and not rest and self.contiguous(addrs, runs):
                return u.replace(src=(UOp(Ops.INDEX, (buf, UOp(Ops.ADD, (addrs[0], iota(n))))),))
            if self.storable(u.dtype, n) and not rest and (pair := self.every_other(u, buf, runs)) is not None:
                return pair
            if self.storable(u.dtype, n) and not rest and (guarded := self.guarded(u, buf, addrs)) is not None:
                return guarded
        at = self.selects_outside(addrs) if addrs is not None else [src[0].src[1]] * n
        return UOp(Ops.STACK, tuple(u.replace(src=(buf.index(at[i]), *(lane(s, i) for s in rest))) for i in range(n)))

    def selects_outside(self, addrs: list[UOp]) -> list[UOp]:
        """A gather's lane addresses whose index selects all test one condition c (a Pad's clamp, in every term it
        reaches: `(c ? r*16 + k : 0) % 32` and `// 32`) as `c ? first : second`, each the address with every select
        taking that choice, simplified: exact, since the selects all choose alike. Only where that makes every
        lane's first and second the same sums plus constants and the lanes were not (a transposed piece of a
        concatenation: lane k reads base + 64k), so the lanes share the arithmetic the selects kept apart (sixteen
        selects, modulos and quotients per lane); the addresses as they were elsewhere (a padded convolution's
        `(c ? r : 0)*3 + k` shares it already)."""
        def shared(xs: list[UOp]) -> bool:
            return len({frozenset(affine(x)[0].items()) for x in xs}) == 1

        if shared(addrs):
            return addrs
        split: list[tuple[UOp, UOp, UOp]] = []
        for a in addrs:
            selects = {x: x.src for x in a.toposort() if x.op is Ops.WHERE and x.dtype == dtypes.index}
            if len({c for c, _, _ in selects.values()}) != 1:
                return addrs
            firsts, seconds = ({x: srcs[i] for x, srcs in selects.items()} for i in (1, 2))
            c = next(iter(selects.values()))[0]
            first, second = (_simplified(a.substitute(choice), self.memo) for choice in (firsts, seconds))
            split.append((c, first, second))
        if any(c is not split[0][0] for c, _, _ in split) or not all(shared([x[i] for x in split]) for i in (1, 2)):
            return addrs
        return [c.where(first, second) for c, first, second in split]

    def every_other(self, u: UOp, buf: UOp, runs: Runs | None) -> UOp | None:
        """Lanes two elements apart (a stride-2 convolution's row): two vector loads, of the first n elements the
        lanes span and of the last n, each lane taken from one (a two-vector shuffle: one vpermi2ps on AVX-512),
        where the gather was n scalar loads and inserts (a 3x3 stride-2 conv ran at half a stride-1 one's rate).
        Both loads stay within the elements the gather read. None for other addresses, and under 4 lanes (two
        scalar loads cost no more)."""
        if runs is None or (n := len(runs.offsets)) < 4:
            return None
        first = runs.offsets[0]
        if any(o - first != 2 * i for i, o in enumerate(runs.offsets)):
            return None
        low, high = (u.replace(src=(UOp(Ops.INDEX, (buf, UOp(Ops.ADD, (_plus(runs.base, at), iota(n))))),))
                     for at in (first, first + n - 1))
        return UOp(Ops.STACK, tuple(lane(low, 2 * i) if 2 * i < n else lane(high, 2 * i - n + 1) for i in range(n)))

    def guarded(self, u: UOp, buf: UOp, addrs: list[UOp]) -> UOp | None:
        """Lanes whose addresses are consecutive once every select in them takes its first choice (a padded axis
        clamped for indexing: `i < n ? i : n-1`): one vector load where all those conditions hold, else the gather,
        each lane's load gated on the other case so that C and OpenCL compilers keep it off the vector path.
        None where the addresses are not of that form."""
        whens: list[UOp] = []
        firsts = [first_choices(a, whens, self.memo) for a in addrs]
        if not whens or not self.contiguous(firsts):
            return None
        guard = _all(whens, self.memo)
        if guard is None:
            return None
        vector = UOp(Ops.INDEX, (buf, UOp(Ops.ADD, (firsts[0], iota(len(addrs))))))
        if guard.op is Ops.CONST:
            return u.replace(src=(vector,))
        slow = guard.logical_not()
        zero = UOp.const(u.dtype, 0)
        gather = UOp(Ops.STACK, tuple(u.replace(src=(buf.index(a), zero, slow)) for a in addrs))
        return u.replace(src=(vector, gather, guard))

    def store(self, u: UOp, src: list[UOp]) -> UOp:
        buf, addrs, runs = self.address(u.src[0])
        val, gate = src[1], src[2:]
        if addrs is None and not val.shape and not any(g.shape for g in gate):
            return u.replace(src=tuple(src))
        n = len(addrs) if addrs is not None else width(val) if val.shape else width(gate[0])
        if addrs is not None and not any(g.shape for g in gate) and self.storable(val.dtype, n) and \
                self.contiguous(addrs, runs):
            return u.replace(src=(UOp(Ops.INDEX, (buf, UOp(Ops.ADD, (addrs[0], iota(n))))), broadcast(val, n), *gate))
        at = addrs or [src[0].src[1]] * n
        return UOp(Ops.GROUP, tuple(UOp(Ops.STORE, (buf.index(at[i]), lane(val, i), *(lane(g, i) for g in gate)))
                                    for i in range(n)))

    def node(self, u: UOp) -> UOp:
        src = [self.new[s] for s in u.src]
        op = u.op
        if op is Ops.INDEX and _is_memory(u.src[0]):
            return u.replace(src=tuple(src))  # the Load or Store that uses it decides its form
        if op is Ops.LOAD:
            return self.load(u, src)
        if op is Ops.STORE:
            return self.store(u, src)
        if op is Ops.INDEX and u.src[0].shape and not u.shape:  # a lane of a vector
            i = int(u.src[1].arg.value)
            return src[0].src[i] if src[0].op is Ops.STACK else u.replace(src=tuple(src))
        if not u.shape or (op not in GroupOp.Elementwise and op is not Ops.BITCAST):
            return u.replace(src=tuple(src))
        if u.dtype == dtypes.index:
            return self.index(u, src)
        if not any(s.shape for s in src):  # an op of scalars (each every lane of itself: `_uniform`) is one scalar
            return u.replace(src=tuple(src))
        return self.alu(u, src)

    def index(self, u: UOp, src: list[UOp]) -> UOp:
        """Index arithmetic as a Stack of simplified lanes. A sum, or a product by a constant, of Runs (and scalars)
        is simplified once, as its base, where each lane alone would be (an address's terms above the lane's
        constant are the same in every lane: 16 lanes of a 30-node address simplified the 30 nodes 16 times)."""
        n = width(u)
        runs = [self.runs_of(s, n) for s in src]
        out: Runs | None = None
        if u.op is Ops.ADD and (a := runs[0]) is not None and (b := runs[1]) is not None:
            base = b.base if a.base.op is Ops.CONST else a.base if b.base.op is Ops.CONST else a.base + b.base
            out = _runs_of(_simplified(base, self.memo), tuple(x + y for x, y in zip(a.offsets, b.offsets)))
        elif u.op is Ops.MUL and runs[0] is not None and src[1].op is Ops.CONST:
            k = int(src[1].arg.value)
            out = _runs_of(_simplified(runs[0].base * k, self.memo), tuple(o * k for o in runs[0].offsets))
        if out is None:
            return _simplified(self.split(u, src), self.memo)
        vec = UOp(Ops.STACK, tuple(_plus(out.base, o) for o in out.offsets))
        self.runs[vec] = out
        return vec

    def runs_of(self, v: UOp, n: int) -> Runs | None:
        """A devectorized index value as Runs of n lanes where it is one: a scalar (its every lane), a Stack of
        constants (an expanded range), or a vector made as Runs; None otherwise."""
        if not v.shape:
            return _runs_of(v, (0,) * n)
        if (known := self.runs.get(v)) is not None:
            return known
        if v.op is Ops.STACK and all(x.op is Ops.CONST for x in v.src):
            return Runs(UOp.const(dtypes.index, 0), tuple(int(x.arg.value) for x in v.src))
        return None

    def run(self, sink: UOp) -> UOp:
        for u in sink.toposort():
            self.new[u] = self.node(u)
        return self.new[sink]


def _select_of_guarded(c: UOp, a: UOp, b: UOp) -> UOp | None:
    """c ? L : b for L a guarded load (`_Devectorizer.guarded`) gated on c itself, as L with b for its alternative:
    L's gather serves the lanes where c fails, which this select discards (a Pad's select of a read whose index
    it clamped: a concatenation's pieces), so it was loaded and thrown away. None for any other select."""
    if a.op is not Ops.LOAD or len(a.src) != 3 or a.src[2] is not c or c.shape:
        return None
    return a.replace(src=(a.src[0], broadcast(b, width(a)), c))


def _uniform(v: UOp) -> UOp:
    """A Stack whose lanes are one node as that node (a scalar is every lane of itself), so its users take it
    whole: a concatenation's guard `r2*16 + k < 256` reads `r2 < 16` in every lane, and a select on it stays one
    vector select where sixteen lanes of one bool split it into scalar selects."""
    return v.src[0] if v.op is Ops.STACK and all(x is v.src[0] for x in v.src) else v


def _vector_form(u: UOp, src: list[UOp], functions: frozenset[Ops]) -> UOp | None:
    """u rebuilt from ops with vector forms, where it has none itself: floor division and modulo by a power of
    two as an arithmetic shift and a mask (two's complement makes them exact), and, where the dialect has no vector
    trunc (C's vector extensions), Trunc as a round trip through the same-width integer with the sign bit put back
    (-0.0 stays -0.0), for lanes below 2^mantissa: larger floats are integers already and pass as they are."""
    op, dt = u.op, u.dtype
    if op is Ops.WHERE and dt.is_bool:
        return _bool_select(*src)
    if op in (Ops.IDIV, Ops.MOD) and dt.kind == "i" and src[1].op is Ops.CONST:
        c = int(src[1].arg.value)
        if c > 0 and c & (c - 1) == 0:
            return src[0].alu(Ops.SHR, c.bit_length() - 1) if op is Ops.IDIV else src[0].alu(Ops.AND, c - 1)
    if op is Ops.TRUNC and Ops.TRUNC not in functions and dt in (dtypes.float32, dtypes.float64):
        it, ut = (dtypes.int32, dtypes.uint32) if dt is dtypes.float32 else (dtypes.int64, dtypes.uint64)
        big, sign = float(2 ** (23 if dt is dtypes.float32 else 52)), 1 << (8 * dt.itemsize - 1)
        x, bits = src[0], src[0].bitcast(ut)
        small = bits.alu(Ops.AND, sign - 1).bitcast(dt).alu(Ops.CMPLT, big)  # |x| < big: false for nan and inf
        t = small.where(x, 0.0).cast(it).cast(dt)  # only small lanes convert (others would overflow the integer)
        t = t.bitcast(ut).alu(Ops.OR, bits.alu(Ops.AND, sign)).bitcast(dt)
        return small.where(t, x)
    return None


def _bool_select(c: UOp, a: UOp, b: UOp) -> UOp | None:
    """c ? a : b on bools as logic on c, a and b, which keeps the lane masks of comparisons as they are: a select's
    mask is as wide as its values, a byte for bools, where a comparison's is as wide as the values it compared, so
    the select split into lanes, and every select it fed (a causal mask, `tril()` of ones: where(c, True, False),
    split the masked fill of each attention row, 16 scalar selects per vector). None where both are constants."""
    const = {x: bool(x.arg.value) for x in (a, b) if x.op is Ops.CONST}
    if len(const) == 2 and const[a] == const[b]:
        return None
    not_c = c.alu(Ops.CMPNE, True)
    if a in const and b in const:
        return c if const[a] else not_c
    if a in const:
        return c.alu(Ops.OR, b) if const[a] else not_c.alu(Ops.AND, b)
    if b in const:
        return not_c.alu(Ops.OR, a) if const[b] else c.alu(Ops.AND, a)
    return c.alu(Ops.AND, a).alu(Ops.OR, not_c.alu(Ops.AND, b))


def first_choices(addr: UOp, whens: list[UOp], memo: dict[UOp, UOp] | None = None) -> UOp:
    """addr with each index select `c ? x : y` replaced by x, simplified; each c (as it was) is added to whens.
    addr itself where it has none (the addresses asked about are simplified already: most have no select, and
    simplifying each again was most of prefetch's time). `memo`: see `_simplified`."""
    selects = {x: x.src[1] for x in addr.toposort() if x.op is Ops.WHERE and x.dtype == dtypes.index}
    if not selects:
        return addr
    whens += [x.src[0] for x in selects]
    return _simplified(addr.substitute(selects), memo)


def _all(conds: list[UOp], memo: dict[UOp, UOp] | None = None) -> UOp | None:
    """The conjunction of conds, each simplified, those always true and those another implies left out (`a < n`
    when `a + k < n` with k >= 0 is there too); None if one is never true."""
    kept: list[UOp] = []
    for c in dict.fromkeys(_simplified(c, memo) for c in conds):
        if c.op is Ops.CONST:
            if not c.arg.value:
                return None
            continue
        kept.append(c)

    def implied(c: UOp) -> bool:
        return c.op is Ops.CMPLT and any(
            d is not c and d.op is Ops.CMPLT and d.src[1] is c.src[1] and
            (k := _simplified(d.src[0] - c.src[0], memo)).op is Ops.CONST and k.arg.value >= 0 and
            (k.arg.value > 0 or kept.index(d) < kept.index(c)) for d in kept)
    kept = [c for c in kept if not implied(c)]
    if not kept:
        return UOp.const(dtypes.bool, True)
    out = kept[0]
    for c in kept[1:]:
        out = out & c
    return out


def devectorize(sink: UOp, target: Target) -> UOp:
    """The kernel with each vector value in the target's vector type or split into scalar lanes."""
    if not any(u.op is Ops.STACK and u.dtype == dtypes.index for u in sink.toposort()):
        return sink
    devectorizer = _Devectorizer(target, target.emulated)
    return transpose_gathers(devectorizer.run(sink), devectorizer.storable)
