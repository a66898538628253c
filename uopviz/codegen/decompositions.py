"""Instruction selection: SPEC's decomposed elementwise ops rewritten into primitives, for targets without them.

`decompose(native)` rewrites every decomposed op that is not in `native` (a target with a hardware exp2 keeps
Exp2). The rules build only primitives, or other decomposed ops that the same pass rewrites in turn (Sub
becomes Add(A, Neg(B)), Sqrt becomes Exp2/Log2), so a target's native ops are kept wherever they appear.
Every rule keeps the node's dtype and shape: constants are scalars of the operand's dtype and broadcast.

The float algorithms (float32 and float64; float16/bfloat16 are computed in float32 and rounded back):
- Exp2: x clamped to [lo, hi] (beyond, every input gives the same 0 or inf) by a compare and a select each, so a
  nan fails both compares, stays nan through all the arithmetic, and needs no test of its own; x = n + f with n
  the nearest integer (t = x + 1.5·2^mant + 2·bias, rounded, then less the same), |f| ≤ ½; 2^f by a polynomial
  (float32: degree 6 through Chebyshev nodes, near-minimax; float64: Taylor, degree 13); 2^n as two factors
  2^⌊n/2⌋ and 2^⌈n/2⌉ whose exponent fields are t's bits shifted (no float-to-int conversion), so huge results
  overflow to inf and tiny ones round once into subnormals or 0. About 20 AVX-512 instructions in float32.
  Measured over the whole input range, float32: ≤ 1.23 ulp with each product and sum rounded on its own (the
  worst near f = −½), ≤ 0.95 ulp with fused multiply-adds, as the CPU runs it; float64: ≤ 1 ulp.
- Log2: subnormals scaled by 2^(p+1) first; the exponent field by Bitcast/Shr/And; the mantissa m = 1 + f put in
  [√½, √2); ln m = 2·atanh(s), s = f/(2+f), written as f − (h − s·(h + R)) with h = f²/2 and R the atanh series
  beyond its first term (as fdlibm does), so the rounding of the division only touches a small correction.
  Measured ≤ 1.5 ulp (float32), ≤ 1 ulp (float64) for all finite x > 0, subnormals included.
- Sin: r = x − k·π/2, |r| ≤ π/4; Taylor sin/cos on r; the quadrant k mod 4 picks sin/cos and the sign.
  float32 (and the halves) reduce over the whole float range, in float64: 2/π is split into 26-bit parts, so
  x·part is exact (24 + 26 bits), and each product is taken mod 4 exactly into [−2, 2] (t − 4·round(t/4), which
  keeps a small t whole, so tiny x lose nothing); their sum is
  x·2/π mod 4 with float64's precision even at 3.4e38 (the parts reach 2^-234, beyond the 2^128 of the largest
  float32 plus 53 bits). float64 uses Cody–Waite (π/2 in 27-bit parts, k·part exact) for |x| < 2^26, and
  Payne–Hanek beyond (to the largest double): x's 53-bit mantissa times the 192 bits of 2/π that x's exponent
  selects (a chain of selects over a table of 64-bit words of 2/π), in 32-bit limbs, mod 4; the fraction is
  converted from its leading bits, so a reduced value near 0 keeps its digits. Measured ≤ 1 ulp (float32, whole
  range), ≤ 1 ulp (float64, |x| ≤ 1e6), ≤ 2 ulp (float64, whole range, against NumPy). inf, nan → nan.
- Sqrt: SPEC's Exp2(½·Log2(A)), then one Newton step y + (x/y − y)/2, which squares the relative error of the
  estimate: measured ≤ 1.2 ulp (float32), ≤ 1 ulp (float64). ±0, +inf and nan are returned as they are;
  x < 0 gives nan.
- Pow: Exp2(Log2(|A|)·B), with C's pow edge cases: a negative base needs an integral exponent (else nan) and
  an odd one makes the result negative (also for −0 and −inf); pow(x, ±0) = 1, pow(1, y) = 1 and
  pow(−1, ±inf) = 1, even for nan operands. The relative error grows with |log2 result| (it is Exp2's ulp
  error plus |B·Log2(A)|·ln2 times Log2's): about 2^-24·|log2 result|·(few) in float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import cache
from typing import NamedTuple

from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import AddrSpace, Ops, SpecError, UOp
from uopviz.uop.pattern import PatternMatcher, UPat


def _pi_bits(bits: int) -> int:
    """⌊π·2^bits⌋ (up to an error of a unit in the last place), by Machin's formula in integers: float64's
    Payne–Hanek reduction reads 2/π to beyond its 1100th bit, more than a written-out constant would be."""
    guard = 1 << (bits + 32)

    def arccot(n: int) -> int:  # arccot(n)·guard = Σ (−1)^k / ((2k+1)·n^(2k+1))
        total = term = guard // n
        k, sign = 3, -1
        while term:
            term //= n * n
            total += sign * (term // k)
            k, sign = k + 2, -sign
        return total

    return (16 * arccot(5) - 4 * arccot(239)) >> 32


_PI = Fraction(_pi_bits(1300), 1 << 1300)


# ---------------------------------------------------------------- per-format constants
def _split(v: Fraction, bits: int, parts: int) -> tuple[float, ...]:
    """v as `parts` numbers of `bits` significant bits each, plus the (rounded) rest, summing to v (Cody–Waite).
    k·part is exact for every |k| < 2^(precision − bits), so x − k·part loses nothing."""
    out: list[float] = []
    for _ in range(parts):
        scale = Fraction(2) ** (bits - math.frexp(float(v))[1])
        head = Fraction(round(v * scale)) / scale
        out.append(float(head))
        v -= head
    return (*out, float(v))


class _Format(NamedTuple):
    """What the float algorithms need to know about one IEEE format."""

    uint: DType  # the same-width unsigned integer, to take bit fields apart
    sint: DType  # the same-width signed integer (sin's quadrant, signs)
    mant: int  # stored mantissa bits
    bias: int
    exp2_poly: tuple[float, ...]  # 2^f for |f| ≤ ½
    log2_poly: tuple[float, ...]  # (2·atanh(s) − 2s)/s³ as a series in s², |s| ≤ (√2−1)/(√2+1)
    sin_poly: tuple[float, ...]  # (sin r − r)/r³ in r², |r| ≤ π/4
    cos_poly: tuple[float, ...]  # (cos r − 1)/r² in r²
    pio2: tuple[float, ...]  # π/2 split for Cody–Waite reduction

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def exp2_range(self) -> tuple[float, float]:
        """Inputs clamped to this range give the same exp2 (0 below: under half the least subnormal; inf above)."""
        return float(1 - self.bias - self.mant - 3), float(self.bias + 2)


def interpolant(fn: Callable[[float], float], deg: int, half: float) -> tuple[float, ...]:
    """The coefficients (lowest first) of the polynomial of degree `deg` through fn at the Chebyshev nodes of
    [−half, half]: close to the minimax polynomial, so a degree lower than Taylor's meets the same error. Solved
    exactly from fn's float64 values, which makes the coefficients accurate enough for float32 (not float64)."""
    xs = [Fraction(half * math.cos((2 * i + 1) * math.pi / (2 * deg + 2))) for i in range(deg + 1)]
    rows = [[x ** k for k in range(deg + 1)] + [Fraction(fn(float(x)))] for x in xs]
    for c in range(deg + 1):  # Gauss–Jordan: the nodes are distinct, so no pivot is 0
        rows[c] = [v / rows[c][c] for v in rows[c]]
        for r in range(deg + 1):
            if r != c:
                rows[r] = [a - rows[r][c] * b for a, b in zip(rows[r], rows[c])]
    return tuple(float(row[-1]) for row in rows)


