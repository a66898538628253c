"""The CPU runtime and the device registry: compiler discovery, the disk cache, and the named errors."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from uopviz.dtype import dtypes
from uopviz.runtime import device as devices
from uopviz.runtime.cpu import CPURuntime
from uopviz.runtime.device import CompileError, DeviceUnavailableError, UnknownDeviceError
from uopviz.target import Kernel
from uopviz.uop.ops import Ops, UOp

ADD = """void add3(float* restrict data0, const float* restrict data1) {
  for (int i = 0; i < 3; i++) data0[i] = data1[i] + 1.0f;
}
"""


def kernel(source: str, name: str = "add3") -> Kernel:
    return Kernel(name, UOp(Ops.LINEAR, ()), source, (dtypes.float32, dtypes.float32))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_compiles_runs_and_caches_on_disk(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = CPURuntime()
    out, inp = rt.alloc(3, dtypes.float32), rt.alloc(3, dtypes.float32)
    rt.copyin(inp, np.array([1, 2, 3], np.float32))
    rt.compile(kernel(ADD))([out, inp])
    np.testing.assert_array_equal(rt.copyout(out, 3, dtypes.float32), [2, 3, 4])
    assert len(list((cache / "cpu").glob("*.so"))) == 1

    def no_compiler(*a: object, **k: object) -> None:
        raise AssertionError("the cached library should have been used")

    fresh = CPURuntime()
    fresh.compiler_version  # noqa: B018  (read once before the compiler is taken away)
    monkeypatch.setattr(subprocess, "Popen", no_compiler)
    fresh.compile(kernel(ADD))([out, inp])


def test_compile_error_shows_source_and_message(cache: Path) -> None:
    with pytest.raises(CompileError) as e:
        CPURuntime().compile(kernel(ADD.replace("1.0f;", "1.0f +;")))
    msg = str(e.value)
    assert "add3" in msg and "error" in msg and "data1[i] + 1.0f +;" in msg
    assert e.value.source.startswith("void add3")


def test_missing_compiler_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(DeviceUnavailableError, match="apt-get install gcc"):
        CPURuntime()


def test_device_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert devices.canonical("cpu") == "CPU" and devices.canonical("cl:0") == "CL:0"
    with pytest.raises(UnknownDeviceError, match="known devices: CL, CPU, CUDA, PYTHON"):
        devices.canonical("TPU")
    monkeypatch.setenv("UOPVIZ_DEVICE", "python")
    assert devices.default_device() == "PYTHON"
    monkeypatch.setenv("UOPVIZ_DEVICE", "nope")
    with pytest.raises(UnknownDeviceError, match="nope"):
        devices.default_device()


@pytest.mark.parametrize("size", [1, 3, 1001, 1 << 18])
@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float16, dtypes.int64])
def test_buffers_start_on_a_cache_line(size: int, dtype: Any) -> None:
    """Vector loads of a 64-byte panel must not straddle two lines: NumPy alone starts large arrays 16 bytes in."""
    from uopviz.runtime import buffer as buffers
    from uopviz.runtime.cpu import ALIGNMENT
    h = buffers.handle(buffers.new_buffer(size, dtype, "CPU"))
    assert h.ctypes.data % ALIGNMENT == 0 and h.size == size and h.flags.writeable


def test_programs_take_the_address_alloc_noted(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """alloc's arrays carry their address, so a launch reads no buffer's address again; any other array (a view, a
    plain NumPy array) is passed at its own address; what copyout returns is a plain ndarray."""
    from uopviz.runtime import cpu
    rt = CPURuntime()
    out, inp = rt.alloc(3, dtypes.float32), rt.alloc(4, dtypes.float32)
    assert out.address == out.ctypes.data and inp.address == inp.ctypes.data
    rt.copyin(inp, np.array([1, 2, 3, 4], np.float32))
    run = rt.compile(kernel(ADD))
    real_address = cpu._address

    def no_address(h: Any) -> int:
        raise AssertionError("an alloc'd buffer's address was read again")
    monkeypatch.setattr(cpu, "_address", no_address)
    run([out, inp])
    np.testing.assert_array_equal(rt.copyout(out, 3, dtypes.float32), [2, 3, 4])
    monkeypatch.setattr(cpu, "_address", real_address)
    run([out, inp[1:]])  # a view: its own address, not its base's
    got = rt.copyout(out, 3, dtypes.float32)
    np.testing.assert_array_equal(got, [3, 4, 5])
    assert type(got) is np.ndarray
    plain = np.zeros(3, np.float32)
    run([plain, inp])
    np.testing.assert_array_equal(plain, [2, 3, 4])
