"""Derive the polynomial coefficients of uopviz's erf, erfc and gelu (uopviz/tensor/special.py), and check their error.

    python tools/fit_erf.py            # prints the coefficient tables and the worst errors in float32 and float64

Two pieces on |x|, joined at X0: below it erf(x) = x·S(x²), S analytic; above it erfc(x) = t·exp(P(t) − x²) with
t = 2/(2 + x), P smooth on t's interval (the form of Numerical Recipes' erfcc, fitted here to each dtype's
precision). Each is fitted as a Chebyshev series on its interval (the interpolant at Chebyshev points, with mpmath
at 50 digits as the reference), truncated where its terms fall below the dtype's precision, and then rewritten as a
power series in x² or t, so that the kernel evaluates it by Horner's rule: one fused multiply-add per term.
float32 gelu takes the normal tail Φ(−|x|) = t·H(t)·e^(−x²/2) for every x (t over all of [0, 1]): one series and the
density's exponential, which its gradient shares.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath
import numpy as np

mpmath.mp.dps = 50
X0 = 1.0
T_HI = 2 / (2 + X0)
PRECISION = {"float32": 2e-9, "float64": 1e-17}
"""Where each dtype's series are cut: the first Chebyshev term below this is dropped with all after it."""


def cheb(f: Callable[[mpmath.mpf], mpmath.mpf], n: int) -> list[mpmath.mpf]:
    """Chebyshev coefficients c_0..c_{n-1} of f on [-1, 1] (c_0 halved, so the series is Σ c_j T_j)."""
    theta = [mpmath.pi * (k + mpmath.mpf(1) / 2) / n for k in range(n)]
    vals = [f(mpmath.cos(t)) for t in theta]
    out = [2 * mpmath.fsum(v * mpmath.cos(j * t) for v, t in zip(vals, theta)) / n for j in range(n)]
    out[0] /= 2
    return out


def small(y: mpmath.mpf) -> mpmath.mpf:  # y in [-1, 1] -> z = x² in [0, X0²]
    z = (y + 1) / 2 * X0 ** 2
    if z == 0:
        return 2 / mpmath.sqrt(mpmath.pi)
    x = mpmath.sqrt(z)
    return mpmath.erf(x) / x


def large(y: mpmath.mpf) -> mpmath.mpf:  # y in [-1, 1] -> t in [0, T_HI]
    t = (y + 1) / 2 * T_HI
    if t == 0:  # the limit x -> inf: erfc(x)·e^(x²)/t -> (2 + x)/(2x√π) -> 1/(2√π)
        return mpmath.log(1 / (2 * mpmath.sqrt(mpmath.pi)))
    x = 2 / t - 2
    return mpmath.log(mpmath.erfc(x) / t) + x * x


def gauss_tail(y: mpmath.mpf) -> mpmath.mpf:  # y in [-1, 1] -> t in [0, 1]; H(t) = erfc(x)·e^(x²)/(2t)
    t = (y + 1) / 2
    if t == 0:  # the limit x -> inf, as for `large`
        return 1 / (4 * mpmath.sqrt(mpmath.pi))
    x = 2 / t - 2
    return mpmath.erfc(x) * mpmath.exp(x * x) / (2 * t)


def power_series(c: list[mpmath.mpf], width: float, tol: float) -> list[float]:
    """The Chebyshev series c in y = 2u/width − 1, cut at tol, as coefficients of u⁰, u¹, … (exact arithmetic)."""
    k = len(c)
    while k > 1 and abs(c[k - 1]) < tol:
        k -= 1
    # T_j(y) by the recurrence, each as a list of power coefficients in y; then y = 2u/width − 1 substituted
    t_prev, t_cur = [mpmath.mpf(1)], [mpmath.mpf(0), mpmath.mpf(1)]
    in_y = [c[0]] + [mpmath.mpf(0)] * (k - 1)
    for j in range(1, k):
        for i, a in enumerate(t_cur):
            in_y[i] += c[j] * a
        t_prev, t_cur = t_cur, [-(t_prev[i] if i < len(t_prev) else 0) + (2 * t_cur[i - 1] if i else 0)
                                for i in range(len(t_cur) + 1)]
    out = [mpmath.mpf(0)] * k
    for i, a in enumerate(in_y):  # a·(2u/width − 1)^i, expanded binomially
        for m in range(i + 1):
            out[m] += a * mpmath.binomial(i, m) * (2 / mpmath.mpf(width)) ** m * (-1) ** (i - m)
    return [float(v) for v in out]