def _format(uint: DType, sint: DType, mant: int, bias: int, exp2_poly: tuple[float, ...], log2_terms: int,
            sin_terms: int, pio2_bits: int, pio2_parts: int) -> _Format:
    """Taylor degrees (log2, sin, cos) are chosen so the first dropped term is below ¼ ulp at the end of the
    interval; exp2's polynomial is given."""
    return _Format(
        uint, sint, mant, bias, exp2_poly,
        tuple(2 / (2 * k + 3) for k in range(log2_terms)),
        tuple((-1) ** (j + 1) / math.factorial(2 * j + 3) for j in range(sin_terms)),
        tuple((-1) ** (j + 1) / math.factorial(2 * j + 2) for j in range(sin_terms + 1)),
        _split(_PI / 2, pio2_bits, pio2_parts))


_FORMATS: dict[DType, _Format] = {
    # k = round(x·2/π) of up to 16 bits times 8-bit parts is exact in 24 bits: |x| < 2^16·π/2
    # exp2: degree 6 near-minimax (error 3e-9 relative, 0.05 ulp; degree 5 would be 1.3 ulp)
    dtypes.float32: _format(dtypes.uint32, dtypes.int32, 23, 127, interpolant(math.exp2, 6, 0.5), 6, 5, 8, 4),
    # up to 26-bit k times 27-bit parts is exact in 53 bits: |x| < 2^26·π/2; exp2: Taylor, degree 13
    dtypes.float64: _format(dtypes.uint64, dtypes.int64, 52, 1023,
                            tuple(math.log(2) ** k / math.factorial(k) for k in range(14)), 11, 8, 27, 3),
}
_HALVES = frozenset({dtypes.float16, dtypes.bfloat16})


