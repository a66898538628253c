"""Tensor construction, properties and conversion, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from tensor_testing import check, on_devices

from uopviz import Tensor, dtypes
from uopviz.dtype import DTypeError
from uopviz.runtime.device import UnknownDeviceError
from uopviz.tensor import DeviceMismatchError, ShapeError
from uopviz.uop.alu import threefry2x32
from uopviz.uop.ops import Ops


@pytest.mark.parametrize(("data", "dtype"), [
    (3, dtypes.int32), (2.5, dtypes.float32), (True, dtypes.bool),
    ([1, 2, 3], dtypes.int32), ([1, 2.5], dtypes.float32), ([[True, False]], dtypes.bool), ([], dtypes.float32),
    ([[1, 2], [3, 4]], dtypes.int32), (np.arange(6, dtype=np.int64).reshape(2, 3), dtypes.int64),
    (np.ones(4, np.float16), dtypes.float16), (np.zeros((2, 0)), dtypes.float64), (np.float32(1.5), dtypes.float32),
    (np.array([1, 200], np.uint8), dtypes.uint8),
])
def test_construct_infers_dtype_and_shape(data: object, dtype: object, device: str) -> None:
    t = Tensor(data, device=device)
    ref = np.asarray(data)
    assert t.shape == ref.shape and t.dtype == dtype and t.device == device and t.ndim == ref.ndim
    assert t.numel() == ref.size
    check(t, ref)


def test_construct_with_dtype(device: str) -> None:
    check(Tensor([1.7, -2.7], device=device, dtype=dtypes.int32), np.array([1, -2]))
    check(Tensor(np.arange(4), device=device, dtype="float32"), np.arange(4.0))
    t = Tensor([1, 2], device=device, dtype=np.float64)
    assert t.dtype == dtypes.float64
    check(t, [1.0, 2.0])


@pytest.mark.parametrize("device", on_devices())
def test_float16_tensors(device: str) -> None:
    check(Tensor(7, device=device, dtype=dtypes.float16), np.float16(7))
    check(Tensor.arange(4, dtype=dtypes.float16, device=device), np.arange(4, dtype=np.float16))
    check(Tensor([1.5, -2.25], device=device).half() * 2, np.array([3.0, -4.5], np.float16))
    a = np.random.default_rng(0).uniform(-3, 3, (3, 200)).astype(np.float16)
    h = Tensor(a, device=device)
    assert h.sum(1).dtype == h.mean().dtype == dtypes.float16  # accumulated in float32, rounded back
    check(h.sum(1), a.sum(1, dtype=np.float64), rtol=1e-3, atol=1e-2)
    check(h.mean(1), a.mean(1, dtype=np.float64), rtol=1e-3, atol=1e-3)
    check(h.exp(), np.exp(a.astype(np.float64)), rtol=2e-3)


@pytest.mark.parametrize("device", on_devices())
def test_bfloat16_tensors(device: str) -> None:
    b = Tensor([1.5, 2.25, 3.3, -1e-3], device=device, dtype=dtypes.bfloat16)
    assert b.dtype == dtypes.bfloat16 and b.numpy().dtype == np.float32
    bf = _bf16(np.array([1.5, 2.25, 3.3, -1e-3], np.float32))
    check(b, bf)
    check(b.realize() * 3 + 1, _bf16(_bf16(bf * 3) + 1))  # rounded after every op, through a stored buffer
    check(b.cast(dtypes.bfloat16).bitcast(dtypes.int16), (bf.view(np.uint32) >> 16).astype(np.uint16).view(np.int16))
    check(b.sum(), bf.sum(dtype=np.float64), rtol=1e-2)


@pytest.mark.parametrize("device", on_devices())
def test_float16_bits_and_rounding(device: str) -> None:
    x = np.array([1.5, -2.0, 1e-5, 7e4, 0.1], np.float32)  # 7e4 overflows to inf, 1e-5 is subnormal
    h = Tensor(x, device=device).half()
    with np.errstate(over="ignore"):
        x = x.astype(np.float16)
    check(h, x)
    check(h.bitcast(dtypes.int16), x.view(np.int16))
    check(h * 3 + 1, x * np.float16(3) + np.float16(1))


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even), as float32."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def test_data_leaves_are_reshaped_buffers() -> None:
    t = Tensor([1.0, 2.0])
    assert t.uop.op is Ops.RESHAPE and t.uop.src[0].op is Ops.BUFFER and t.is_realized
    s = Tensor(np.float32(3.0))
    assert s.uop.op is Ops.RESHAPE and s.shape == ()
    c = Tensor(3.0)
    assert c.uop.op is Ops.CONST and not c.is_realized


def test_construction_errors() -> None:
    with pytest.raises(ShapeError, match="rectangular"):
        Tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="numbers"):
        Tensor(["a", "b"])
    with pytest.raises(TypeError, match="cannot make a Tensor"):
        Tensor({1: 2})
    with pytest.raises(UnknownDeviceError, match="NOPE"):
        Tensor([1.0], device="NOPE")
    with pytest.raises(DTypeError):
        Tensor([1.0], dtype="float7")
    with pytest.raises(TypeError, match="NoneType"):
        Tensor([1, None])


# Python values, no dtype given: NumPy's rule (bool < int < float; int32 else int64 else uint64; float32 unless a
# finite value would overflow it, else float64), for scalars and lists alike
PY_VALUES = [
    (3_000_000_000, dtypes.int64), ([3_000_000_000, -5, 7], dtypes.int64), ([[2**40], [1], [-2**40]], dtypes.int64),
    ([2**31 - 1, -2**31, 0], dtypes.int32), ([2**63, 7, 2**64 - 1], dtypes.uint64), (2**64 - 1, dtypes.uint64),
    ([-2**63, 5, 9], dtypes.int64), ([True, 2**40, False], dtypes.int64), ([True, False, True], dtypes.bool),
    (1.5e40, dtypes.float64), ([1.5e40, -2.0, 1], dtypes.float64), ([[3.0e38, -1.5, 1e-50]], dtypes.float32),
    ([float("inf"), 1.0, float("nan")], dtypes.float32), ([-float("inf"), 1e300, 2], dtypes.float64),
    ([1, 2**70, 0.5], dtypes.float32), ([True, 1.5, 3], dtypes.float32), (-3.4e38, dtypes.float32),
    (1e39, dtypes.float64),
]


@pytest.mark.parametrize(("data", "dtype"), PY_VALUES, ids=lambda v: repr(v)[:24])
def test_python_values_get_numpys_dtype(data: object, dtype: object, device: str) -> None:
    t = Tensor(data, device=device)
    assert t.dtype == dtype and dtypes.from_py(data) == dtype
    ref = np.array(data, dtype=dtypes.to_numpy(dtype))  # type: ignore[arg-type]
    assert t.numpy().dtype == ref.dtype
    check(t, ref, rtol=0)
    check(t.reshape(-1).flip(0), ref.reshape(-1)[::-1], rtol=0)  # the values go through a kernel too


@pytest.mark.parametrize("data", [2**64, [2**64, 1], [-2**63 - 1], [-1, 2**63, 5], [[1], [-2**70]]], ids=str)
def test_python_ints_beyond_64_bits_raise(data: object) -> None:
    with pytest.raises(OverflowError, match=r"int64|uint64") as e:
        Tensor(data)
    assert any(str(v) in str(e.value) for v in (2**64, -2**63 - 1, 2**63, -2**70))
    with pytest.raises(OverflowError, match="digits"):
        Tensor([1.5, 10**400])


@pytest.mark.parametrize(("data", "dtype", "want"), [
    ([0.1, 1 / 3, 2.2], dtypes.float64, np.array([0.1, 1 / 3, 2.2])),  # no float32 round trip
    (0.1, dtypes.float64, np.float64(0.1)),
    ([2**53 + 1, -7, 3], dtypes.int64, np.array([2**53 + 1, -7, 3], np.int64)),
    ([2**64 - 1, 3, 0], dtypes.uint64, np.array([2**64 - 1, 3, 0], np.uint64)),
    ([1.7, -2.7, 127.9], dtypes.int8, np.array([1, -2, 127], np.int8)),  # floats truncate, as C casts and NumPy do
    ([65519.0, -1.0, 0.1], dtypes.float16, np.array([65504.0, -1.0, 0.1], np.float16)),  # rounds to the largest
    ([True, 5, 0], dtypes.bool, np.array([True, True, False])),
    ([3, -4, 1e30], dtypes.float32, np.array([3, -4, 1e30], np.float32)),
    (200, dtypes.uint8, np.uint8(200)),
])
def test_python_values_reach_the_dtype_given(data: object, dtype: object, want: np.ndarray, device: str) -> None:
    t = Tensor(data, dtype=dtype, device=device)
    assert t.dtype == dtype and t.numpy().dtype == want.dtype
    np.testing.assert_array_equal(t.numpy(), want)
    np.testing.assert_array_equal((t.cast(dtypes.float64) * 1).numpy(), want.astype(np.float64))


@pytest.mark.parametrize(("data", "dtype", "bad"), [
    ([3_000_000_000, 1, 2], dtypes.int32, "3000000000"), (3_000_000_000, dtypes.int32, "3000000000"),
    ([2**40], dtypes.int32, str(2**40)), ([-1, 4, 5], dtypes.uint32, "-1"), (300, dtypes.uint8, "300"),
    ([1, 2**64], dtypes.uint64, str(2**64)), ([3e9, 0.5], dtypes.int32, "3000000000"),
    ([float("inf")], dtypes.int64, "inf"), ([1.5e40, 1.0], dtypes.float32, "1.5e+40"),
    (1.5e40, dtypes.float32, "1.5e+40"), ([70000.0, 1.0, 2.0], dtypes.float16, "70000.0"),
    ([3.4e38], dtypes.bfloat16, "3.4e+38"), ([2**200, 1], dtypes.float32, str(2**200)),
])
def test_python_values_that_do_not_fit_the_dtype_given_raise(data: object, dtype: object, bad: str) -> None:
    with pytest.raises(OverflowError, match=dtype.name) as e:  # type: ignore[attr-defined]
        Tensor(data, dtype=dtype)
    assert bad in str(e.value)
    with pytest.raises(ValueError, match="nan"):
        Tensor([1.0, float("nan")], dtype=dtypes.int32)


def test_full_checks_its_value(device: str) -> None:
    big = Tensor.full((2, 3), 3_000_000_000, device=device)
    assert big.dtype == dtypes.int64
    check(big, np.full((2, 3), 3_000_000_000))
    check(Tensor.full((5,), 1.5e40, device=device), np.full(5, 1.5e40))
    with pytest.raises(OverflowError, match="int8"):
        Tensor.full((3,), 300, dtype=dtypes.int8)
    with pytest.raises(OverflowError, match="float16"):
        Tensor.ones(3, dtype=dtypes.float16).full_like(1e5)


def test_zeros_ones_full_empty(device: str) -> None:
    check(Tensor.zeros(2, 3, device=device), np.zeros((2, 3)))
    check(Tensor.ones((4,), device=device, dtype=dtypes.int8), np.ones(4, np.int8))
    f = Tensor.full((2, 2), 7, device=device)
    assert f.dtype == dtypes.int32
    check(f, np.full((2, 2), 7))
    check(Tensor.full((3,), True, device=device), np.ones(3, bool))
    check(Tensor.full((), 2.5, device=device), np.float32(2.5))
    e = Tensor.empty(3, 4, device=device)
    assert e.shape == (3, 4) and e.dtype == dtypes.float32 and e.is_realized
    assert Tensor.zeros(0, 3).numpy().shape == (0, 3)
    with pytest.raises(ShapeError):
        Tensor.zeros(-1)


def test_like_constructors(device: str) -> None:
    x = Tensor(np.arange(6, dtype=np.int16).reshape(2, 3), device=device)
    z, o, f = x.zeros_like(), x.ones_like(dtype=dtypes.float32), x.full_like(9)
    assert (z.dtype, o.dtype, f.dtype) == (dtypes.int16, dtypes.float32, dtypes.int16)
    assert z.device == device
    check(z, np.zeros((2, 3), np.int16))
    check(o, np.ones((2, 3)))
    check(f, np.full((2, 3), 9, np.int16))


@pytest.mark.parametrize(("n", "m"), [(1, None), (3, None), (2, 5), (7, 4)])
def test_eye(n: int, m: int | None, device: str) -> None:
    check(Tensor.eye(n, m, device=device), np.eye(n, m))


@pytest.mark.parametrize("args", [(5,), (1,), (0,), (2, 9), (9, 2, -2), (-3, 4, 3), (0, 1, 0.25), (1.5, -1, -0.5),
                                  (1000,), (33,)])
def test_arange(args: tuple, device: str) -> None:
    if device == "PYTHON" and args[0] == 1000:
        pytest.skip("PYTHON interprets every instruction: sizes of 100 or more run on CPU and CL")
    t = Tensor.arange(*args, device=device)
    ref = np.arange(*args)
    assert t.dtype == (dtypes.int32 if ref.dtype.kind == "i" else dtypes.float32)
    check(t, ref)


def test_arange_dtype_and_errors(device: str) -> None:
    check(Tensor.arange(3, dtype=dtypes.uint64, device=device), np.arange(3, dtype=np.uint64))
    with pytest.raises(ValueError, match="step"):
        Tensor.arange(0, 3, 0)


@pytest.mark.parametrize(("args", "dtype", "want"), [
    ((3_000_000_000, 3_000_000_005), None, dtypes.int64), ((0, 7 * 2**31, 2**31), None, dtypes.int64),
    ((2**31 + 5, 2**31 - 2, -2), None, dtypes.int64), ((2**63 + 5, 2**63, -2), None, dtypes.uint64),
    ((0, 1e40, 3e39), None, dtypes.float64), ((127, -128, -3), dtypes.int8, dtypes.int8),
    ((7, 0, -2), dtypes.uint8, dtypes.uint8), ((0, 1, 300), dtypes.int8, dtypes.int8),
    ((-7, 30, 4), dtypes.int16, dtypes.int16), ((0, 1, 0.1), dtypes.float64, dtypes.float64),
])
def test_arange_values_beyond_the_default_dtypes(args: tuple, dtype: object, want: object, device: str) -> None:
    t = Tensor.arange(*args, dtype=dtype, device=device)
    assert t.dtype == want
    check(t, np.arange(*args, dtype=dtypes.to_numpy(want)), rtol=0)  # type: ignore[arg-type]


def test_arange_values_that_do_not_fit_the_dtype_given_raise() -> None:
    with pytest.raises(OverflowError, match="299 does not fit in int8"):
        Tensor.arange(300, dtype=dtypes.int8)
    with pytest.raises(OverflowError, match="-3 does not fit in uint8"):
        Tensor.arange(-3, 3, dtype=dtypes.uint8)
    with pytest.raises(OverflowError, match="float16"):
        Tensor.arange(0, 1e5, 3e4, dtype=dtypes.float16)  # 9e4 is the last
    with pytest.raises(OverflowError, match="float32"):
        Tensor.linspace(0, 1e40, 3, dtype=dtypes.float32)


def test_linspace_beyond_float32(device: str) -> None:
    t = Tensor.linspace(-1e40, 1e40, 5, device=device)
    assert t.dtype == dtypes.float64
    check(t, np.linspace(-1e40, 1e40, 5), rtol=1e-12)


@pytest.mark.parametrize("args", [(0, 1, 5), (-2, 3, 7), (1, 1, 1), (3, -3, 4)])
def test_linspace(args: tuple, device: str) -> None:
    check(Tensor.linspace(*args, device=device), np.linspace(*args), rtol=1e-6, atol=1e-6)


def _rand_reference(n: int, key: int, offset: int = 0) -> np.ndarray:
    """The documented recipe: top 23 bits of threefry2x32(offset + i, key) under the exponent of 1.0, minus 1."""
    bits = np.array([threefry2x32(offset + i, key) >> 41 for i in range(n)], np.uint32)
    return (bits | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)


def test_rand_follows_threefry_and_is_the_same_everywhere(device: str) -> None:
    r = Tensor.rand(3, 5, seed=42, device=device)
    assert r.shape == (3, 5) and r.dtype == dtypes.float32
    np.testing.assert_array_equal(r.numpy().reshape(-1), _rand_reference(15, 42))
    np.testing.assert_array_equal(r.numpy(), Tensor.rand(3, 5, seed=42, device="CPU").numpy())


def test_rand_global_seed_advances_and_restarts() -> None:
    Tensor.manual_seed(7)
    a, b = Tensor.rand(10).numpy(), Tensor.rand(10).numpy()
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(b, _rand_reference(10, 7, offset=10))
    Tensor.manual_seed(7)
    np.testing.assert_array_equal(Tensor.rand(10).numpy(), a)
    with pytest.raises(TypeError, match="seed"):
        Tensor.manual_seed(1.5)  # type: ignore[arg-type]


def test_draws_of_one_size_are_one_kernel(device: str) -> None:
    """The key and the counter's offset are read from memory: every draw of a size runs the kernel the first one
    compiled (a model's layers of one shape, a dropout in every step), with its own numbers."""
    from uopviz.realize import capture

    Tensor.manual_seed(11)
    runs, programs = [], []
    for _ in range(3):
        with capture() as launches:
            runs.append(Tensor.rand(37, device=device).numpy())
        programs.append({id(launch.prog) for launch in launches})
    assert programs[0] and programs[1] == programs[0] and programs[2] == programs[0]
    np.testing.assert_array_equal(runs[2], _rand_reference(37, 11, offset=74))


@pytest.mark.parametrize("dtype", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64])
def test_rand_range_and_moments(dtype: object) -> None:
    r = Tensor.rand(4000, seed=1, dtype=dtype)
    assert r.dtype == dtype
    v = r.numpy().astype(np.float64)
    assert v.min() >= 0 and v.max() < 1
    assert abs(v.mean() - 0.5) < 0.03 and abs(v.var() - 1 / 12) < 0.01


