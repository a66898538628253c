"""Elementwise Tensor ops against NumPy: broadcasting, promotion, arithmetic, comparisons, math, bits, errors."""

from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np
import pytest
from scipy import special
from tensor_testing import check, skip_big

from uopviz import Tensor, dtypes
from uopviz.dtype import DType, DTypeError, least_upper_dtype
from uopviz.tensor import ShapeError

RNG = np.random.default_rng(0)


def rand(shape: tuple[int, ...], dtype: str, lo: float = -10, hi: float = 10, nonzero: bool = False) -> np.ndarray:
    if dtype == "bool":
        return RNG.random(shape) < 0.5
    a = RNG.uniform(lo, hi, shape)
    if np.dtype(dtype).kind in "iu":
        a = np.round(a)
        if np.dtype(dtype).kind == "u":
            a = np.abs(a)
    if nonzero:
        a = np.where(a == 0, 3, a)
    return a.astype(dtype)


SHAPE_PAIRS = [((), ()), ((7,), ()), ((1,), (33,)), ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((5, 1, 7), (1, 6, 1)),
               ((1000,), (1000,))]
BINARY: dict[str, Callable] = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
                               "maximum": np.maximum, "minimum": np.minimum}


def tensor_op(name: str) -> Callable:
    return {"maximum": Tensor.maximum, "minimum": Tensor.minimum}.get(name, BINARY[name])


@pytest.mark.parametrize(("sa", "sb"), SHAPE_PAIRS)
@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_binary_broadcast(op: str, sa: tuple, sb: tuple, dtype: str, device: str) -> None:
    skip_big(device, *sa, *sb)
    a, b = rand(sa, dtype), rand(sb, dtype)
    out = tensor_op(op)(Tensor(a, device=device), Tensor(b, device=device))
    assert out.dtype == dtypes.from_numpy(dtype)
    with np.errstate(over="ignore"):
        check(out, BINARY[op](a, b))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int16", "int32", "int64", "uint16", "uint32"])