# ---------------------------------------------------------------- helpers building primitives
def _poly(x: UOp, coeffs: Sequence[float]) -> UOp:
    """Σ coeffs[k]·x^k by Horner's rule (coeffs lowest first, at least two)."""
    acc = x * coeffs[-1] + coeffs[-2]
    for c in reversed(coeffs[:-2]):
        acc = acc * x + c
    return acc


def _floor(x: UOp) -> UOp:
    t = x.trunc()
    return (x < t).where(t + -1.0, t)


def _isnan(x: UOp) -> UOp:
    return x.ne(x)


def _isinf(x: UOp) -> UOp:
    big = x.dtype.finfo_max
    return (x < -big) | (x.const_like(big) < x)


# ---------------------------------------------------------------- float algorithms (float32 / float64)
def _exp2(x: UOp) -> UOp:
    fm = _FORMATS[x.dtype]
    lo, hi = fm.exp2_range
    xc = (x < lo).where(lo, x)  # plain selects: a nan fails both tests and stays nan
    xc = (xc.const_like(hi) < xc).where(hi, xc)
    # adding big rounds |xc| < 2^(mant-1) to an integer n; t's bits are then those of big plus n, and the 2·bias
    # in big puts n + 2·bias in their low bits, so shifts alone build the exponent fields of 2^⌊n/2⌋ and 2^⌈n/2⌉
    big = 1.5 * 2.0 ** fm.mant + 2 * fm.bias
    t = xc + big
    p = _poly(xc - (t + -big), fm.exp2_poly)  # nan stays nan, and so does the product below
    bits = t.bitcast(fm.uint)
    low = (bits >> 1) << fm.mant  # (bias + ⌊n/2⌋)·2^mant: the shift drops 1.5·2^mant's bits, leaving n + 2·bias's
    high = (bits << fm.mant) - low  # (bias + ⌈n/2⌉)·2^mant, by unsigned (wrapping) arithmetic
    return p * low.bitcast(x.dtype) * high.bitcast(x.dtype)


