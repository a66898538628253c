"""Elementary and special functions accurate to a few ulp in every float dtype, composed of SPEC primitives.

The textbook forms lose the digits users compare against torch: tanh as 2·sigmoid(2x) − 1 and sinh as (eˣ − e⁻ˣ)/2
cancel near 0 (tanh(1e-3) 300 ulp off in float32), log(1 + eˣ) rounds a softplus tail to 0, and the classic
five-term erf is off by 1.5e-7 absolutely: erf(0) was 1e-9, and float64 erf no better than float32. Here each is
built from pieces that do not cancel: expm1 and log1p (with Kahan's correction), erf and erfc as series
fitted per dtype (tools/fit_erf.py derives the tables and prints their error). Where a composition's chain rule
would differentiate the approximation (or a correction term whose derivative is rounding noise), the function has
its own gradient rule: the exact derivative, built from the same accurate pieces.

Functions take and give Tensors of one float dtype (float32 or float64: Tensor._math computes halves in float32).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from uopviz.codegen.decompositions import interpolant
from uopviz.dtype import DType, dtypes
from uopviz.tensor.gradient import nonzero, own_gradient

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

_LN2 = math.log(2)
_SQRT1_2 = math.sqrt(0.5)
_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)

# erf(x) = x·S(x²) for |x| < X0; erfc(x) = t·exp(P(t) − x²), t = 2/(2 + x), above: tools/fit_erf.py's power series
# of S in x² and P in t, per float size (float32's cut where its precision ends: fewer terms).
_X0 = 1.0
_ERF_SMALL = {
    4: (1.1283791658815026, -0.3761262690358044, 0.11283597463488053, -0.026854328796067244, 0.005189311942686617,
        -0.0008018854992786387, 7.882497110086663e-05),
    8: (1.1283791670955126, -0.37612638903183543, 0.1128379167094513, -0.026866170643256995, 0.005223977607269946,
        -0.0008548325982543225, 0.00012055295112667001, -1.4924740785377576e-05, 1.6447471190594618e-06,
        -1.6208829856810202e-07, 1.3721520406351094e-08, -7.798543850549947e-10),
}
_ERFC_LARGE = {
    4: (-1.2655121226729855, 0.9999996848396239, 0.37502029721854596, 0.08282199512586526, -0.07931920322460721,
        -0.1936838309867749, 0.1416003080189808, -0.6580973446849859, 1.3718690327358027, -1.0788125923513558,
        0.30465606497050945),
    8: (-1.2655121234846454, 1.0000000000000142, 0.3749999999963086, 0.0833333337172582, -0.08593752118669783,
        -0.14374928265891754, -0.09181312696356611, 0.0298366370512123, 0.12979352790370424, 0.14954373426802853,
        -0.21789531926950143, 0.8152528022553607, -4.516957074701676, 14.459267035412099, -36.92263693362218,
        75.42520452845227, -113.86920794295364, 121.91991761304293, -90.18358719700764, 44.085510743364075,
        -12.891664990388161, 1.7163225862690463),
}


def odd(x: Tensor, f: Callable[[Tensor], Tensor]) -> Tensor:
    """The odd function that is f for x >= 0: f(|x|) given x's sign by where, so that its derivative at 0 is
    f'(0) (sign(x)·f(|x|) has 0 there: sign is flat and |x| kinked). NaN stays NaN."""
    neg = x.lt(0)
    y = f(neg.where(x.neg(), x))
    return neg.where(y.neg(), y)


def horner(u: Tensor, c: Sequence[float]) -> Tensor:
    """Σ c_k·uᵏ by Horner's rule: one multiply-add a term (the pipeline fuses them where the target can)."""
    acc = u.mul(c[-1]).add(c[-2])
    for ck in c[-3::-1]:
        acc = acc.mul(u).add(ck)
    return acc