def test_randn_moments(device: str) -> None:
    n = 4000 if device != "PYTHON" else 64
    v = Tensor.randn(n, seed=3, device=device).numpy().astype(np.float64)
    assert np.isfinite(v).all()
    if n > 1000:
        assert abs(v.mean()) < 0.06 and abs(v.std() - 1) < 0.06
    np.testing.assert_allclose(Tensor.randn(2, 3, seed=3, device=device).numpy().reshape(-1),
                               Tensor.randn(2, 3, seed=3).numpy().reshape(-1), rtol=1e-5, atol=1e-6)
    with pytest.raises(DTypeError, match="float"):
        Tensor.randn(3, dtype=dtypes.int32)


def test_properties_and_conversions(device: str) -> None:
    t = Tensor([[1, 2, 3], [4, 5, 6]], device=device)
    assert len(t) == 2 and t.numel() == 6 and t.ndim == 2
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert t[1, 2].item() == 6 and isinstance(t[1, 2].item(), int)
    assert isinstance(Tensor(2.5, device=device).item(), float)
    assert [r.tolist() for r in t] == [[1, 2, 3], [4, 5, 6]]
    np.testing.assert_array_equal(np.asarray(t), [[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError, match="one element"):
        t.item()
    with pytest.raises(TypeError, match="0-d"):
        len(Tensor(1.0))
    with pytest.raises(TypeError, match="ambiguous"):
        bool(t)


def test_repr_shows_data_only_when_realized() -> None:
    t = Tensor([1.0, 2.0]) + 1
    r = repr(t)
    assert "shape=(2,)" in r and "float32" in r and "CPU" in r and "not realized" in r
    t.realize()
    assert "array([2., 3.]" in repr(t)
    assert "not realized" in repr(Tensor.empty(2))


def test_realize_several_at_once(device: str) -> None:
    a = Tensor([1.0, 2.0], device=device)
    b, c, d = a * 2, a + 1, Tensor.arange(3, device="CPU") * 2
    assert b.realize(c, d) is b
    assert b.is_realized and c.is_realized and d.is_realized
    assert b.uop.device == c.uop.device == device and d.uop.device == "CPU"
    check(b, [2.0, 4.0])
    check(c, [2.0, 3.0])
    check(d, [0, 2, 4])


def test_constant_only_tensor_realizes_on_its_device(device: str) -> None:
    t = (Tensor.ones(3, device=device) * 4).realize()
    assert t.uop.device == device
    check(t, np.full(3, 4.0))


def test_to_device(device: str) -> None:
    a = Tensor(np.arange(5, dtype=np.float32))
    b = a.to(device) * 2
    assert b.device == device
    check(b, np.arange(5) * 2.0)
    assert a.to("CPU") is a
    check(b.to("CPU"), np.arange(5) * 2.0)
    assert Tensor.zeros(0).to(device).device == device
    lazy = Tensor.arange(4, device="CPU") * 3
    check(lazy.to(device), np.arange(4) * 3)
    copy = Tensor(lazy, device=device)
    assert copy.device == device and copy.dtype == dtypes.int32
    check(Tensor(copy, dtype=dtypes.float32), np.arange(4) * 3.0)


def test_mixing_devices_names_both() -> None:
    with pytest.raises(DeviceMismatchError, match="CPU and PYTHON"):
        Tensor([1.0], device="CPU") + Tensor([1.0], device="PYTHON")


def test_assign(device: str) -> None:
    a = Tensor.zeros(2, 3, device=device).contiguous().realize()
    buf = a.uop.src[0]
    a.assign(Tensor([1.0, 2.0, 3.0], device=device))          # broadcast
    assert a.uop.src[0] is buf
    check(a, np.tile([1.0, 2.0, 3.0], (2, 1)))
    a.assign(a.flip(1) + 1)                                      # reads what it writes
    check(a, np.tile([4.0, 3.0, 2.0], (2, 1)))
    a.assign(5)
    check(a, np.full((2, 3), 5.0))
    i = Tensor.empty(3, dtype=dtypes.int32, device=device)
    i.assign([1.9, 2.2, -3.5])                                   # cast like a store
    check(i, np.array([1, 2, -3]))
    with pytest.raises(ShapeError):
        a.assign(Tensor.ones(4, device=device))


def test_contiguous_and_detach(device: str) -> None:
    x = Tensor([[1, 2], [3, 4]], device=device)
    assert x.T.contiguous().uop.op is Ops.CONTIGUOUS and x.detach().uop.op is Ops.DETACH
    check(x.T.contiguous(), [[1, 3], [2, 4]])
    check(x.detach() + 1, [[2, 3], [4, 5]])


def test_cast_and_bitcast(device: str) -> None:
    f = Tensor([1.5, -2.5, 3.0], device=device)
    assert f.cast(dtypes.float32) is f
    check(f.int(), np.array([1, -2, 3]))
    check(f.double(), np.array([1.5, -2.5, 3.0]))
    check(f.bool(), np.array([True, True, True]))
    check(Tensor([0, 1, 2], device=device).bool().long(), np.array([0, 1, 1]))
    check(f.bitcast(dtypes.uint32), np.array([1.5, -2.5, 3.0], np.float32).view(np.uint32))
    check(Tensor([-1, 2], device=device, dtype=dtypes.int16).bitcast("uint16"), np.array([65535, 2], np.uint16))
    check(f.bitcast(dtypes.float16), np.array([1.5, -2.5, 3.0], np.float32).view(np.float16))  # last axis x2
    with pytest.raises(DTypeError, match="divide"):
        f.bitcast(dtypes.float64)