def _log2(x: UOp) -> UOp:
    fm = _FORMATS[x.dtype]
    shift = fm.mant + 1
    sub = x < fm.min_normal
    bits = sub.where(x * 2.0 ** shift, x).bitcast(fm.uint)
    exp = ((bits >> fm.mant) & (2 * fm.bias + 1)).cast(x.dtype) + sub.where(x.const_like(-fm.bias - shift), -fm.bias)
    m = ((bits & ((1 << fm.mant) - 1)) | (fm.bias << fm.mant)).bitcast(x.dtype)  # in [1, 2)
    big = x.const_like(math.sqrt(2)) < m
    m = big.where(m * 0.5, m)
    exp = exp + big.where(x.const_like(1.0), 0.0)
    f = m + -1.0  # exact (Sterbenz)
    s, h = f * (f + 2.0).recip(), f * f * 0.5
    z = s * s
    r = exp + (f - (h - s * (h + z * _poly(z, fm.log2_poly)))) * (1 / math.log(2))
    r = x.ne(math.inf).where(r, x)
    r = x.ne(0.0).where(r, -math.inf)
    return (_isnan(x) | (x < 0.0)).where(math.nan, r)


def _sin(x: UOp) -> UOp:
    if x.dtype == dtypes.float32:
        return _sin_wide(x.cast(dtypes.float64)).cast(dtypes.float32)
    fm = _FORMATS[x.dtype]
    bad = (x * 0.0).ne(0.0)  # inf or nan
    bits = x.bitcast(dtypes.uint64)
    mag = bits & ((1 << 63) - 1)
    far = mag.const_like(_PAYNE_HANEK_BITS - 1) < mag  # |x| ≥ 2^26, inf and nan included
    xc = far.where(0.0, x)
    k = _floor(xc * (2 / math.pi) + 0.5)
    r = xc
    for part in fm.pio2:
        r = r + k * -part
    far_r, far_q = _payne_hanek(mag)
    neg = (bits >> 63).ne(0)
    r = far.where(neg.where(-far_r, far_r), r)
    q = far.where(neg.where(-far_q, far_q), k.cast(fm.sint))
    return bad.where(math.nan, _sin_quadrant(r, q, fm))


# 2/π in 26-bit parts: a float32 value (24 bits) times a part is exact in float64
_TWO_OVER_PI_PARTS = _split(2 / _PI, 26, 9)

# float64 beyond Cody–Waite's range (|x| ≥ 2^26: biased exponent 1049 and up) is reduced by Payne–Hanek. Word n of
# the table holds the bits of 2/π of weights 2^(27−64n) down to 2^(−36−64n), most significant first: x's exponent
# picks the window of 2/π its mantissa meets below multiples of 4 (word 0 starts with zeros, for x just past 2^26)
_PAYNE_HANEK_EXP = 1023 + 26
_PAYNE_HANEK_BITS = _PAYNE_HANEK_EXP << 52
_PIO2 = (float(_PI / 2), float(_PI / 2 - Fraction(float(_PI / 2))))
_TWO_OVER_PI_WORDS = tuple((math.floor(Fraction(2 ** (64 * 18 + 37)) / _PI) >> (64 * (18 - n))) & ((1 << 64) - 1)
                           for n in range(19))


def _word(w: UOp, words: Sequence[int]) -> UOp:
    """words[w] for w in [0, len(words)) (words[0] for any other w), by a chain of selects: kernels have no
    constant tables."""
    acc = w.const_like(words[0])
    for n, v in enumerate(words[1:], 1):
        acc = w.ne(n).where(acc, v)
    return acc


