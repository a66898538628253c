"""Gradients at the points where compositions break: kinks, bounds, ties, overflow and the side of a where not
taken. Each elementwise activation and math function is swept over a grid holding 0, ±1, bounds and ±large values
and compared with PyTorch's gradient in float64 (its conventions: relu'(0) = 0, sign' = 0, clamp passes the
gradient at its bounds and hardtanh does not, a tie of maximum splits it); sigmoid and what is built on it stay
finite and exact where 2^x overflows (float32 too); and the conventions are spelled out one by one."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from uopviz import Tensor

GRID = [0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 6.0, -6.0, 20.0, -20.0, 50.0, -50.0,
        300.0, -300.0, 1e4, -1e4]
POS = [1e-30, 0.5, 1.0, 2.0, 300.0, 1e4]
UNIT = [0.0, -0.0, 1e-30, 0.5, -0.5, 0.9, -0.9, 0.999, -0.999]

Fn = Callable[[Tensor], Tensor]
TorchFn = Callable[[torch.Tensor], torch.Tensor]
# name: (uopviz, torch, points, relative tolerance)
CASES: dict[str, tuple[Fn, TorchFn, list[float], float]] = {
    "exp": (Tensor.exp, torch.exp, GRID, 1e-9), "exp2": (Tensor.exp2, torch.exp2, GRID, 1e-9),
    "log": (Tensor.log, torch.log, POS, 1e-9), "log2": (Tensor.log2, torch.log2, POS, 1e-9),
    "sqrt": (Tensor.sqrt, torch.sqrt, POS, 1e-9), "rsqrt": (Tensor.rsqrt, torch.rsqrt, POS, 1e-9),
    "reciprocal": (Tensor.reciprocal, torch.reciprocal, GRID, 1e-9),
    "sin": (Tensor.sin, torch.sin, GRID, 1e-9), "cos": (Tensor.cos, torch.cos, GRID, 1e-9),
    "tan": (Tensor.tan, torch.tan, GRID, 1e-9), "abs": (Tensor.abs, torch.abs, GRID, 0),
    "sign": (Tensor.sign, torch.sign, GRID, 0), "relu": (Tensor.relu, torch.relu, GRID, 0),
    "sigmoid": (Tensor.sigmoid, torch.sigmoid, GRID, 1e-9), "tanh": (Tensor.tanh, torch.tanh, GRID, 1e-9),
    "gelu_tanh": (lambda x: x.gelu("tanh"), lambda x: F.gelu(x, approximate="tanh"), GRID, 1e-9),
    "quick_gelu": (Tensor.quick_gelu, lambda x: x * torch.sigmoid(1.702 * x), GRID, 1e-9),
    "silu": (Tensor.silu, F.silu, GRID, 1e-9), "elu": (Tensor.elu, F.elu, GRID, 1e-9),
    "selu": (Tensor.selu, F.selu, GRID, 1e-9), "celu": (lambda x: x.celu(2.0), lambda x: F.celu(x, 2.0), GRID, 1e-9),
    "relu6": (Tensor.relu6, F.relu6, GRID, 0), "hardtanh": (Tensor.hardtanh, F.hardtanh, GRID, 0),
    "leaky_relu": (Tensor.leaky_relu, F.leaky_relu, GRID, 0),
    "hardsigmoid": (Tensor.hardsigmoid, F.hardsigmoid, GRID, 1e-7),  # PyTorch's 1/6 is a float32 constant
    "hardswish": (Tensor.hardswish, F.hardswish, GRID, 1e-7),
    "softplus": (Tensor.softplus, F.softplus, GRID, 1e-9),
    "softplus_beta": (lambda x: x.softplus(2.0, 5.0), lambda x: F.softplus(x, 2.0, 5.0), GRID, 1e-9),
    "mish": (Tensor.mish, F.mish, GRID, 1e-9), "softsign": (Tensor.softsign, F.softsign, GRID, 1e-9),
    "logsigmoid": (Tensor.logsigmoid, F.logsigmoid, GRID, 1e-9),
    "clip": (lambda x: x.clip(-1, 1), lambda x: torch.clamp(x, -1, 1), GRID, 0),
    "clip_min": (lambda x: x.clip(0.5), lambda x: torch.clamp(x, 0.5), [*GRID, 0.5], 0),
    "clip_max": (lambda x: x.clip(None, 0.5), lambda x: torch.clamp(x, None, 0.5), [*GRID, 0.5], 0),
    "erf": (Tensor.erf, torch.erf, GRID, 1e-5), "atan": (Tensor.atan, torch.atan, GRID, 1e-6),
    "asin": (Tensor.asin, torch.asin, UNIT, 1e-5), "acos": (Tensor.acos, torch.acos, UNIT, 1e-5),
    "asinh": (Tensor.asinh, torch.asinh, GRID, 1e-9), "atanh": (Tensor.atanh, torch.atanh, UNIT, 1e-9),
    "sinh": (Tensor.sinh, torch.sinh, GRID[:-2], 1e-9), "cosh": (Tensor.cosh, torch.cosh, GRID[:-2], 1e-9),
    "pow0": (lambda x: x ** 0.0, lambda x: x ** 0.0, GRID, 0),
    "pow3": (lambda x: x ** 3.0, lambda x: x ** 3.0, GRID, 1e-9),
    "pow_neg": (lambda x: x ** -1.0, lambda x: x ** -1.0, GRID, 1e-9),
    "pow_1_5": (lambda x: x ** 1.5, lambda x: x ** 1.5, [*POS, 0.0], 1e-9),
    "exp_base0": (lambda x: 0.0 ** x, lambda x: 0.0 ** x, [*POS, 0.0], 0),
    "maximum0": (lambda x: x.maximum(0.0), lambda x: torch.maximum(x, torch.zeros_like(x)), GRID, 0),
    "minimum0": (lambda x: x.minimum(0.0), lambda x: torch.minimum(x, torch.zeros_like(x)), GRID, 0),
    "logaddexp": (lambda x: x.logaddexp(0.0), lambda x: torch.logaddexp(x, torch.zeros_like(x)), GRID, 1e-9),
}
# absolute tolerances: cos is 1 below |x| = 1e-18 (flat there); A&S 7.1.26's derivative is off by up to 3e-7
ATOL = {"cos": 1e-18, "erf": 1e-6}


def torch_grad(fn: TorchFn, points: list[float], dtype: torch.dtype = torch.float64) -> np.ndarray:
    x = torch.tensor(points, dtype=dtype, requires_grad=True)
    fn(x).sum().backward()
    assert x.grad is not None
    return x.grad.numpy()


def grad(fn: Fn, points: list[float], dtype: str = "float64", device: str = "CPU") -> np.ndarray:
    x = Tensor(np.array(points, dtype), device=device)
    (g,) = fn(x).sum().gradient(x)
    return g.numpy()


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch_float64(name: str) -> None:
    fn, tfn, points, rtol = CASES[name]
    np.testing.assert_allclose(grad(fn, points), torch_grad(tfn, points), rtol=rtol, atol=ATOL.get(name, 1e-15),
                               err_msg=f"{name} at {points}")


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "gelu_tanh", "quick_gelu", "silu", "elu", "selu", "celu",
                                  "softplus", "mish", "logsigmoid"])
def test_overflow_float32(name: str, device: str) -> None:
    """Where e^±x overflows float32 (±300, ±1e4) the gradient is finite and PyTorch's (float32)."""
    fn, tfn, _, _ = CASES[name]
    points = [-1e4, -300.0, 0.0, 300.0, 1e4]
    got = grad(fn, points, "float32", device)
    assert np.isfinite(got).all(), f"{name}: {got}"
    np.testing.assert_allclose(got, torch_grad(tfn, points, torch.float32), rtol=2e-5, atol=1e-30)


