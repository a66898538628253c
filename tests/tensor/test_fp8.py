"""fp8 dtypes (float8_e4m3fn and float8_e5m2, torch's names; fp8e4m3 and fp8e5m2, tinygrad's): rounding as torch's
casts round (e4m3fn saturates at ±448, inf included; e5m2 overflows to inf), every bit pattern's value, casts and
arithmetic through float32 on every device (each op computed in float32 and rounded to fp8, as torch's
`(a.float() op b.float()).to(fp8)`), and CUDA source NVRTC compiles."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensor_testing import on_devices

from tests.cuda.support import ARCHS, SM80, needs_nvrtc
from uopviz import Tensor
from uopviz.dtype import DTypeError, dtypes, least_upper_dtype
from uopviz.pipeline import kernels_of, lower, schedule
from uopviz.runtime.cuda import nvrtc_compile

FP8 = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}


def _inputs() -> np.ndarray:
    """float32 values over every binade the fp8s reach, beyond them both ways, the ties at their ends, and the
    special values."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal(3001) * 10.0 ** rng.uniform(-9, 6, 3001)
    ends = [
        448,
        449,
        463.99,
        464,
        464.01,
        480,
        57344,
        61439,
        61440,
        65536,
        2.0**-9,
        2.0**-10,
        3 * 2.0**-11,
        2.0**-16,
        2.0**-17,
        1.01 * 2.0**-17,
        1e-30,
    ]
    return np.concatenate([x, ends, np.negative(ends), [np.inf, -np.inf, np.nan, 0.0, -0.0]]).astype(np.float32)


def _torch_fp8(x: np.ndarray, name: str) -> np.ndarray:
    return torch.tensor(x).to(FP8[name]).float().numpy()


def test_names_and_aliases() -> None:
    assert dtypes.from_name("fp8e4m3") is dtypes.float8_e4m3fn and dtypes.fp8e5m2 is dtypes.float8_e5m2
    assert dtypes.float8_e4m3fn.itemsize == 1 and dtypes.float8_e5m2.is_float
    assert dtypes.float8_e4m3fn.finfo_max == 448.0 and dtypes.float8_e5m2.finfo_max == 57344.0
    assert dtypes.storage_numpy(dtypes.float8_e5m2) == np.uint8
    with pytest.raises(DTypeError, match="no NumPy equivalent"):
        dtypes.to_numpy(dtypes.float8_e4m3fn)
    # promotion: a Python scalar keeps fp8; another float dtype is wider; the two fp8s meet in float16
    assert least_upper_dtype(dtypes.float8_e4m3fn, dtypes.float32) == dtypes.float32
    assert least_upper_dtype(dtypes.float8_e4m3fn, dtypes.float8_e5m2) == dtypes.float16


@pytest.mark.parametrize("name", list(FP8))
def test_every_bit_pattern_and_rounding_as_torch(name: str) -> None:
    dt = dtypes.from_name(name)
    patterns = torch.arange(256, dtype=torch.uint8).view(FP8[name]).float().numpy()
    np.testing.assert_array_equal(dtypes.fp8_from_bits(np.arange(256), dt), patterns)
    x = _inputs()
    want = torch.tensor(x).to(FP8[name])
    np.testing.assert_array_equal(np.array([dt.normalize(float(v)) for v in x], np.float32), want.float().numpy())
    bits, got = want.view(torch.uint8).numpy(), dtypes.fp8_to_bits(x, dt)
    np.testing.assert_array_equal(got[~np.isnan(x)], bits[~np.isnan(x)])


@pytest.mark.parametrize("device", on_devices())
@pytest.mark.parametrize("name", list(FP8))
def test_casts_in_kernels(name: str, device: str) -> None:
    """float32 -> fp8 -> float32 in one kernel, and float64 -> fp8 (rounded once, through round-to-odd)."""
    x = _inputs()
    got = Tensor(x, device=device).cast(name).cast("float32").numpy()
    np.testing.assert_array_equal(got, _torch_fp8(x, name))
    x64 = np.array([1 + 2.0**-4 + 2.0**-40, 1 + 2.0**-3 + 2.0**-4 - 2.0**-40, -300.00001], np.float64)
    got64 = Tensor(x64, device=device).cast(name).cast("float64").numpy()
    np.testing.assert_array_equal(got64, [dtypes.from_name(name).normalize(v) for v in x64])


@pytest.mark.parametrize("device", on_devices())
@pytest.mark.parametrize("name", list(FP8))
def test_arithmetic_through_float32(name: str, device: str) -> None:
    """Stored fp8 buffers, and + - * / max exp and comparisons on them: each op's result is the float32 op's,
    rounded to fp8 once (a·3 + 1 is two ops, rounded twice, as two torch ops on fp8 would be)."""
    rng = np.random.default_rng(9)
    a32, b32 = (rng.uniform(-30, 30, 257).astype(np.float32) for _ in range(2))
    a, b = (Tensor(v, device=device).cast(name).realize() for v in (a32, b32))
    ta, tb = (torch.tensor(v).to(FP8[name]).float() for v in (a32, b32))

    def r(t: torch.Tensor) -> torch.Tensor:
        return t.to(FP8[name]).float()

    for got, want in (
        (a + b, ta + tb),
        (a - b, ta - tb),
        (a * b, ta * tb),
        (a / b, ta / tb),
        (a.maximum(b), ta.maximum(tb)),
        (a * 3 + 1, r(ta * 3) + 1),
        ((a / 8).exp(), (ta / 8).exp()),
    ):
        assert got.dtype.name == name
        np.testing.assert_array_equal(got.cast("float32").numpy(), r(want).numpy())
    np.testing.assert_array_equal((a < b).numpy(), (ta < tb).numpy())
    np.testing.assert_array_equal((a + Tensor(b32, device=device)).numpy(), (ta + torch.tensor(b32)).numpy())


@pytest.mark.parametrize("device", on_devices())
def test_from_numpy_through_float32_and_back(device: str) -> None:
    """Tensor(ndarray, dtype=fp8) rounds the array's values (as a cast from float32), .numpy() gives float32."""
    x = _inputs()
    t = Tensor(x, device=device, dtype="float8_e4m3fn")
    assert t.dtype is dtypes.float8_e4m3fn
    got = t.numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, _torch_fp8(x, "float8_e4m3fn"))


@needs_nvrtc
@pytest.mark.parametrize("name", list(FP8))
def test_cuda_source_compiles(name: str) -> None:
    """The CUDA dialect's fp8 helpers: loads, stores and arithmetic of an fp8 buffer that NVRTC compiles."""
    x = Tensor.empty(64, 33, device="PYTHON")
    out = (x.cast(name) * 3 - x.cast(name).exp()).cast("float32").sum(-1)
    for ast, _ in kernels_of(schedule([out.uop])):
        k = lower(ast, SM80, [])
        assert f"{name}_bits(" in (k.source or "")
        for arch in ARCHS:
            assert nvrtc_compile(k.source, k.name, arch)[:4] == b"\x7fELF"  # type: ignore[arg-type]