# exp's splits of ln 2 (hi with few enough bits that n·hi is exact), the int of the float's bits (k's halves shifted
# stay below its sign bit), its mantissa bits and exponent bias, and e^r's polynomial for |r| <= ln2/2 (lowest term
# first): float32 degree 6 through Chebyshev nodes (3e-9 relative, 0.02 ulp; degree 5 would be 0.9 ulp), float64
# Taylor to degree 13 (4e-18)
_EXP_PARTS: dict[DType, tuple[float, float, DType, int, int, tuple[float, ...]]] = {
    dtypes.float32: (0.693359375, -2.12194440e-4, dtypes.int32, 23, 127, interpolant(math.exp, 6, _LN2 / 2)),
    dtypes.float64: (6.93147180369123816490e-01, 1.90821492927058770002e-10, dtypes.int64, 52, 1023,
                     tuple(1 / math.factorial(k) for k in range(14))),
}


def exp(x: Tensor, nonpositive: bool = False) -> Tensor:
    """e^x for float32 or float64 x (Tensor.exp's recipe), with one range reduction: exp2 of the reduced argument
    would reduce it again (a third of the work of GELU's derivative). `nonpositive`: x is <= 0 or nan (as −x² is),
    so only the low end needs its bound. Adding big rounds y = x·log2 e to an integer n and leaves k = n + 2·bias in
    the low mantissa bits of t, so 2^⌊n/2⌋ and 2^⌈n/2⌉ are k's halves shifted into exponent fields: no casts, and a
    nan stays one through p (the selects pass it; an inf is cut to a bound, where the result is already inf or 0).
    Its gradient is g·e^x, not the polynomial's derivative (a few ulp worse)."""
    hi, lo, bits, mant, bias, poly = _EXP_PARTS[x.dtype]
    arg = x
    top, bottom = (bias + 2) * _LN2, -(bias + mant + 2) * _LN2  # beyond them e^x is inf or 0 at every n
    x = x.lt(bottom).where(bottom, x if nonpositive else x.gt(top).where(top, x))
    # n <= 0: 2^(n + off) is normal down to the bottom, so one exponent field (t's low bits shifted, the rest shifted
    # out) and an exact product by 2^−off, rounded once into a subnormal, do the two factors' work
    off = mant + 3
    big = 1.5 * 2.0 ** mant + (bias + off if nonpositive else 2 * bias)
    t = x.mul(1 / _LN2).add(big)
    n = t.sub(big)
    p = horner(x.sub(n.mul(hi)).sub(n.mul(lo)), poly)  # |argument| <= ~ln2/2
    if nonpositive:
        out = p.mul(t.bitcast(bits).lshift(mant).bitcast(x.dtype)).mul(2.0 ** -off)
    else:
        k = t.bitcast(bits).bitwise_and((1 << (mant - 1)) - 1)
        out = p.mul(k.rshift(1).lshift(mant).bitcast(x.dtype)).mul(k.add(1).rshift(1).lshift(mant).bitcast(x.dtype))
    return own_gradient(out, (arg,), lambda g, xs, _need: (nonzero(g, g.mul(exp(xs[0], nonpositive))),))  # out itself


def _taylor_expm1(x: Tensor, terms: int) -> Tensor:
    """x + x²/2! + … + xⁿ/n!, nested as x·(1 + x/2·(1 + x/3·(…))) so each step rounds once on a value near 1."""
    acc = x.mul(1 / terms).add(1)
    for k in range(terms - 1, 1, -1):
        acc = x.mul(1 / k).mul(acc).add(1)
    return x.mul(acc)


def expm1(x: Tensor) -> Tensor:
    """eˣ − 1 without cancelling near 0: its Taylor series where |x| <= ln2/2 (8 terms in float32, 15 in float64,
    below half an ulp), eˣ − 1 above (at most 3.4 ulp where the subtraction cancels most)."""
    small = _taylor_expm1(x, 15 if x.dtype.itemsize == 8 else 8)
    out = x.abs().le(_LN2 / 2).where(small, x.exp().sub(1))
    return own_gradient(out, (x,), lambda g, xs, _need: (nonzero(g, g.mul(xs[0].exp())),))  # not out + 1: 0 far left


