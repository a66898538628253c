"""Decomposed elementwise ops against NumPy: each op is decomposed into primitives, the result is run on
thousands of inputs by a NumPy executor of the primitives (checked against uopviz.uop.alu.evaluate on a
sample), and compared in ulps with a float64 (for float32) or NumPy float64 reference.

Measured maximum errors (the asserted bounds are these, rounded up):
  float32: Exp2 1.08 ulp on [-150, 130] (each product and sum rounded on its own; 1.23 at worst in a dense sweep
           near a fraction of -½; with the fused multiply-adds the CPU uses, 0.80: tests/tensor/test_exp_log_sweep.py);
           Log2 1.43 ulp on [1e-45, 3e38]; Sin 2.03 ulp on [-1e4, 1e4];
           Sqrt 1.17 ulp; Pow ≤ 2^-24·(8 + 4·|log2 result|) relative.
  float64: Exp2 1.0 ulp on [-1080, 1030]; Log2 1.0 ulp on [1e-323, 1e308]; Sin 1.0 ulp on [-1e6, 1e6] and 2.0
           over the whole range (against torch's float64); Sqrt 1.0 ulp.
  float16 (computed in float32): 0 ulp (correctly rounded) on the same kinds of inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from uopviz.codegen.decompositions import decompose
from uopviz.dtype import DType, dtypes
from uopviz.uop.alu import evaluate, exec_alu
from uopviz.uop.ops import GroupOp, Ops, SpecError, UOp
from uopviz.uop.pattern import graph_rewrite

# ---------------------------------------------------------------- test oracle: a NumPy executor of primitives
_NP_FNS: dict[Ops, Callable[..., np.ndarray]] = {
    Ops.RECIP: np.reciprocal, Ops.TRUNC: np.trunc, Ops.ADD: np.add, Ops.MUL: np.multiply, Ops.MAX: np.maximum,
    Ops.MOD: np.mod, Ops.IDIV: np.floor_divide, Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal,
    Ops.XOR: np.bitwise_xor, Ops.OR: np.bitwise_or, Ops.AND: np.bitwise_and, Ops.SHR: np.right_shift,
    Ops.SHL: np.left_shift, Ops.WHERE: np.where,
}


def run_np(root: UOp, inputs: dict[UOp, np.ndarray]) -> np.ndarray:
    """Evaluate a graph of primitives elementwise over arrays (inputs: placeholder node -> array)."""
    vals: dict[UOp, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for u in root.toposort():
            if u in inputs:
                vals[u] = inputs[u]
                continue
            if u.op is Ops.STACK:
                continue
            dt = dtypes.to_numpy(u.dtype)
            if u.op is Ops.CONST:
                vals[u] = np.array(u.arg.value, dt)
            elif u.op is Ops.CAST:
                vals[u] = vals[u.src[0]].astype(dt)
            elif u.op is Ops.BITCAST:
                vals[u] = np.ascontiguousarray(vals[u.src[0]]).view(dt)
            else:
                vals[u] = np.asarray(_NP_FNS[u.op](*(vals[s] for s in u.src))).astype(dt)
    return vals[root]


def decomposed(op: Ops, dtype: DType, n_in: int = 1) -> tuple[UOp, list[UOp]]:
    xs = [UOp.param(i, (), dtype) for i in range(n_in)]
    node = UOp(op, tuple(xs))
    out = graph_rewrite(node, decompose(), name="decompose")
    left = {u.op for u in out.toposort()} & GroupOp.Decomposed
    assert not left, f"{op} left {left}"
    assert out.dtype == node.dtype
    return out, xs


def check_against_evaluate(out: UOp, xs: list[UOp], cols: list[np.ndarray], n: int = 12) -> None:
    """The NumPy executor and alu.evaluate agree bit for bit on a sample (the executor is a faithful oracle)."""
    got = run_np(out, dict(zip(xs, cols)))
    for i in np.linspace(0, len(cols[0]) - 1, n).astype(int):
        ref = evaluate(out.substitute({x: UOp.const(x.dtype, c[i].item()) for x, c in zip(xs, cols)}))
        g = got[i].item()
        assert g == ref or (math.isnan(g) and math.isnan(ref)), (i, [c[i] for c in cols], g, ref)


def ulp_error(got: np.ndarray, exact: np.ndarray, dtype: np.dtype) -> float:
    """Max |got − exact| in ulps of the exact value rounded to dtype; a nan/inf mismatch counts as inf."""
    with np.errstate(all="ignore"):
        ref = exact.astype(dtype)
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
        err = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(ref)).astype(np.float64)
        err = np.where(same, 0.0, np.where(np.isfinite(err), err, np.inf))
    return float(err.max())


SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.0, 0.5, 2.0]


def inputs(dtype: np.dtype, *parts: np.ndarray) -> np.ndarray:
    """The given points and SPECIALS in dtype (values beyond its range become ±inf)."""
    with np.errstate(over="ignore"):
        return np.concatenate([np.asarray(p, np.float64) for p in (*parts, SPECIALS)]).astype(dtype)


rng = np.random.default_rng(0)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _exp2_in(dt: np.dtype) -> np.ndarray:
    lo, hi = (-150, 130) if dt == F32 else (-1080, 1030)
    return inputs(dt, np.linspace(lo, hi, 6001), rng.uniform(-1, 1, 2000), [-149.5, -126.5, 127.99, 128.0])


def _log2_in(dt: np.dtype) -> np.ndarray:
    lo, hi = (-45, 38.5) if dt == F32 else (-323, 308)
    return inputs(dt, np.logspace(lo, hi, 6001), rng.uniform(0.5, 2, 2000), [-1.0, 1e-40, 3e38])


def _sin_in(dt: np.dtype) -> np.ndarray:
    big = 1e4 if dt == F32 else 1e6
    return inputs(dt, rng.uniform(-big, big, 5000), rng.uniform(-4, 4, 2000), np.logspace(-40, 0, 500),
                  [math.pi, math.pi / 2, 1e-30])


def _sqrt_in(dt: np.dtype) -> np.ndarray:
    return _log2_in(dt)


CASES: dict[Ops, tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.dtype], np.ndarray], dict[str, float]]] = {
    Ops.EXP2: (np.exp2, _exp2_in, {"float32": 1.25, "float64": 1.0}),
    Ops.LOG2: (np.log2, _log2_in, {"float32": 1.5, "float64": 1.0}),
    Ops.SIN: (np.sin, _sin_in, {"float32": 2.1, "float64": 1.0}),
    Ops.SQRT: (np.sqrt, _sqrt_in, {"float32": 1.2, "float64": 1.0}),
}


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("op", list(CASES), ids=lambda o: o.value)
def test_unary_float_accuracy(op: Ops, dt: DType) -> None:
    ref_fn, make, bounds = CASES[op]
    npdt = dtypes.to_numpy(dt)
    x = make(npdt)
    out, xs = decomposed(op, dt)
    got = run_np(out, {xs[0]: x})
    with np.errstate(all="ignore"):
        exact = ref_fn(x.astype(np.float64))
    err = ulp_error(got, exact, npdt)
    assert err <= bounds[dt.name], f"{op.value} {dt.name}: {err:.3f} ulp"
    check_against_evaluate(out, xs, [x])


def test_sin_float64_reduces_every_finite_argument() -> None:
    """Beyond Cody–Waite's 2^26, Payne–Hanek: every binade up to the largest double, and multiples of the double
    nearest a multiple of π/2 (6381956970095103·2^797), whose sines near 1e-18 need every bit of the reduction
    to keep their relative accuracy (a rounded k·π/2 gave sin(1e18) = -3.5e22 and sin(1e100) = -inf)."""
    worst = np.ldexp(6381956970095103.0, 797)
    with np.errstate(over="ignore"):
        x = inputs(F64, 10.0 ** rng.uniform(7, 308.2, 6000), np.ldexp(1.0, np.arange(20, 1024)),
                   worst * 2.0 ** np.arange(0, 200, 7), [2.0 ** 26, np.nextafter(2.0 ** 26, 0), np.finfo(F64).max])
    x = np.concatenate([x, -x])
    out, xs = decomposed(Ops.SIN, dtypes.float64)
    got = run_np(out, {xs[0]: x})
    exact = torch.sin(torch.from_numpy(x)).numpy()  # NumPy's sin (and the C library's) err by 4 ulp near 0 there
    assert ulp_error(got, exact, F64) <= 2.0
    check_against_evaluate(out, xs, [x], n=40)


@pytest.mark.parametrize("op", list(CASES), ids=lambda o: o.value)
def test_float16_goes_through_float32(op: Ops) -> None:
    x = CASES[op][1](np.dtype(np.float16))
    out, xs = decomposed(op, dtypes.float16)
    got = run_np(out, {xs[0]: x})
    with np.errstate(all="ignore"):
        exact = CASES[op][0](x.astype(np.float64))
    assert ulp_error(got, exact, np.dtype(np.float16)) <= 1.0


def test_pow_accuracy_and_c_edge_cases() -> None:
    out, xs = decomposed(Ops.POW, dtypes.float32, 2)
    a = rng.uniform(0, 20, 4000).astype(np.float32)
    b = rng.uniform(-30, 30, 4000).astype(np.float32)
    a[::3] *= -1
    b[::3] = np.round(b[::3])  # negative bases need integral exponents
    got = run_np(out, {xs[0]: a, xs[1]: b})
    with np.errstate(all="ignore"):
        exact = np.power(a.astype(np.float64), b.astype(np.float64))
        ok = np.isfinite(exact) & (np.abs(exact) > 1e-37) & (np.abs(exact) < 1e38)
        rel = np.abs(got[ok] - exact[ok]) / np.abs(exact[ok])
    bound = 2.0 ** -24 * (8 + 4 * np.abs(np.log2(np.abs(exact[ok]))))
    assert np.all(rel <= bound), float((rel / bound).max())
    special = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, math.inf, -math.inf, math.nan]
    sa, sb = (np.array(v, np.float32).ravel() for v in np.meshgrid(special, special))
    got = run_np(out, {xs[0]: sa, xs[1]: sb})
    for x, y, g in zip(sa.tolist(), sb.tolist(), got.tolist()):
        ref = exec_alu(Ops.POW, dtypes.float32, [x, y])
        close = g == ref or (math.isfinite(ref) and abs(g - ref) <= 1e-6 * abs(ref))  # exact for 0, ±1, inf
        assert (math.isnan(g) and math.isnan(ref)) or (close and math.copysign(1, g) == math.copysign(1, ref)), \
            (x, y, g, ref)
    check_against_evaluate(out, xs, [sa, sb])


def test_exp2_edges_float32() -> None:
    out, xs = decomposed(Ops.EXP2, dtypes.float32)
    x = np.array([-math.inf, math.inf, math.nan, -149.0, -150.5, 128.0, -126.0], np.float32)
    got = run_np(out, {xs[0]: x})
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, np.exp2(x))  # -149: least subnormal; 128: overflows to inf


def test_log2_edges() -> None:
    for dt in (dtypes.float32, dtypes.float64):
        out, xs = decomposed(Ops.LOG2, dt)
        x = np.array([0.0, -0.0, -1.0, math.inf, -math.inf, math.nan, 1.0, 2.0 ** -149], dtypes.to_numpy(dt))
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(run_np(out, {xs[0]: x}), np.log2(x))


# Div is SPEC's Mul(A, Recip(B)) (two roundings), so that is the reference
@pytest.mark.parametrize("op, np_fn", [
    (Ops.NEG, np.negative), (Ops.SUB, np.subtract), (Ops.DIV, lambda a, b: a * np.reciprocal(b)),
    (Ops.CMPGT, np.greater), (Ops.CMPGE, np.greater_equal), (Ops.CMPLE, np.less_equal), (Ops.CMPEQ, np.equal),
    (Ops.MULACC, None),
], ids=lambda v: v.value if isinstance(v, Ops) else "")
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.int32, dtypes.uint8], ids=lambda d: d.name)
def test_simple_ops_exact(op: Ops, np_fn: Callable[..., np.ndarray] | None, dt: DType) -> None:
    if op is Ops.DIV and not dt.is_float:
        with pytest.raises(SpecError, match="needs float operands"):
            decomposed(op, dt, 2)
        return
    n_in = 3 if op is Ops.MULACC else 1 if op is Ops.NEG else 2
    npdt = dtypes.to_numpy(dt)
    vals = [-3, -1, 0, 1, 2, 7, 100] if not dt.is_float else [-2.5, -0.0, 0.0, 1.0, 3.0, math.inf, math.nan]
    grid = [np.array(g, npdt).ravel() for g in np.meshgrid(*[np.array(vals).astype(npdt)] * n_in)]
    out, xs = decomposed(op, dt, n_in)
    got = run_np(out, dict(zip(xs, grid)))
    with np.errstate(all="ignore"):
        ref = grid[0] * grid[1] + grid[2] if op is Ops.MULACC else np_fn(*grid)  # type: ignore[misc]
    np.testing.assert_array_equal(got, ref)
    check_against_evaluate(out, xs, grid)


def test_not_and_native_ops_are_kept() -> None:
    b = UOp.param(0, (), dtypes.bool)
    out = graph_rewrite(UOp(Ops.NOT, (b,)), decompose())
    assert out.op is Ops.CMPNE and run_np(out, {b: np.array([True, False])}).tolist() == [False, True]
    x = UOp.param(0, (), dtypes.float32)
    kept = graph_rewrite(UOp(Ops.SQRT, (x,)), decompose(frozenset({Ops.EXP2, Ops.LOG2})))
    assert {Ops.EXP2, Ops.LOG2} <= {u.op for u in kept.toposort()} and Ops.SQRT not in {u.op for u in kept.toposort()}
    assert graph_rewrite(UOp(Ops.EXP2, (x,)), decompose(frozenset({Ops.EXP2}))).op is Ops.EXP2


def test_shape_kept() -> None:
    x = UOp.param(0, (4, 3), dtypes.float32)
    for op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.NEG):
        out = graph_rewrite(UOp(op, (x,)), decompose())
        assert out.shape == (4, 3) and out.dtype == dtypes.float32


def test_threefry_matches_alu() -> None:
    out, xs = decomposed(Ops.THREEFRY, dtypes.uint64, 2)
    ctr = rng.integers(0, 2 ** 63, 500, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    key = rng.integers(0, 2 ** 63, 500, dtype=np.uint64)
    got = run_np(out, {xs[0]: ctr, xs[1]: key})
    assert got.tolist() == [exec_alu(Ops.THREEFRY, dtypes.uint64, [c, k]) for c, k in zip(ctr.tolist(), key.tolist())]
    check_against_evaluate(out, xs, [ctr, key], n=3)
