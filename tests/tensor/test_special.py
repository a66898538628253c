"""Elementary and special functions to a few ulp (uopviz/tensor/special.py): values and gradients against mpmath at
50 digits, not torch (whose float64 gelu, tanh and expm1 gradients lose the far tails), on every device, in float32
and float64, over the ranges where the textbook forms cancel (near 0, the far tails); the special values as torch
gives them."""

from __future__ import annotations

import math
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
import torch
from tensor_testing import on_devices

from uopviz import Tensor

mpmath.mp.dps = 50
M = mpmath.mpf
_SQRT2 = mpmath.sqrt(2)

SPAN = np.concatenate([np.linspace(-9, 9, 145), [1e-30, -1e-20, 1e-9, -1e-6, 3e-4, -0.01, 0.3, -0.7, 0.99, 1.01]])
INSIDE = np.concatenate([np.tanh(np.linspace(-4, 4, 61)) * 0.999, [1e-20, -1e-7, 3e-4, -0.02]])
POSITIVE = np.concatenate([np.geomspace(1e-12, 1e6, 61), [0.0, 0.3, 1.0]])


def _gelu(x: Any) -> Any:
    return x * mpmath.erfc(-x / _SQRT2) / 2


def _gelu_grad(x: Any) -> Any:
    return mpmath.erfc(-x / _SQRT2) / 2 + x * mpmath.exp(-x * x / 2) / mpmath.sqrt(2 * mpmath.pi)


FUNCTIONS: dict[str, tuple[np.ndarray, Callable[[Any], Any], Callable[[Any], Any]]] = {
    # name: (points, value, derivative)
    "erf": (SPAN, mpmath.erf, lambda x: 2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-x * x)),
    "erfc": (SPAN, mpmath.erfc, lambda x: -2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-x * x)),
    "gelu": (SPAN, _gelu, _gelu_grad),
    "tanh": (SPAN, mpmath.tanh, lambda x: mpmath.sech(x) ** 2),
    "sinh": (SPAN, mpmath.sinh, mpmath.cosh),
    "asinh": (np.concatenate([SPAN, [1e5, -3e9, 1e30]]), mpmath.asinh, lambda x: 1 / mpmath.sqrt(1 + x * x)),
    "atanh": (INSIDE, mpmath.atanh, lambda x: 1 / (1 - x * x)),
    "expm1": (np.concatenate([SPAN, [-30.0, 40.0]]), mpmath.expm1, mpmath.exp),
    "log1p": (np.concatenate([POSITIVE, -POSITIVE[POSITIVE < 0.9]]), mpmath.log1p, lambda x: 1 / (1 + x)),
    "softplus": (SPAN * 3, lambda x: mpmath.log1p(mpmath.exp(x)) if x <= 20 else x,
                 lambda x: 1 / (1 + mpmath.exp(-x)) if x <= 20 else M(1)),
}

TERMS: dict[str, Callable[[Any], Any]] = {
    "gelu": lambda x: mpmath.erfc(-x / _SQRT2) / 2 + abs(x) * mpmath.exp(-x * x / 2) / mpmath.sqrt(2 * mpmath.pi)}
"""A derivative that is a sum of terms of both signs is judged against its terms' size, not its own: gelu's
Φ(x) + x·φ(x) cancels to 0 at x = −0.75, where no dtype holds it to a few ulp of itself (torch neither)."""
ULPS = {"value": 4, "grad": 8}
"""Bounds in units of the dtype's epsilon, relative to the exact value (below the smallest normal, absolute)."""
LOOSER = {("erfc", "float32"): 64, ("gelu", "float32"): 24}
"""float32 erfc's far tail is one exponential of P − x²: x² rounds by up to x²/2 ulp (<= 64 at |x| <= 9); gelu's
e^(−x²/2), from x itself, by up to x²/4 (<= 24 with the rest; float64 splits x² exactly)."""


def _ulps(got: np.ndarray, want: np.ndarray, size: np.ndarray, dt: np.dtype[Any]) -> np.ndarray:
    fi = np.finfo(dt)
    return np.abs(got - want) / np.maximum(np.abs(size), fi.tiny) / fi.eps


@pytest.mark.parametrize("device", on_devices())
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_value_and_gradient_within_a_few_ulp(name: str, dtype: str, device: str) -> None:
    points, value, derivative = FUNCTIONS[name]
    dt = np.dtype(dtype)
    x = points.astype(dt)
    t = Tensor(x, device=device, requires_grad=True)
    y = getattr(t, name)()
    y.sum().backward()
    assert t.grad is not None
    got, grad = y.numpy().astype(np.float64), t.grad.numpy().astype(np.float64)

    def exact(f: Callable[[Any], Any]) -> np.ndarray:
        """f at x's values (as the dtype holds them), rounded to the dtype: what a correctly rounded result is."""
        return np.array([float(f(M(float(v)))) for v in x]).astype(dt).astype(np.float64)

    want, dwant = exact(value), exact(derivative)
    terms = exact(TERMS[name]) if name in TERMS else dwant
    bound = LOOSER.get((name, dtype))
    for what, g, w, size in (("value", got, want, want), ("grad", grad, dwant, terms)):
        err = _ulps(g, w, size, dt)
        k = int(np.argmax(err))
        limit = max(bound or 0, ULPS[what])
        assert err[k] <= limit, f"{name} {what} at {x[k]!r}: {g[k]!r}, exact {w[k]!r} ({err[k]:.1f} eps > {limit})"


SPECIAL = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, -1.0, 1.0, -2.0, 2.0])


@pytest.mark.parametrize("device", on_devices())
@pytest.mark.parametrize("name", ["erf", "erfc", "tanh", "sinh", "asinh", "atanh", "expm1", "log1p", "gelu",
                                  "softplus", "elu", "mish"])
def test_special_values_are_torchs(name: str, device: str) -> None:
    got = getattr(Tensor(SPECIAL, device=device), name)().numpy()
    ref = getattr(torch.nn.functional, name, None) if name in ("gelu", "softplus", "elu", "mish") else \
        getattr(torch, name)
    assert ref is not None
    want = ref(torch.tensor(SPECIAL)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=0, equal_nan=True)


def test_the_tables_are_the_fit_tools() -> None:
    """The erf (and gelu) tables are what tools/fit_erf.py derives (a digit lost in copying them would show only as a
    value off somewhere), and they meet math.erf at the pieces' joint and far out."""
    from uopviz.tensor import special

    tool = runpy.run_path(str(Path(__file__).parents[2] / "tools" / "fit_erf.py"))
    for size, name in ((4, "float32"), (8, "float64")):
        small, large = tool["tables"](name)
        assert special._ERF_SMALL[size] == tuple(small) and special._ERFC_LARGE[size] == tuple(large)
    assert special._GAUSS_TAIL == tuple(tool["gauss_tail_table"]())
    for x in (0.0, special._X0 - 1e-12, special._X0, 3.0, 26.0):
        got = Tensor(np.array([x])).erf().numpy()[0], Tensor(np.array([x])).erfc().numpy()[0]
        assert got == pytest.approx((math.erf(x), math.erfc(x)), rel=ULPS["value"] * np.finfo(np.float64).eps, abs=0)
