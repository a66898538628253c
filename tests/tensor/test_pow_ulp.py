"""float32 pow over its whole range, as kernels run it on every device, against NumPy's float64 pow in ulps.

Exp2(Log2(|a|)·b) in float32 rounds log2 a and the product, an error that the exponential amplifies by
|b·log2 a|·ln 2: up to about 30 ulp for results near the ends of the range. pow of a float32 (and of the narrower
floats) is computed in float64 and rounded once, as libm's powf carries log2 a and the product in double: the
product's error is then 2^-29 of a float32 ulp.

Measured on this sweep: every result correctly rounded on CPU, CL and PYTHON (0 ulp from float64 pow rounded to
float32); before, 97.6 ulp on CPU and CL (pow(-0.0037, -12), a result of 1.5e29).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tensor_testing import on_devices
from test_exp_log_sweep import ulps

from uopviz import Tensor

_F32 = np.float32
_SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1e-45, 3.4e38]


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    """Bases from the least subnormal to the largest float with exponents that carry the result over the whole
    range (overflow, normals, subnormals, underflow), small exponents, negative bases with integral exponents (odd
    and even), and every pair of C99 pow's special values; a size that is no power of two."""
    rng = np.random.default_rng(32)
    a = 10.0 ** rng.uniform(-45, 38.5, 2500)
    b = rng.uniform(-152, 130, 2500) / np.log2(a)  # b·log2 a spans the exponents of every result
    a2 = 10.0 ** rng.uniform(-3, 3, 1500)
    b2 = rng.uniform(-12, 12, 1500)
    a3 = -(10.0 ** rng.uniform(-3, 3, 600))
    b3 = rng.integers(-25, 25, 600).astype(np.float64)
    sa, sb = np.meshgrid(_SPECIAL, _SPECIAL)
    base = np.concatenate([a, a2, a3, [0.99999994, 1.0000001, 2.0, 10.0], sa.ravel()]).astype(_F32)
    exp = np.concatenate([b, b2, b3, [1e9, -1e9, 127.99, -38.5], sb.ravel()]).astype(_F32)
    return base, exp


@pytest.mark.parametrize("device", on_devices())
def test_pow_whole_range(device: str) -> None:
    a, b = _pairs()
    got = Tensor(a, device=device).pow(Tensor(b, device=device)).numpy()
    assert got.dtype == np.float32
    with np.errstate(all="ignore"):
        exact = np.power(a.astype(np.float64), b.astype(np.float64))
        err = ulps(got, exact)
    assert err.max() <= 1.0, (a[err.argmax()], b[err.argmax()], got[err.argmax()], err.max())
    n = len(_SPECIAL) ** 2  # C99's special cases bit for bit (pow(x, ±0) = 1, pow(1, nan) = 1, -0 ** odd = -0, ...)
    with np.errstate(all="ignore"):
        want = exact[-n:].astype(_F32)
    np.testing.assert_array_equal(got[-n:], want)
    num = ~np.isnan(want)  # a nan's sign is no part of C's answer
    np.testing.assert_array_equal(np.signbit(got[-n:][num]), np.signbit(want[num]))


@pytest.mark.parametrize("device", on_devices())
def test_pow_scalar_exponents_and_half(device: str) -> None:
    """A Python exponent and a float16 base (computed wide and rounded once) as well."""
    x = np.random.default_rng(5).uniform(0.01, 60, 999).astype(_F32)
    for e in (2.5, -1.75, 21.0, 0.3333):
        got = Tensor(x, device=device).pow(e).numpy()
        assert ulps(got, np.power(x.astype(np.float64), e)).max() <= 1.0
    h = x[:200].astype(np.float16)
    got = Tensor(h, device=device).pow(1.5).numpy()
    np.testing.assert_array_equal(got, np.power(h.astype(np.float64), 1.5).astype(np.float16))


@pytest.mark.parametrize("device", on_devices())
def test_pow_gradients_as_torch(device: str) -> None:
    """The rules (tensor/gradient.py) read Pow's operands, now float64 inside a float32 pow: both gradients against
    torch's in float32, the conventions at a = 0 and b = 0 included."""
    a = np.array([0.0, 0.0, 0.5, 2.0, 3.0, 7.5, 1.0, 0.25], _F32)
    b = np.array([2.0, 0.0, -1.5, 0.0, 2.5, 3.0, 4.0, 0.5], _F32)
    ta, tb = Tensor(a, device=device, requires_grad=True), Tensor(b, device=device, requires_grad=True)
    ga, gb = ta.pow(tb).sum().gradient(ta, tb)
    xa, xb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    xa.pow(xb).sum().backward()
    assert ga.dtype.name == "float32" and gb.dtype.name == "float32"
    np.testing.assert_allclose(ga.numpy(), xa.grad.numpy(), rtol=2e-7)
    np.testing.assert_allclose(gb.numpy(), xb.grad.numpy(), rtol=2e-7)


@pytest.mark.parametrize("device", on_devices())
def test_pow_small_integral_exponents_are_products(device: str) -> None:
    """x ** 3, x ** -1 and x ** -2 are products (no Pow in the kernel, as torch): within 2 ulp over the whole range
    (measured: 1.16, 0 and 1.80), C99's special cases bit for bit (-0 ** -1 = -inf, -0 ** -2 = inf, inf ** -1 = 0)."""
    rng = np.random.default_rng(9)
    x = np.concatenate([10.0 ** rng.uniform(-45, 38.5, 1500) * rng.choice([-1, 1], 1500), _SPECIAL]).astype(_F32)
    for e in (3, -1, -2):
        t = Tensor(x, device=device).pow(e)
        assert not any(u.op.name == "POW" for u in t.uop.toposort())
        got = t.numpy()
        with np.errstate(all="ignore"):
            exact = np.power(x.astype(np.float64), e)
        assert ulps(got, exact).max() <= 2.0, e
        n = len(_SPECIAL)
        with np.errstate(all="ignore"):
            want = exact[-n:].astype(_F32)
        edge = ~np.isfinite(want) | (want == 0)  # nans, infinities and zeros exactly, with their signs
        np.testing.assert_array_equal(got[-n:][edge], want[edge])
        num = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[-n:][num]), np.signbit(want[num]))
