"""exp2/exp/log2/log/sigmoid/softmax as kernels run them, over the float32 range, against NumPy in ulps.

The decomposition tests (tests/codegen/test_decompositions.py) evaluate Exp2 and Log2 with a separate rounding
for every product and sum; the CPU runs them with fused multiply-adds, and OpenCL and PYTHON with their own exp2
and log2. This file runs the Tensor ops on every device and measures what a user gets, special values included.

Measured maximum errors (the asserted bounds are these, rounded up):
  CPU (decomposed, with FMA): exp2 0.80 ulp on this sweep (0.95 at worst in a dense simulation), log2 1.61 ulp,
  log 1.63 ulp.
  PYTHON (math.exp2 / math.log2): exp2 and log2 correctly rounded, log 1.18 ulp. CL (PoCL): exp2 0.75, log2 0.50.
  exp on every device: ≤ 1.5 ulp over the whole range, ≤ 1 ulp in float64 (it was 1 + 0.98·|x| ulp while the
  front-end's exp was exp2(x·log2(e)), whose rounded product is amplified by |x·log2(e)|·ln 2; it now reduces x
  by n·ln 2 in two parts first, as libm does).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from tensor_testing import on_devices

from uopviz import Tensor

_F32 = np.float32
_SPECIALS = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 128.0, -149.0, -150.0, -126.0]


def _exp2_inputs() -> np.ndarray:
    """Every region of exp2: overflow, normal results, subnormal results (x in (-150, -126)), underflow to 0;
    a size that is no power of two, so the vector loops keep a remainder."""
    rng = np.random.default_rng(1)
    parts = [np.linspace(-160, 140, 2999), rng.uniform(-0.5, 0.5, 700), rng.uniform(-150, -126, 300),
             [127.99, 128.0, 129.5, -149.5, -149.99, -126.5, 88.7, 1e-30, -1e-30], _SPECIALS]
    return np.concatenate([np.asarray(p, np.float64) for p in parts]).astype(_F32)


def _log2_inputs() -> np.ndarray:
    """Positive values from the least subnormal to the largest float, values near 1, and every special case."""
    rng = np.random.default_rng(2)
    parts = [np.logspace(-45, 38.5, 2999), rng.uniform(0.5, 2.0, 700), rng.uniform(1e-45, 1e-38, 300),
             [3.4e38, 1.17549435e-38, 1.4e-45, -2.0, -1e-40], _SPECIALS]
    return np.concatenate([np.asarray(p, np.float64) for p in parts]).astype(_F32)


def ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got − exact| in ulps of exact rounded to float32, per element; 0 where both are the same special value,
    inf where only one is nan or infinite."""
    with np.errstate(all="ignore"):
        ref = exact.astype(_F32)
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
        err = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(ref)).astype(np.float64)
        return np.where(same, 0.0, np.where(np.isfinite(err), err, np.inf))


@pytest.fixture(scope="module")
def inputs() -> dict[str, np.ndarray]:
    return {"exp2": _exp2_inputs(), "log2": _log2_inputs()}


@pytest.mark.parametrize("device", on_devices())
def test_exp2_and_log2_whole_range(device: str, inputs: dict[str, np.ndarray]) -> None:
    x, y = inputs["exp2"], inputs["log2"]
    got_exp2 = Tensor(x, device=device).exp2().numpy()
    got_log2 = Tensor(y, device=device).log2().numpy()
    with np.errstate(all="ignore"):
        e2, l2 = ulps(got_exp2, np.exp2(x.astype(np.float64))), ulps(got_log2, np.log2(y.astype(np.float64)))
    assert e2.max() <= 1.0, (x[e2.argmax()], got_exp2[e2.argmax()], e2.max())
    assert l2.max() <= 1.7, (y[l2.argmax()], got_log2[l2.argmax()], l2.max())
    with np.errstate(all="ignore"):  # the special values bit for bit (-0 → 1, -inf → 0, 0 → -inf, < 0 → nan)
        np.testing.assert_array_equal(got_exp2[-len(_SPECIALS):], np.exp2(x[-len(_SPECIALS):]))
        np.testing.assert_array_equal(got_log2[-len(_SPECIALS):], np.log2(y[-len(_SPECIALS):]))
    sub = (x > -150) & (x < -126)  # results below the least normal: the right subnormal, not a flush to 0
    assert np.all(got_exp2[sub & (x > -149)] > 0)


@pytest.mark.parametrize("device", on_devices())
def test_exp_log_sigmoid_softmax(device: str, inputs: dict[str, np.ndarray]) -> None:
    x = inputs["exp2"][(inputs["exp2"] > -110) | ~np.isfinite(inputs["exp2"])]
    y = inputs["log2"]
    got_exp = Tensor(x, device=device).exp().numpy()
    got_log = Tensor(y, device=device).log().numpy()
    got_sig = Tensor(x, device=device).sigmoid().numpy()
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        e, lg = ulps(got_exp, np.exp(x64)), ulps(got_log, np.log(y.astype(np.float64)))
        sig = 1 / (1 + np.exp(-x64))
    assert e.max() <= 1.5, (x[e.argmax()], e.max())
    assert lg.max() <= 1.7, (y[lg.argmax()], lg.max())
    finite = ~np.isnan(x)
    np.testing.assert_allclose(got_sig[finite], sig[finite], rtol=1e-5, atol=1e-37)
    assert np.isnan(got_sig[~finite]).all()
    rows = np.random.default_rng(3).normal(0, 30, (37, 53)).astype(_F32)  # wide enough that exp underflows
    got = Tensor(rows, device=device).softmax(-1).numpy()
    r64 = rows.astype(np.float64)
    want = np.exp(r64 - r64.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-38)


@pytest.mark.parametrize("device", on_devices())
def test_exp_large_arguments(device: str) -> None:
    """|x| of 80 to 160, where the rounded product was up to 57–99 ulp off; float32 and float64."""
    x = np.concatenate([np.linspace(-104, -80, 1501), np.linspace(80, 88.72, 1501), [-103.97, 88.7228, 88.7229]])
    got = Tensor(x.astype(_F32), device=device).exp().numpy()
    with np.errstate(all="ignore"):
        e = ulps(got, np.exp(x.astype(_F32).astype(np.float64)))
    assert e.max() <= 1.5, (x[e.argmax()], e.max())
    x = np.concatenate([x, np.linspace(-745, -700, 501), np.linspace(700, 709.78, 501)])
    got64 = Tensor(x, device=device).exp().numpy()
    np.testing.assert_allclose(got64, np.exp(x), rtol=4e-16, atol=5e-324)


@pytest.mark.parametrize("device", on_devices())
def test_exp_gradient_is_exp(device: str) -> None:
    """exp's n is a constant to the chain rule: its gradient is e^x, not 0 (the reduced argument's x − n·ln 2
    would cancel it)."""
    x = np.array([-90.0, -3.5, 0.0, 0.25, 2.0, 80.0])
    for dt in (np.float32, np.float64):
        t = Tensor(x.astype(dt), device=device, requires_grad=True)
        np.testing.assert_allclose(t.exp().sum().gradient(t)[0].numpy(), np.exp(x.astype(dt)), rtol=1e-6)