def _payne_hanek(mag: UOp) -> tuple[UOp, UOp]:
    """(r, q) with |x| = (q + r/(π/2))·π/2 mod 2π, |r| ≤ π/4, for the bits `mag` of a float64 |x| ≥ 2^26.

    x = m·2^(e−1075) with m a 53-bit integer, so the bits of 2/π that make x·2/π a multiple of 4 can be dropped,
    and the next 192 (a window chosen by e) are all that matter: x·2/π mod 4 = (m·window mod 2^192)·2^−190 up to
    m·2^−190 < 2^−137, far below the 2^−61·2^−53 that the double nearest a multiple of π/2 needs. The product is
    taken in 32-bit limbs (each partial product exact in uint64) and the fraction rounded to the nearest quadrant;
    its magnitude is converted to float64 from the top, so a reduced value near 0 keeps all its digits."""
    u64, m32 = mag.dtype, (1 << 32) - 1
    m = (mag & ((1 << 52) - 1)) | (1 << 52)
    j = (mag >> 52) + -_PAYNE_HANEK_EXP  # the window's first bit, counted in the table
    w, sh = j >> 6, j & 63
    words = [_word(w, _TWO_OVER_PI_WORDS[k:k + 16]) for k in range(4)]
    g = [(words[k] << sh) | ((words[k + 1] >> 1) >> (sh ^ 63)) for k in range(3)]  # no shift by 64 when sh = 0
    gl = [g[2] & m32, g[2] >> 32, g[1] & m32, g[1] >> 32, g[0] & m32, g[0] >> 32]  # least significant first
    m0, m1 = m & m32, m >> 32
    z: list[UOp] = []
    carry: UOp | None = None
    for c in range(6):  # column c of m·window: the low and high halves of the partial products that land in it
        col = (m0 * gl[c]) & m32
        if c >= 1:
            col = col + ((m0 * gl[c - 1]) >> 32) + ((m1 * gl[c - 1]) & m32)
        if c >= 2:
            col = col + ((m1 * gl[c - 2]) >> 32)
        if carry is not None:
            col = col + carry
        z.append(col & m32)
        carry = col >> 32
    half = (z[5] >> 29) & 1  # fraction ≥ ½: round up to the next quadrant, the fraction less 1 is its complement
    q = ((z[5] >> 30) + half).cast(dtypes.int64)
    flip = -half
    hi = (((z[5] << 32) | z[4]) ^ flip) & ((1 << 61) - 1)  # the fraction's top 61 bits, then 64 more: enough
    mid = ((z[3] << 32) | z[2]) ^ flip
    f = hi.cast(dtypes.float64)  # hi rounded; its rounding error (exact, under 2^8) joins the low part
    lo = (hi - f.cast(u64)).bitcast(dtypes.int64).cast(dtypes.float64) * 2.0 ** -62 + \
        mid.cast(dtypes.float64) * 2.0 ** -126
    f = f * 2.0 ** -62
    r = f * _PIO2[0] + (f * _PIO2[1] + lo * _PIO2[0])
    return half.ne(0).where(-r, r), q


def _sin_wide(x: UOp) -> UOp:
    """sin of a float32 value held in float64, for every float32 (see the module docstring)."""
    bad = (x * 0.0).ne(0.0)
    xc = bad.where(0.0, x)
    f = x.const_like(0.0)
    for part in _TWO_OVER_PI_PARTS:
        t = xc * part
        f = f + (t - _floor(t * 0.25 + 0.5) * 4.0)  # t mod 4 in [-2, 2], exact; a small t is kept as it is
    k = _floor(f + 0.5)
    fm = _FORMATS[dtypes.float64]
    return bad.where(math.nan, _sin_quadrant((f - k) * (math.pi / 2), k.cast(fm.sint), fm))


def _sin_quadrant(r: UOp, q: UOp, fm: _Format) -> UOp:
    """sin(r + q·π/2) for |r| ≤ π/4 and an integer q: the Taylor sin or cos of r, by q mod 4, with its sign."""
    r2 = r * r
    sin_r = r + r * r2 * _poly(r2, fm.sin_poly)
    cos_r = r2 * _poly(r2, fm.cos_poly) + 1.0
    out = (q & 1).ne(0).where(cos_r, sin_r)
    return (q & 2).ne(0).where(-out, out)


def _sqrt(x: UOp) -> UOp:
    y = (x.alu(Ops.LOG2) * 0.5).alu(Ops.EXP2)
    y = y + (x * y.recip() - y) * 0.5
    return (x.ne(0.0) & x.ne(math.inf)).where(y, x)