def log1p(x: Tensor) -> Tensor:
    """log(1 + x) without losing x's digits: u = 1 + x rounds, and log(u)·x/(u − 1) corrects for exactly what it
    rounded (Kahan); x where u is 1, x where u is inf (x inf: the correction is inf/inf)."""
    u = x.add(1)
    corrected = u.log().mul(x.div(u.sub(1)))
    out = u.eq(1).where(x, u.isinf().where(u.log(), corrected))
    return own_gradient(out, (x,), lambda g, xs, _need: (nonzero(g, g.div(xs[0].add(1))),))


def tanh(x: Tensor) -> Tensor:
    """−e/(2 + e) with e = expm1(−2|x|), given x's sign: no cancellation near 0, exactly ±1 far out."""
    def f(a: Tensor) -> Tensor:
        e = expm1(a.mul(-2))
        return e.neg().div(e.add(2))
    out = odd(x, f)

    def rule(g: Tensor, xs: tuple[Tensor, ...], _need: tuple[bool, ...]) -> tuple[Tensor]:
        w = xs[0].abs().mul(-2).exp()  # 1 − t² = 4w/(1 + w)²: from t itself it cancels to t's rounding far out
        return (g.mul(w.mul(4).div(w.add(1).square())),)
    return own_gradient(out, (x,), rule)


def sinh(x: Tensor) -> Tensor:
    """(e + e/(e + 1))/2 with e = expm1(|x|) below 1 (no cancellation), (e^|x| − e^−|x|)/2 above; x's sign."""
    def f(a: Tensor) -> Tensor:
        lo = a.lt(1)
        e = expm1(lo.where(a, 0))  # the branch not taken computes on 0: its inf/inf would make the gradient NaN
        near = e.add(e.div(e.add(1))).mul(0.5)
        return lo.where(near, a.exp().sub(a.neg().exp()).mul(0.5))
    return odd(x, f)


def asinh(x: Tensor) -> Tensor:
    """log1p(|x| + x²/(1 + √(1 + x²))) given x's sign; log|x| + ln 2 where x² + 1 rounds to x² (and may overflow)."""
    big = 2.0 ** (28 if x.dtype.itemsize == 8 else 13)

    def f(a: Tensor) -> Tensor:
        far = a.gt(big)
        b = far.where(0, a)  # the branch not taken computes on 0 (x² overflows: inf/inf, a NaN gradient)
        b2 = b.square()
        near = log1p(b.add(b2.div(b2.add(1).sqrt().add(1))))
        return far.where(a.log().add(_LN2), near)
    return odd(x, f)


def atanh(x: Tensor) -> Tensor:
    """log1p(2|x|/(1 − |x|))/2 given x's sign: ±inf at ±1, NaN beyond."""
    return odd(x, lambda a: log1p(a.mul(2).div(a.sub(1, reverse=True))).mul(0.5))


def _exp_neg_square(a: Tensor, scale: float = 1.0) -> Tensor:
    """e^(−scale·a²) (scale a power of two, 1/2 or 1), with a² exact in float64: a's high half squares exactly, so the
    rounding of a² (up to 730 in erfc's range, 360 ulp of the result) is left to a second, small exponent."""
    a = a.maximum(-40).minimum(40)  # e^(−scale·a²) is 0 beyond in every dtype; an infinite a would split to NaN
    if a.dtype.itemsize != 8:
        return exp(a.square().mul(-scale), nonpositive=True)
    hi = a.bitcast(dtypes.int64).bitwise_and(-(1 << 27)).bitcast(dtypes.float64)
    lo = a.sub(hi)
    return hi.square().mul(-scale).exp().mul(lo.mul(a.add(hi)).mul(-scale).exp())


