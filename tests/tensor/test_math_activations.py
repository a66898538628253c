"""The math and activation ops against NumPy and SciPy (float64 references), on every device."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special
from tensor_testing import check

from uopviz import Tensor, dtypes
from uopviz.dtype import DTypeError


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)


UNARY = {
    # name: (reference, low, high, tolerance)
    "asin": (np.arcsin, -0.999, 0.999, 2e-6), "acos": (np.arccos, -0.999, 0.999, 2e-6),
    "atan": (np.arctan, -50, 50, 2e-6), "sinh": (np.sinh, -5, 5, 2e-6), "cosh": (np.cosh, -5, 5, 2e-6),
    "asinh": (np.arcsinh, -50, 50, 2e-6), "acosh": (np.arccosh, 1, 50, 2e-6),
    "atanh": (np.arctanh, -0.99, 0.99, 5e-6), "log10": (np.log10, 1e-3, 1e3, 2e-6),
    "erf": (special.erf, -4, 4, 3e-7), "round": (np.round, -10, 10, 0), "square": (np.square, -5, 5, 1e-6),
    "elu": (lambda x: np.where(x > 0, x, np.expm1(x)), -5, 5, 1e-6),
    "selu": (lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)), -5, 5, 1e-6),
    "celu": (lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x)), -5, 5, 1e-6),
    "relu6": (lambda x: np.clip(x, 0, 6), -3, 9, 0),
    "leaky_relu": (lambda x: np.where(x > 0, x, 0.01 * x), -5, 5, 1e-6),
    "hardsigmoid": (lambda x: np.clip(x + 3, 0, 6) / 6, -5, 5, 1e-6),
    "hardswish": (lambda x: x * np.clip(x + 3, 0, 6) / 6, -5, 5, 1e-6),
    "hardtanh": (lambda x: np.clip(x, -1, 1), -3, 3, 0),
    "softplus": (_softplus, -15, 30, 1e-6), "mish": (lambda x: x * np.tanh(_softplus(x)), -10, 10, 2e-6),
    "softsign": (lambda x: x / (1 + np.abs(x)), -5, 5, 1e-6), "logsigmoid": (lambda x: -_softplus(-x), -15, 15, 1e-6),
    "quick_gelu": (lambda x: x * special.expit(1.702 * x), -6, 6, 1e-6),
    "gelu": (lambda x: x * 0.5 * (1 + special.erf(x / math.sqrt(2))), -6, 6, 1e-6),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str, device: str) -> None:
    fn, lo, hi, tol = UNARY[name]
    a = np.random.default_rng(0).uniform(lo, hi, 37).astype(np.float32)
    if name == "round":
        a[:6] = [0.5, 1.5, 2.5, -0.5, -2.5, 3.5]
    out = getattr(Tensor(a, device=device), name)()
    assert out.dtype == dtypes.float32
    check(out, fn(a.astype(np.float64)), rtol=tol, atol=tol)


def test_gelu_tanh_and_bad_mode(device: str) -> None:
    a = np.linspace(-4, 4, 9, dtype=np.float32)
    ref = 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))
    check(Tensor(a, device=device).gelu(approximate="tanh"), ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="approximate"):
        Tensor(a).gelu(approximate="erf")


def test_binary_math(device: str) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 5)).astype(np.float32) * 4, rng.normal(size=(5,)).astype(np.float32) * 3
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    check(ta.copysign(tb), np.copysign(a, b))
    check(Tensor([1.0, 2.0], device=device).copysign(Tensor([-0.0, 0.0], device=device)), [-1.0, 2.0])
    check(ta.fmod(tb), np.fmod(a, b), rtol=1e-5, atol=1e-5)
    ia, ib = np.array([-7, 7, 5, -5], np.int32), np.array([2, -2, 3, 3], np.int32)
    check(Tensor(ia, device=device).fmod(Tensor(ib, device=device)), np.fmod(ia, ib))
    check(ta.lerp(tb, 0.25), a + 0.25 * (b - a), rtol=1e-6)
    check(ta.logaddexp(tb), np.logaddexp(a, b), rtol=1e-6)
    inf = np.array([-np.inf, np.inf, -np.inf], np.float32)
    check(Tensor(inf, device=device).logaddexp(Tensor(inf[::-1].copy(), device=device)), np.logaddexp(inf, inf[::-1]))
    check(ta.clip(-1, 2), np.clip(a, -1, 2))
    check(ta.clamp(max_=0.5), np.minimum(a, 0.5))
    check(Tensor(ia, device=device).div(Tensor(ib, device=device), rounding_mode="trunc"),
          np.trunc(ia / ib).astype(np.int32))
    check(Tensor(ia, device=device).div(Tensor(ib, device=device), rounding_mode="floor"), ia // ib)
    check(ta.div(tb, rounding_mode="trunc"), np.trunc(a / b), rtol=1e-6)


def test_predicates(device: str) -> None:
    a = np.array([1.0, np.inf, -np.inf, np.nan, 0.0, 1.0000001], np.float32)
    t = Tensor(a, device=device)
    check(t.isinf(), np.isinf(a))
    check(t.isfinite(), np.isfinite(a))
    b = np.array([1.0, np.inf, 1.0, np.nan, 1e-9, 1.0], np.float32)
    check(t.isclose(Tensor(b, device=device)), np.isclose(a, b))
    check(t.isclose(Tensor(b, device=device), equal_nan=True), np.isclose(a, b, equal_nan=True))
    assert t.is_floating_point() and not Tensor([1], device=device).is_floating_point()
    check(Tensor([1, 2], device=device).isfinite(), [True, True])


def test_masked_fill(device: str) -> None:
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    m = np.array([True, False, True])
    check(Tensor(a, device=device).masked_fill(Tensor(m, device=device), -1), np.where(m, -1, a))
    with pytest.raises(DTypeError, match="bool mask"):
        Tensor(a).masked_fill(Tensor(a), 0)


def test_sin_cos_whole_float32_range(device: str) -> None:
    """The CPU's Sin decomposition reduces exactly over every float32 (it lost 0.03 at 1e6 before), and cos is
    sin(2x)/(2 sin x), so a large x is not rounded away in π/2 − x (0.66 off at 3e7 before); CL runs its driver's
    sin, held to the same bound."""
    x = np.array([1e5, 1e6, 3e7, 1e10, 1e20, 3.4e38, -3e38, 1e-30, 1e-10, 3e-45, 0.0, 100.0], np.float32)
    rng = np.random.default_rng(2)
    x = np.concatenate([x, (rng.standard_normal(50) * 10.0 ** rng.integers(-3, 38, 50)).astype(np.float32)])
    for fn in ("sin", "cos"):
        got = getattr(Tensor(x, device=device), fn)().numpy().astype(np.float64)
        want = getattr(np, fn)(x.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=2e-7, atol=2e-8)