def _pow(a: UOp, b: UOp) -> UOp:
    sign = a.bitcast(_FORMATS[a.dtype].sint) < 0
    mag = (sign.where(-a, a).alu(Ops.LOG2) * b).alu(Ops.EXP2)
    bt, half = b.trunc(), b * 0.5
    integral = bt.eq(b)
    odd = integral & half.trunc().ne(half)
    out = (sign & odd).where(-mag, mag)
    out = ((a < 0.0) & a.ne(-math.inf) & integral.logical_not()).where(math.nan, out)
    one = b.eq(0.0) | a.eq(1.0) | (a.eq(-1.0) & _isinf(b))
    return one.where(1.0, out)


_FLOAT_ALGORITHMS: dict[Ops, Callable[..., UOp]] = {
    Ops.EXP2: _exp2, Ops.LOG2: _log2, Ops.SIN: _sin, Ops.SQRT: _sqrt, Ops.POW: _pow,
}


# ---------------------------------------------------------------- rules
def _float_only(x: UOp) -> None:
    if not x.src[0].dtype.is_float:
        raise SpecError(x, f"needs float operands, got {x.src[0].dtype.name} (use Idiv for integer division)",
                        0, rule="operand-dtype")


def neg(x: UOp) -> UOp:
    return x.src[0] * -1


def sub(x: UOp) -> UOp:
    return x.src[0] + x.src[1].alu(Ops.NEG)


def div(x: UOp) -> UOp:
    _float_only(x)
    return x.src[0] * x.src[1].recip()


def mulacc(x: UOp) -> UOp:
    a, b, c = x.src
    return a * b + c


def fuse_mulacc(x: UOp) -> UOp | None:
    """Add(Mul(a, b), c) as Mulacc(a, b, c) for float32 and float64: the inverse of `mulacc`, for a target that
    computes a product and a sum with one rounding (its fused multiply-add: one instruction, not two). A product
    by -1 is a subtraction and stays one. A product of a vector assembled lane by lane (a Stack of distinct lanes,
    as a padded convolution's window is) stays a product and a sum: C has no vector fma, so its lanes' fmas would
    let the C compiler split the assembled vector back into scalars at every use (conv2d ran 10x slower). A
    shuffle of loaded vectors (devectorize's every-other read) is fused: it is one vector already."""
    if x.dtype not in (dtypes.float32, dtypes.float64):
        return None
    for m, c in ((x.src[1], x.src[0]), (x.src[0], x.src[1])):  # an accumulator's update is Add(acc, Mul)
        if m.op is Ops.MUL and _fusable_addend(c) and not any(s.op is Ops.CONST and s.arg.value == -1 for s in m.src) \
                and not any(_assembled(s) for s in m.src):
            return UOp(Ops.MULACC, (m.src[0], m.src[1], c))
    return None


def _assembled(s: UOp) -> bool:
    """Whether s is a vector assembled lane by lane: a Stack of distinct lanes, not all lanes of at most two
    vectors (a shuffle)."""
    if s.op is not Ops.STACK or len(set(s.src)) == 1:
        return False
    return not (all(x.op is Ops.INDEX and x.src[0].shape for x in s.src) and len({x.src[0] for x in s.src}) <= 2)


def _fusable_addend(c: UOp) -> bool:
    """Whether a product may be added to c with one rounding: c a constant (a polynomial's Horner step) or an
    accumulator in registers (a reduction's update, whose rounding is its own). Not a value of the program: the
    product is then the program's own value too, rounded wherever another kernel computes it, and the fused sum
    no longer cancels with it (x·c − max(x·c) was not 0 at the max: a 1-wide softmax got a gradient of 3e-4 for
    torch's 0; fuzzer, CPU seed 82618)."""
    if c.op is Ops.CONST:
        return True
    if c.op is not Ops.LOAD or not c.src or c.src[0].op is not Ops.INDEX:
        return False
    mem = c.src[0].src[0].memory()
    return mem.op is Ops.BUFFER and mem.arg.addrspace is AddrSpace.REG


def cmpgt(x: UOp) -> UOp:
    return x.src[1] < x.src[0]