def _erf_parts(a: Tensor, gauss: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(erf(a), erfc(a)) for a >= 0, each with its own relative accuracy (erf by its series near 0, erfc by its
    tail form far out; each the complement of the other where that cancels less than a few bits). e^(−a²): float64
    splits a² exactly (or takes `gauss`, computed by the caller from a more exact argument); float32 folds it into
    one exponential, whose argument's rounding costs up to a²/2 ulp in the far tail."""
    z = a.square()
    near = a.mul(horner(z, _ERF_SMALL[a.dtype.itemsize]))
    t = a.add(2).reciprocal().mul(2)
    p = horner(t, _ERFC_LARGE[a.dtype.itemsize])
    if a.dtype.itemsize == 8:
        far = t.mul(p.exp()).mul(_exp_neg_square(a) if gauss is None else gauss)
    else:
        far = t.mul(p.sub(z).exp())
    lo = a.lt(_X0)
    return lo.where(near, far.sub(1, reverse=True)), lo.where(near.sub(1, reverse=True), far)


def _erf_grad(sign: float) -> Callable[[Tensor, tuple[Tensor, ...], tuple[bool, ...]], tuple[Tensor]]:
    return lambda g, xs, _need: (g.mul(_exp_neg_square(xs[0].abs()).mul(sign * _TWO_OVER_SQRT_PI)),)


def erf(x: Tensor) -> Tensor:
    """The error function, odd: within 1.3 ulp in float32 and float64 (tools/fit_erf.py)."""
    out = odd(x, lambda a: _erf_parts(a)[0])
    return own_gradient(out, (x,), _erf_grad(1.0))


def _erfc(x: Tensor, gauss: Tensor | None = None) -> Tensor:
    c = _erf_parts(x.abs(), gauss)[1]
    return x.lt(0).where(c.sub(2, reverse=True), c)


def erfc(x: Tensor) -> Tensor:
    """1 − erf(x), with relative accuracy in the tail (2 − erfc(|x|) for negative x)."""
    return own_gradient(_erfc(x), (x,), _erf_grad(-1.0))


# Φ(−|x|) = t·H(t)·e^(−x²/2), t = 2/(2 + |x|/√2), for every x: tools/fit_erf.py's power series of H in t (float32)
_GAUSS_TAIL = (0.14104739610299813, 0.14104732982416124, 0.12341969592533665, 0.08809649918575574,
               0.04235713001155201, -0.003977001520253186, -0.028750970477468076, 0.0028168661411131384,
               -0.125242281525035, 0.27881344418672127, -0.24539968298459086, 0.103197740325021,
               -0.017426165555853572)


def gelu(x: Tensor) -> Tensor:
    """x·Φ(x), Φ(x) = erfc(−x/√2)/2: the far negative tail keeps its digits (1 + erf cancels to 0 there), and
    e^(−x²/2), the density's, is shared by the value and the gradient. float32 takes Φ(−|x|) = t·H(t)·e^(−x²/2)
    for every x (one series, no select between two, and the density's exponential its only one: Φ > ½ needs no
    relative accuracy near 0, which erf's own series is for); float64 takes e^(−x²/2) from x itself (x/√2 has
    rounded), split exactly, and erfc's two pieces."""
    phi = _gelu_parts(x)[0]

    def rule(g: Tensor, xs: tuple[Tensor, ...], _need: tuple[bool, ...]) -> tuple[Tensor]:
        phi, gauss = _gelu_parts(xs[0])  # the forward's own nodes again (hash-consed), not recomputed
        return (g.mul(phi.add(xs[0].mul(gauss).mul(1 / math.sqrt(2 * math.pi)))),)
    return own_gradient(x.mul(phi), (x,), rule)


def _gelu_parts(x: Tensor) -> tuple[Tensor, Tensor]:
    """(Φ(x), e^(−x²/2)) as gelu computes them."""
    if x.dtype.itemsize == 8:
        gauss = _exp_neg_square(x, 0.5)
        return _erfc(x.mul(-_SQRT1_2), gauss).mul(0.5), gauss
    gauss = exp(x.square().mul(-0.5), nonpositive=True)
    a = x.bitcast(dtypes.int32).bitwise_and((1 << 31) - 1).bitcast(x.dtype)  # |x| in one op (no gradient here)
    t = a.mul(0.5 * _SQRT1_2).add(1).reciprocal()
    tail = t.mul(horner(t, _GAUSS_TAIL)).mul(gauss)
    return x.lt(0).where(tail, tail.sub(1, reverse=True)), gauss