def tables(dtype: str) -> tuple[list[float], list[float]]:
    """The two power series for dtype: S's in x², P's in t."""
    tol = PRECISION[dtype]
    return power_series(cheb(small, 40), X0 ** 2, tol), power_series(cheb(large, 60), T_HI, tol)


def gauss_tail_table() -> list[float]:
    """H's power series in t (float32's gelu)."""
    return power_series(cheb(gauss_tail, 40), 1.0, PRECISION["float32"])


def horner(c: list[float], u: np.ndarray, dt: type) -> np.ndarray:
    acc = np.full_like(u, dt(c[-1]))
    for a in c[-2::-1]:
        acc = (acc * u + dt(a)).astype(dt)
    return acc


def erf_np(x: np.ndarray, cs: list[float], cl: list[float], dt: type) -> tuple[np.ndarray, np.ndarray]:
    """(erf, erfc) of x >= 0 as the decomposition computes them, in dtype dt (e^(−x²) from x²)."""
    x = x.astype(dt)
    z = x * x
    s = horner(cs, z, dt)
    t = (dt(2) / (dt(2) + x)).astype(dt)
    with np.errstate(over="ignore", under="ignore"):
        big = t * np.exp(horner(cl, t, dt) - z)
    lo = x < dt(X0)
    return np.where(lo, x * s, dt(1) - big).astype(dt), np.where(lo, dt(1) - x * s, big).astype(dt)


def relative(got: np.ndarray, want: np.ndarray, tiny: float) -> np.ndarray:
    return np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), tiny)


def main() -> None:
    xs = np.concatenate([np.linspace(0, 6, 20001), np.geomspace(1e-8, 1, 2001), np.linspace(6, 27, 4001)])
    ref_erf = np.array([float(mpmath.erf(mpmath.mpf(float(v)))) for v in xs])
    ref_erfc = np.array([float(mpmath.erfc(mpmath.mpf(float(v)))) for v in xs])
    for name, dt in (("float32", np.float32), ("float64", np.float64)):
        cs, cl = tables(name)
        x = xs.astype(dt)
        e, ec = erf_np(x, cs, cl, dt)
        fin = (ref_erfc > np.finfo(dt).tiny) & (xs == x.astype(np.float64)) & (xs < 4)
        tiny, eps = np.finfo(dt).tiny, np.finfo(dt).eps
        print(f"{name}: {len(cs)} + {len(cl)} terms; "
              f"erf max {relative(e, ref_erf, tiny)[xs > 0].max() / eps:.1f} eps, "
              f"erfc below 4 max {relative(ec, ref_erfc, tiny)[fin].max() / eps:.1f} eps")
        print("  SMALL =", cs)
        print("  LARGE =", cl)
    ct = gauss_tail_table()
    x = np.concatenate([np.linspace(-14, 9, 20001), np.geomspace(1e-8, 1, 2001)]).astype(np.float32)
    ref = np.array([float(mpmath.ncdf(mpmath.mpf(float(v)))) for v in x])
    a = np.abs(x)
    t = (np.float32(1) / (np.float32(1) + a * np.float32(0.5 / np.sqrt(2)))).astype(np.float32)
    with np.errstate(under="ignore"):
        tail = (t * horner(ct, t, np.float32) * np.exp(np.float32(-0.5) * x * x)).astype(np.float32)
    phi = np.where(x < 0, tail, np.float32(1) - tail)
    print(f"float32 gelu: {len(ct)} terms; Φ at |x| <= 4 max "
          f"{relative(phi, ref, np.finfo(np.float32).tiny)[a <= 4].max() / np.finfo(np.float32).eps:.1f} eps")
    print("  GAUSS_TAIL =", ct)


if __name__ == "__main__":
    main()