def cmpge(x: UOp) -> UOp:
    """SPEC's Not(CmpLt(A, B)) for integers; for floats it would say nan ≥ x, so floats use [b < a] ∨ [a = b]."""
    a, b = x.src
    return (b < a) | a.eq(b) if a.dtype.is_float else (a < b).ne(True)


def cmple(x: UOp) -> UOp:
    """SPEC's Not(CmpLt(B, A)) for integers; [a < b] ∨ [a = b] for floats (false for nan, as IEEE says)."""
    a, b = x.src
    return (a < b) | a.eq(b) if a.dtype.is_float else (b < a).ne(True)


def cmpeq(x: UOp) -> UOp:
    return x.src[0].ne(x.src[1]).ne(True)


def logical_not(x: UOp) -> UOp:
    return x.src[0].ne(1)


def transcendental(x: UOp) -> UOp:
    """Exp2/Log2/Sin/Sqrt/Pow by the algorithms above; half-precision floats go through float32."""
    _float_only(x)
    if x.dtype in _HALVES:
        return UOp(x.op, tuple(s.cast(dtypes.float32) for s in x.src)).cast(x.dtype)
    return _FLOAT_ALGORITHMS[x.op](*x.src)


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry(x: UOp) -> UOp:
    """Threefry-2x32, 20 rounds (Random123), exactly as uopviz.uop.alu.threefry2x32: the 64-bit counter and key
    are split into uint32 halves; rotations are Shl | Shr; every 4 rounds the key schedule is added."""
    ctr, key = x.src
    u32 = dtypes.uint32
    k0, k1 = key.cast(u32), (key >> 32).cast(u32)
    ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
    x0, x1 = ctr.cast(u32) + ks[0], (ctr >> 32).cast(u32) + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = ((x1 << r) | (x1 >> (32 - r))) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + (i + 1)
    return (x1.cast(x.dtype) << 32) | x0.cast(x.dtype)


ARITHMETIC: dict[Ops, Callable[[UOp], UOp]] = {Ops.NEG: neg, Ops.SUB: sub, Ops.DIV: div, Ops.MULACC: mulacc}
COMPARISONS: dict[Ops, Callable[[UOp], UOp]] = {
    Ops.CMPGT: cmpgt, Ops.CMPGE: cmpge, Ops.CMPLE: cmple, Ops.CMPEQ: cmpeq, Ops.NOT: logical_not,
}
TRANSCENDENTALS: dict[Ops, Callable[[UOp], UOp]] = dict.fromkeys(_FLOAT_ALGORITHMS, transcendental)
PRNG: dict[Ops, Callable[[UOp], UOp]] = {Ops.THREEFRY: threefry}
RULES: dict[Ops, Callable[[UOp], UOp]] = {**ARITHMETIC, **COMPARISONS, **TRANSCENDENTALS, **PRNG}


def _matcher(rules: dict[Ops, Callable[[UOp], UOp]], name: str) -> PatternMatcher:
    return PatternMatcher([(UPat(op, name="x"), fn) for op, fn in rules.items()], name=name)


arithmetic_decompositions = _matcher(ARITHMETIC, "decompose_arithmetic")
comparison_decompositions = _matcher(COMPARISONS, "decompose_comparisons")
transcendental_decompositions = _matcher(TRANSCENDENTALS, "decompose_transcendentals")
prng_decompositions = _matcher(PRNG, "decompose_prng")


fused_multiply_add = PatternMatcher([(UPat(Ops.ADD, name="x"), fuse_mulacc)], name="fuse_multiply_add")
no_rules = PatternMatcher([], name="none")


@cache
def decompose(native: frozenset[Ops] = frozenset()) -> PatternMatcher:
    """The rules for every decomposed op the target lacks (those not in `native`).
    Div, Pow, Exp2, Log2, Sin and Sqrt on non-float operands raise SpecError (SPEC defines them for floats)."""
    return _matcher({op: fn for op, fn in RULES.items() if op not in native}, "decompose")