def test_division_family(dtype: str, device: str) -> None:
    a, b = rand((4, 7), dtype, -50, 50), rand((7,), dtype, -9, 9, nonzero=True)
    if np.dtype(dtype).kind == "u":
        b = np.where(b == 0, 1, b).astype(dtype)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    tol = 1e-6 if dtype != "float32" else 2e-7
    check(ta / tb, (a / b).astype(np.float64), rtol=tol)
    assert (ta / tb).dtype == (dtypes.from_numpy(dtype) if "float" in dtype else dtypes.float32)
    check(ta // tb, a // b, rtol=tol)
    check(ta % tb, a % b, rtol=1e-5, atol=1e-5)
    assert (ta // tb).dtype == (ta % tb).dtype == dtypes.from_numpy(dtype)


def test_floor_division_signs(device: str) -> None:
    a = np.array([7, -7, 7, -7, 0, 5, -5])
    b = np.array([2, 2, -2, -2, 3, -5, 5])
    ta, tb = Tensor(a, device=device, dtype=dtypes.int32), Tensor(b, device=device, dtype=dtypes.int32)
    check(ta // tb, a // b)
    check(ta % tb, a % b)
    fa, fb = a.astype(np.float32) + 0.5, b.astype(np.float32)
    check(Tensor(fa, device=device) // Tensor(fb, device=device), fa // fb)
    check(Tensor(fa, device=device) % Tensor(fb, device=device), fa % fb, rtol=1e-6)
    check(Tensor([1.0, -1.0, 0.0], device=device) // 0.0, np.array([np.inf, -np.inf, np.nan]))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
def test_integer_division_never_traps(dtype: str, device: str) -> None:
    info = np.iinfo(dtype)
    a = np.array([7, info.min + 1, 0, info.min, info.max, info.min, 5], dtype)
    b = np.array([0, 0, 0, -1, -1, 0, 2], dtype) if info.min < 0 else np.array([0, 0, 0, 1, 0, 3, 2], dtype)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    with np.errstate(all="ignore"):
        check(ta // tb, a // b)
        check(ta % tb, a % b)
        check(ta // 0, a // np.array(0, dtype))


@pytest.mark.parametrize(("dtype", "scalar", "want"), [
    (dtypes.int32, 1, dtypes.int32), (dtypes.int8, 3, dtypes.int8), (dtypes.uint8, 2, dtypes.uint8),
    (dtypes.int32, 1.5, dtypes.float32), (dtypes.float16, 2.0, dtypes.float16), (dtypes.float64, 2, dtypes.float64),
    (dtypes.bool, True, dtypes.bool), (dtypes.bool, 2, dtypes.int32), (dtypes.bool, 0.5, dtypes.float32),
])
def test_python_scalars_are_weak(dtype: DType, scalar: object, want: DType) -> None:
    t = Tensor.ones(3, dtype=dtype)
    assert (t + scalar).dtype == want and (scalar + t).dtype == want and (t * scalar).dtype == want


@pytest.mark.parametrize(("a", "b"), [(dtypes.int8, dtypes.uint8), (dtypes.int32, dtypes.float16),
                                      (dtypes.uint32, dtypes.int32), (dtypes.bool, dtypes.int16),
                                      (dtypes.float16, dtypes.float32), (dtypes.uint64, dtypes.int64)])
def test_tensor_promotion_follows_the_lattice(a: DType, b: DType) -> None:
    out = Tensor.ones(2, dtype=a) + Tensor.ones(2, dtype=b)
    assert out.dtype == least_upper_dtype(a, b)
    assert (Tensor.ones(2, dtype=a) < Tensor.ones(2, dtype=b)).dtype == dtypes.bool


def test_scalar_out_of_range_for_the_dtype() -> None:
    with pytest.raises(OverflowError, match="int8"):
        Tensor.ones(2, dtype=dtypes.int8) + 300


def test_scalar_and_reverse_operators(device: str) -> None:
    a = rand((2, 7), "float32", 1, 5)
    t = Tensor(a, device=device)
    check(2 - t, 2 - a)
    check(3 / t, 3 / a)
    check(10 // t, 10 // a)
    check(7 % t, 7 % a, rtol=1e-5, atol=1e-6)
    check(2 ** t, 2 ** a, rtol=1e-5)
    check(t ** 2, a ** 2)
    check(t ** 0.5, np.sqrt(a))
    check(t ** -1.5, a ** -1.5, rtol=1e-5)
    check(-t, -a)
    check(np.ones(7, np.float32) + t, a + 1)  # NumPy on the left defers to Tensor
    i = Tensor(np.arange(-3, 4), device=device, dtype=dtypes.int32)
    check(i * 2 + 1, np.arange(-3, 4) * 2 + 1)
    check(1 - i, 1 - np.arange(-3, 4))


def test_integer_powers(device: str) -> None:
    base = np.array([-3, -2, -1, 0, 1, 2, 3, 7], np.int32)
    exps = np.array([0, 1, 2, 3, 5, 4, 3, 11], np.int32)
    tb, te = Tensor(base, device=device), Tensor(exps, device=device)
    check(tb ** 3, base ** 3)
    assert (tb ** 3).dtype == dtypes.int32
    check(tb ** te, base ** exps)
    check(Tensor(np.array([1, -1, -1, 2, 0], np.int32), device=device) ** Tensor([-2, -3, -2, -1, 4], device=device),
          np.array([1, -1, 1, 0, 0]))
    check(Tensor(np.array([2, 3], np.uint8), device=device) ** Tensor(np.array([7, 5], np.uint8), device=device),
          np.array([128, 243], np.uint8))
    with pytest.raises(ValueError, match="negative integer powers"):
        tb ** -1


def test_float_pow_edge_cases(device: str) -> None:
    a = np.array([-2.0, -2.0, 0.0, 0.0, 4.0, -8.0, 1.0], np.float32)
    b = np.array([2.0, 3.0, 0.0, 2.0, 0.5, 1 / 3, np.nan], np.float32)
    with np.errstate(invalid="ignore"):
        check(Tensor(a, device=device) ** Tensor(b, device=device), a ** b, rtol=1e-5)


COMPARISONS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq,
               "ne": operator.ne}


@pytest.mark.parametrize("op", list(COMPARISONS))
@pytest.mark.parametrize("dtype", ["float32", "int16", "uint8", "bool"])
def test_comparisons(op: str, dtype: str, device: str) -> None:
    a, b = rand((3, 5), dtype, -3, 3), rand((5,), dtype, -3, 3)
    if dtype == "float32":
        a[0, :2] = np.nan
        b[3] = a[1, 3]
    out = COMPARISONS[op](Tensor(a, device=device), Tensor(b, device=device))
    assert out.dtype == dtypes.bool
    check(out, COMPARISONS[op](a, b))
    if dtype != "bool":
        check(COMPARISONS[op](Tensor(a, device=device), 1), COMPARISONS[op](a, np.array(1).astype(a.dtype)))


def test_kernel_whose_input_folds_away(device: str) -> None:
    check(Tensor([1, 2, 3], device=device) * 0 + 5, np.array([5, 5, 5]))
    check(Tensor([True, False], device=device) <= 1, np.array([True, True]))


def test_where(device: str) -> None:
    c = rand((3, 1), "bool")
    a, b = rand((3, 4), "float32"), rand((4,), "int32")
    tc, ta, tb = (Tensor(x, device=device) for x in (c, a, b))
    check(tc.where(ta, tb), np.where(c, a, b))
    check(Tensor.where(tc, ta, 0), np.where(c, a, 0))
    check(tc.where(1, 2.5), np.where(c, 1, 2.5))
    assert tc.where(1, 2).dtype == dtypes.int32 and tc.where(tb, 1.5).dtype == dtypes.float32
    check(Tensor([0, 2, -1], device=device).where(1.0, -1.0), np.array([-1.0, 1.0, 1.0]))


def test_min_max_of_extreme_ints(device: str) -> None:
    for dt in ("int8", "int32", "int64", "uint8", "uint32"):
        info = np.iinfo(dt)
        a = np.array([info.min, info.max, 0, info.min], dt)
        b = np.array([info.max, info.min, info.min, 1], dt)
        ta, tb = Tensor(a, device=device), Tensor(b, device=device)
        check(ta.minimum(tb), np.minimum(a, b))
        check(ta.maximum(tb), np.maximum(a, b))
    fa, fb = np.array([np.nan, 1.0, -0.5]), np.array([0.0, np.nan, -1.0])
    check(Tensor(fa, device=device).minimum(Tensor(fb, device=device)), np.minimum(fa, fb))
    check(Tensor([True, False], device=device).minimum(True), np.array([True, False]))


UNARY_FLOAT = {
    "exp": (np.exp, -20, 20, 2e-6), "exp2": (np.exp2, -20, 20, 2e-6), "log": (np.log, 1e-3, 1e3, 2e-6),
    "log2": (np.log2, 1e-3, 1e3, 2e-6), "sin": (np.sin, -20, 20, 1e-5), "cos": (np.cos, -20, 20, 1e-5),
    "tan": (np.tan, -1.4, 1.4, 1e-5), "sqrt": (np.sqrt, 0, 100, 1e-6),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0.1, 10, 1e-6),
    "reciprocal": (lambda x: 1 / x, 0.5, 10, 1e-6), "abs": (np.abs, -5, 5, 0), "sign": (np.sign, -5, 5, 0),
    "trunc": (np.trunc, -5, 5, 0), "floor": (np.floor, -5, 5, 0), "ceil": (np.ceil, -5, 5, 0),
    "relu": (lambda x: np.maximum(x, 0), -5, 5, 0), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -30, 30, 1e-6),
    "tanh": (np.tanh, -10, 10, 1e-5), "neg": (np.negative, -5, 5, 0),
    "gelu": (lambda x: x * 0.5 * (1 + special.erf(x / np.sqrt(2))), -6, 6, 1e-5),  # PyTorch's default: exact
    "silu": (lambda x: x / (1 + np.exp(-x)), -10, 10, 1e-5),
}


@pytest.mark.parametrize("name", list(UNARY_FLOAT))
@pytest.mark.parametrize("n", [1, 33, 1000])
def test_unary_float(name: str, n: int, device: str) -> None:
    skip_big(device, n)
    fn, lo, hi, tol = UNARY_FLOAT[name]
    a = rand((n,), "float32", lo, hi)
    out = getattr(Tensor(a, device=device), name)()
    assert out.dtype == dtypes.float32
    check(out, fn(a.astype(np.float64)), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "sigmoid"])
def test_math_on_ints_uses_the_default_float(name: str, device: str) -> None:
    a = np.arange(1, 8, dtype=np.int32)
    out = getattr(Tensor(a, device=device), name)()
    assert out.dtype == dtypes.float32
    ref = (lambda x: 1 / (1 + np.exp(-x))) if name == "sigmoid" else getattr(np, name)
    check(out, ref(a.astype(np.float64)), rtol=1e-5)


def test_float64_math(device: str) -> None:
    a = rand((9,), "float64", 0.1, 10)
    t = Tensor(a, device=device)
    check(t.exp(), np.exp(a), rtol=1e-14)
    check(t.log(), np.log(a), rtol=1e-14)
    check(t.sqrt(), np.sqrt(a), rtol=1e-15)


def test_special_values(device: str) -> None:
    a = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    t = Tensor(a, device=device)
    with np.errstate(all="ignore"):
        check(t.exp(), np.exp(a))
        check(t.sigmoid(), 1 / (1 + np.exp(-a)))
        check(t.abs(), np.abs(a))
        check(t.sign(), np.sign(a))
        check(t.isnan(), np.isnan(a))
        check(t.floor(), np.floor(a))


def test_int_abs_sign_neg(device: str) -> None:
    a = np.array([-128, -5, 0, 7, 127], np.int8)
    t = Tensor(a, device=device)
    check(t.abs(), np.abs(a))
    check(t.sign(), np.sign(a))
    check(-t, -a)
    u = np.array([0, 3, 255], np.uint8)
    check(-Tensor(u, device=device), -u)
    check(Tensor(u, device=device).sign(), np.sign(u))


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "uint64", "bool"])
def test_bitwise(dtype: str, device: str) -> None:
    a, b = rand((4, 6), dtype, -100, 100), rand((6,), dtype, -100, 100)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    check(ta & tb, a & b)
    check(ta | tb, a | b)
    check(ta ^ tb, a ^ b)
    check(~ta, ~a)
    if dtype != "bool":
        s = np.array([0, 1, 2, 3, 4, 5], dtype)
        check(ta << Tensor(s, device=device), a << s)
        check(ta >> Tensor(s, device=device), a >> s)
        check(ta >> 1, a >> 1)
        check(ta & 3, a & np.array(3, dtype))


def test_logical_not(device: str) -> None:
    check(Tensor([True, False], device=device).logical_not(), [False, True])
    check(Tensor([0.0, 2.0, np.nan], device=device).logical_not(), np.logical_not([0.0, 2.0, np.nan]))


def test_bool_arithmetic_follows_numpy(device: str) -> None:
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    check(ta + tb, a + b)
    check(ta * tb, a * b)
    check(ta.maximum(tb), np.maximum(a, b))
    with pytest.raises(DTypeError, match="subtraction"):
        ta - tb
    with pytest.raises(DTypeError, match="negation"):
        ta.neg()


def test_elementwise_errors() -> None:
    with pytest.raises(ShapeError, match=r"\(2, 3\) and \(4,\)"):
        Tensor.ones(2, 3) + Tensor.ones(4)
    with pytest.raises(ValueError):
        Tensor.ones(2, 3) * Tensor.ones(3, 2)
    with pytest.raises(DTypeError, match="bitwise"):
        Tensor.ones(3) & Tensor.ones(3)
    with pytest.raises(DTypeError, match="shift"):
        Tensor.ones(3) << 1
    with pytest.raises(DTypeError, match="bitwise not"):
        ~Tensor.ones(3)
    with pytest.raises(DTypeError):
        Tensor.ones(3).cast("complex64")


def test_half_precision_stays_half() -> None:
    h = Tensor.ones(3, dtype=dtypes.float16)
    assert (h * 2.0).dtype == dtypes.float16 and h.exp().dtype == dtypes.float16
    assert (h + Tensor.ones(3)).dtype == dtypes.float32
