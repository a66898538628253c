"""Silent wrong answers of issue 27, each against NumPy (or torch in float64) on every runtime: signed integer
floor modulo of large operands, bfloat16 copied to and from the PYTHON interpreter, float64 sin/cos/tan of huge
arguments, isclose at infinities, torch-style flat pad widths, and meshgrid called on a tensor."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from tensor_testing import check

from uopviz import Tensor, dtypes
from uopviz.tensor import ShapeError

RNG = np.random.default_rng(27)


# ---------------------------------------------------------------- signed integer % and //
def _int_pairs(npdt: type[np.signedinteger]) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of the extremes and small values, and random pairs of large values (where ((a%b)+b)%b
    overflowed in about one case in ten)."""
    info = np.iinfo(npdt)
    edge = np.array([info.min, info.min + 1, -7, -2, -1, 0, 1, 2, 7, info.max - 1, info.max], npdt)
    a, b = (g.ravel() for g in np.meshgrid(edge, edge))
    ra = RNG.integers(info.min, info.max, 60, dtype=npdt, endpoint=True)
    rb = RNG.integers(info.min, info.max, 60, dtype=npdt, endpoint=True)
    return np.concatenate([a, ra]), np.concatenate([b, rb])


@pytest.mark.parametrize("npdt", [np.int8, np.int16, np.int32, np.int64], ids=["int8", "int16", "int32", "int64"])
def test_signed_floor_mod_and_div_do_not_overflow(device: str, npdt: type[np.signedinteger]) -> None:
    a, b = _int_pairs(npdt)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    with np.errstate(all="ignore"):  # NumPy's x % 0 = x // 0 = 0 and min // -1 = min, as uopviz's (with a warning)
        check(ta % tb, np.mod(a, b))
        check(ta // tb, np.floor_divide(a, b))
        big = npdt(np.iinfo(npdt).max // 16 * 15)  # a constant divisor: C's % leaves a negative a's sign
        check(ta % int(big), np.mod(a, big))
        check(ta % -int(big), np.mod(a, -big))
    check(Tensor([500000000], dtype=dtypes.int32, device=device) % 2000000000, [500000000])


# ---------------------------------------------------------------- bfloat16 through the PYTHON runtime
BF16 = np.array([1.0, -2.5, 0.0, -0.0, 3.140625, 1e-40, 3e38, -np.inf, np.nan, 65280.0], np.float32)


@pytest.mark.parametrize("route", [("CPU", "PYTHON"), ("PYTHON", "CPU"), ("PYTHON", "PYTHON:1"),
                                   ("CL", "PYTHON"), ("PYTHON", "CL")], ids="->".join)
def test_bfloat16_copies_to_and_from_python(route: tuple[str, str]) -> None:
    src, dst = route
    if "CL" in route:
        from devices_here import HAS_CL
        if not HAS_CL:
            pytest.skip("no OpenCL device here")
    want = torch.tensor(BF16).to(torch.bfloat16).to(torch.float32).numpy()
    t = Tensor(BF16, device=src).cast(dtypes.bfloat16)
    check(t.to(dst), want)
    check(t.to(dst).add(1), (torch.tensor(want).to(torch.bfloat16) + 1).float().numpy())


@pytest.mark.parametrize("devs", [("PYTHON", "PYTHON:1"), ("CPU", "PYTHON")], ids="+".join)
def test_bfloat16_python_shards(devs: tuple[str, str]) -> None:
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    want = torch.tensor(x).to(torch.bfloat16).float().numpy()
    sharded = Tensor(x).cast(dtypes.bfloat16).shard(devs, 0)
    check(sharded, want)
    check(sharded.mul(2), want * 2)


# ---------------------------------------------------------------- float64 sin, cos, tan of any finite argument
def _huge_arguments() -> np.ndarray:
    """Magnitudes across the whole float64 range, both signs, with the worst case for the reduction
    (6381956970095103·2^797, the double nearest a multiple of π/2) and its neighbours, and edges."""
    mags = 10.0 ** RNG.uniform(-5, 308, 48)
    worst = np.ldexp(6381956970095103.0, 797)
    special = [1e16, 1e18, 1e22, 1e100, 1e300, np.finfo(np.float64).max, 2.0 ** 1023, worst,
               np.nextafter(worst, 0), np.nextafter(worst, np.inf), 5e-324, 0.0, np.pi / 4, 0.5, 2.0 ** 26 * np.pi]
    x = np.concatenate([mags, special])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("fn", ["sin", "cos", "tan"])
def test_float64_trig_of_huge_arguments(device: str, fn: str) -> None:
    x = _huge_arguments()
    want = getattr(np, fn)(x)
    got = getattr(Tensor(x, device=device), fn)().numpy()
    small = np.abs(want) <= 1
    np.testing.assert_allclose(got[small], want[small], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[~small], want[~small], rtol=1e-9)  # tan near a pole: |tan| > 1


@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_trig_of_inf_and_nan_is_nan(device: str, fn: str) -> None:
    for dt in (dtypes.float32, dtypes.float64):
        out = getattr(Tensor([np.inf, -np.inf, np.nan], dtype=dt, device=device), fn)().numpy()
        assert np.isnan(out).all(), (dt, out)


def test_float32_sin_stays_right_for_huge_arguments(device: str) -> None:
    x = np.concatenate([(10.0 ** RNG.uniform(-5, 38, 60)).astype(np.float32), [np.float32(3.4e38)]])
    x = np.concatenate([x, -x])
    want = np.sin(x.astype(np.float64))
    np.testing.assert_allclose(Tensor(x, device=device).sin().numpy(), want, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- isclose at infinities and nan
def test_isclose_infinities(device: str) -> None:
    vals = [np.inf, -np.inf, 0.0, 1.0, 1e30, -1e30, np.nan]
    a, b = (np.array(g, np.float64).ravel() for g in np.meshgrid(vals, vals))
    for dt in (np.float32, np.float64):
        x, y = a.astype(dt), b.astype(dt)
        tx, ty = Tensor(x, device=device), Tensor(y, device=device)
        for equal_nan in (False, True):
            want = np.isclose(x, y, equal_nan=equal_nan)
            np.testing.assert_array_equal(want, torch.isclose(torch.tensor(x), torch.tensor(y), equal_nan=equal_nan))
            check(tx.isclose(ty, equal_nan=equal_nan), want)
        check(tx.isclose(ty, rtol=np.inf), torch.isclose(torch.tensor(x), torch.tensor(y), rtol=np.inf).numpy())


# ---------------------------------------------------------------- pad widths: torch's flat form, NumPy's pairs
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_flat_pad_is_torch_style(device: str, mode: str) -> None:
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    np_mode = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
    for pads in [(0, 2, 3, 2), (1, 2), (1, 0, 0, 2, 1, 1), (1, 1, 1, 1, 0, 1, 0, 0)]:
        pairs = [(0, 0)] * (4 - len(pads) // 2) + [pads[i:i + 2] for i in range(len(pads) - 2, -1, -2)]
        want = np.pad(x, pairs, mode=np_mode)
        with contextlib.suppress(NotImplementedError):  # torch pads only some ranks in the other modes
            np.testing.assert_array_equal(torch.nn.functional.pad(torch.tensor(x), pads, mode=mode).numpy(), want)
        check(Tensor(x, device=device).pad(pads, mode=mode), want)
        check(Tensor(x, device=device).pad(list(pads), mode=mode), want)
    got = Tensor.ones(1, 1, 5, 5, device=device).pad((0, 2, 3, 2), mode=mode)
    assert got.shape == (1, 1, 10, 7)


def test_numpy_pad_pairs_keep_their_meaning(device: str) -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    t = Tensor(x, device=device)
    check(t.pad(((1, 2),)), np.pad(x, ((1, 2),)))
    check(t.pad(((1, 2),), mode="edge"), np.pad(x, ((1, 2),), mode="edge"))
    check(t.pad(((0, 1), None, (2, 1)), value=3), np.pad(x, ((0, 1), (0, 0), (2, 1)), constant_values=3))
    check(t.pad(2), np.pad(x, 2))


def test_flat_pad_rejects_bad_lengths() -> None:
    with pytest.raises(ShapeError):
        Tensor.ones(2, 2).pad((1, 2, 3))
    with pytest.raises(ShapeError):
        Tensor.ones(2, 2).pad((1, 1, 1, 1, 1, 1))


# ---------------------------------------------------------------- meshgrid on a tensor
@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_called_on_a_tensor_includes_it(device: str, indexing: str) -> None:
    a, b, c = np.arange(3, dtype=np.int32), np.arange(4, dtype=np.int32) * 10, np.arange(2, dtype=np.int32) * 100
    ta, tb, tc = (Tensor(v, device=device) for v in (a, b, c))
    want = np.meshgrid(a, b, c, indexing=indexing)
    for got in (ta.meshgrid(tb, tc, indexing=indexing), Tensor.meshgrid(ta, tb, tc, indexing=indexing),
                Tensor.meshgrid([ta, tb, tc], indexing=indexing)):
        assert len(got) == 3
        for g, w in zip(got, want):
            check(g, w)
    (only,) = ta.meshgrid()
    check(only, a)


# ---------------------------------------------------------------- found by the differential fuzzer
@pytest.mark.parametrize("shape", [(2,), (3,), (3, 1), (7, 2)])
def test_double_to_float_round_trip_rounds_every_element(device: str, shape: tuple[int, ...]) -> None:
    """GCC 12's SLP vectorizer folded two scalar double -> float -> double round trips into nothing, so on the CPU
    two of every three elements of a (3, 1) tensor kept their float64 digits (fuzzer, CPU seed 10691)."""
    x = RNG.standard_normal(shape)
    got = Tensor(x, device=device).cast(dtypes.float32).cast(dtypes.float64).numpy()
    np.testing.assert_array_equal(got, x.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("fill", [-10000.0, 10000.0, 3e5])
def test_log_softmax_keeps_the_digits_of_rows_far_from_zero(device: str, fill: float) -> None:
    """log_softmax as x − (m + log Σ) rounded log Σ to the ulp of m: a float32 row of -10000s gave -3.4960938
    for −log 33 = -3.4965076 (fuzzer, CPU seed 11404); (x − m) − log Σ keeps it, as torch does."""
    x = np.full((2, 33), fill, np.float32)
    x[1, 0] += 1
    want = torch.log_softmax(torch.tensor(x, dtype=torch.float64), 1).numpy()
    np.testing.assert_allclose(Tensor(x, device=device).log_softmax(1).numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_matmul_multiplies_in_float32(device: str, dt: str) -> None:
    """Products of halves overflowed before the float32 sum saw them: 300·300 − 300·300 gave NaN where torch
    (and a tensor core) gives 0 (fuzzer, CPU seed 11851: attention scores of masked -10000s)."""
    a = np.array([[300.0, 300.0], [1.5, -2.0]], np.float32)
    b = np.array([[300.0, 2.0], [-300.0, 0.25]], np.float32)
    want = (torch.tensor(a, dtype=getattr(torch, dt)) @ torch.tensor(b, dtype=getattr(torch, dt))).float().numpy()
    got = (Tensor(a, device=device).cast(dt) @ Tensor(b, device=device).cast(dt)).cast(dtypes.float32).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("npdt", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("n", [1, 2, 8])
def test_signed_overflow_wraps_as_numpy(device: str, npdt: type[np.signedinteger], n: int) -> None:
    """C leaves signed overflow undefined and GCC takes it never to happen: it took an overflowed square as >= 0
    and folded (x·x) % -7 to -12 (fuzzer, CPU seed 52785). Sums, products and shifts wrap as NumPy's, on scalars
    (n = 1) and vectors alike."""
    info = np.iinfo(npdt)
    v = np.array([80846216, 1, info.min, info.max, 46341, -3, 3037000499 % info.max, 9], npdt)[:n].reshape(1, n)
    x = Tensor(v, device=device)
    with np.errstate(all="ignore"):
        check((x * x) % -7, np.mod(v * v, -7))
        check((x + x) % 5, np.mod(v + v, 5))
        check((x * 3 + info.max) // 7, np.floor_divide(v * 3 + info.max, 7))
        check((x.abs() << 3) % 3, np.mod(np.abs(v) << 3, 3))


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_float64_to_half_rounds_once(device: str, dt: str) -> None:
    """A float64 value cast to a half is rounded once, as NumPy's astype and C's conversion do; through float32
    first it was rounded twice and came out 1 ulp off next to a tie (CL's halves and every bfloat16; fuzzer, CPU
    seed 50908 against torch, which rounds twice itself)."""
    h = RNG.standard_normal(300).astype(np.float16)
    ties = (h.astype(np.float64) + np.nextafter(h, np.float16(np.inf)).astype(np.float64)) / 2
    x = np.concatenate([ties + 1e-12, ties - 1e-12, ties, [np.nan, np.inf, -1e300, 65519.99, 65520.0]])
    f = x.astype(np.float32)  # the reference: round to float32 by round-to-odd, then to nearest even
    bits = f.view(np.uint32).copy()
    inexact = (f.astype(np.float64) != x) & ~np.isnan(x)
    bits[inexact & (np.abs(f.astype(np.float64)) > np.abs(x))] -= 1
    bits[inexact] |= 1
    want = torch.from_numpy(bits.view(np.float32)).to(getattr(torch, dt)).float().numpy()
    with np.errstate(over="ignore"):
        if dt == "float16":
            np.testing.assert_array_equal(want, x.astype(np.float16).astype(np.float32))  # the reference is NumPy's
    got = Tensor(x, device=device).cast(dt).cast(dtypes.float32).numpy()
    np.testing.assert_array_equal(got, want)