def _dsigmoid(x: np.ndarray) -> np.ndarray:
    s = 1 / (1 + np.exp(-x))
    return s * (1 - s)


# the exact derivatives, in float64 (PyTorch's tanh' is 1 − tanh², 0 from |x| = 20 on)
EXACT: dict[str, tuple[Callable[[np.ndarray], np.ndarray], list[float]]] = {
    "sigmoid": (_dsigmoid, [-60.0, -50.0]), "tanh": (lambda x: 1 / np.cosh(x) ** 2, [-30.0, -25.0]),
    "silu": (lambda x: 1 / (1 + np.exp(-x)) + x * _dsigmoid(x), [-60.0, -50.0]),
    "quick_gelu": (lambda x: 1 / (1 + np.exp(-1.702 * x)) + 1.702 * x * _dsigmoid(1.702 * x), [-35.0, -30.0]),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_sigmoid_keeps_its_digits_float32(name: str) -> None:
    """sigmoid'(x) = s·(1 − s) where s² underflows float32 (s < 1e-22) though s does not: through its parts the
    gradient would be s² times the large e^−x, all its digits lost."""
    exact, points = EXACT[name]
    np.testing.assert_allclose(grad(CASES[name][0], points, "float32"), exact(np.array(points)), rtol=2e-5, atol=0)


def test_conventions_at_kinks_and_ties(device: str) -> None:
    def g(fn: Fn, *points: float) -> list[float]:
        return grad(fn, list(points), device=device).tolist()

    assert g(Tensor.relu, 0.0, -0.0) == [0.0, 0.0]
    assert g(Tensor.sign, 0.0, 1.0, -2.0) == [0.0, 0.0, 0.0]
    assert g(lambda x: x.clip(-1, 1), -1.0, 1.0, -1.5, 1.5) == [1.0, 1.0, 0.0, 0.0]  # torch.clamp
    assert g(Tensor.relu6, 0.0, 6.0, 3.0) == [0.0, 0.0, 1.0]                           # torch's hardtanh
    assert g(Tensor.hardtanh, -1.0, 1.0, 0.5) == [0.0, 0.0, 1.0]
    assert g(lambda x: x.maximum(1.0), 1.0, 2.0, 0.0) == [0.5, 1.0, 0.0]             # a tie splits
    assert g(lambda x: x.max(), 1.0, 3.0, 3.0) == [0.0, 0.5, 0.5]                     # so does the max of a row
    assert g(lambda x: x ** 0.0, 0.0, 2.0) == [0.0, 0.0]
    assert g(Tensor.cos, 0.0) == [0.0] and g(Tensor.tan, 0.0) == [1.0]
    assert g(Tensor.atan, 0.0) == [1.0] and g(Tensor.asinh, 0.0) == [1.0]
    assert g(Tensor.erf, 0.0)[0] == pytest.approx(2 / np.sqrt(np.pi), rel=1e-5)


def test_clip_by_tensors_as_torch() -> None:
    """clip by tensor bounds: at a tie the gradient goes to x, beyond a bound to the bound (torch.clamp)."""
    x, lo, hi = (Tensor(np.array(v)) for v in ([-1.0, 2.0, 5.0], [-1.0, 3.0, 0.0], [4.0, 4.0, 4.0]))
    gx, glo, ghi = x.clip(lo, hi).sum().gradient(x, lo, hi)
    xt, lot, hit = (torch.tensor(v, dtype=torch.float64, requires_grad=True)
                    for v in ([-1.0, 2.0, 5.0], [-1.0, 3.0, 0.0], [4.0, 4.0, 4.0]))
    torch.clamp(xt, lot, hit).sum().backward()
    for got, want in ((gx, xt), (glo, lot), (ghi, hit)):
        assert want.grad is not None
        np.testing.assert_array_equal(got.numpy(), want.grad.numpy())


def test_side_not_taken_adds_nothing(device: str) -> None:
    """The side of a where not taken is NaN or infinite there (log of a negative, 1/0, e^1e4): the gradient is the
    taken side's, never NaN (PyTorch gives NaN for these)."""
    x = [0.0, -1.0, 2.0, 1e4]
    np.testing.assert_allclose(grad(lambda t: (t > 0).where(t.log(), 0.0), x, device=device), [0, 0, 0.5, 1e-4])
    np.testing.assert_array_equal(grad(lambda t: (t > 0).where(t.sqrt(), 0.0), [0.0, -1.0, 4.0], device=device),
                                  [0, 0, 0.25])
    np.testing.assert_array_equal(grad(lambda t: (t < 1).where(t.exp(), t), x, device=device),
                                  [1, np.exp(-1.0), 1, 1])
    np.testing.assert_array_equal(grad(lambda t: (t != 0).where(t.reciprocal(), 0.0), [0.0, 2.0], device=device),
                                  [0, -0.25])


def test_infinite_gradient_does_not_reach_the_losing_side(device: str) -> None:
    """max(a, b) with an infinite gradient (e^1000 overflows): the side that lost gets 0, not inf·0 = NaN, as in
    torch.maximum; the same for the elements a max reduction did not pick."""
    a, b = Tensor(np.array([1000.0]), device=device), Tensor(np.array([0.0]), device=device)
    ga, gb = a.maximum(b).exp().sum().gradient(a, b)
    assert ga.numpy().tolist() == [np.inf] and gb.numpy().tolist() == [0.0]
    x = Tensor(np.array([1000.0, 0.0]), device=device)
    assert x.max().exp().gradient(x)[0].numpy().tolist() == [np.inf, 0.0]


def test_parts_of_sigmoid_as_targets() -> None:
    """sigmoid's own rule stands in for its parts' only where none of them is asked for: a gradient with respect
    to e^−x or 1 + e^−x is still theirs."""
    x = Tensor(np.array([-2.0, 0.0, 3.0]))
    e = x.neg().exp()
    d = e + 1
    s = d.reciprocal()
    ge, gd, gx = s.sum().gradient(e, d, x)
    sv = 1 / (1 + np.exp(-x.numpy()))
    np.testing.assert_allclose(ge.numpy(), -sv ** 2, rtol=1e-12)
    np.testing.assert_allclose(gd.numpy(), -sv ** 2, rtol=1e-12)
    np.testing.assert_allclose(gx.numpy(), sv * (1 - sv), rtol=1e-12)
