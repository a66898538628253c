"""The CUDA runtime's own logic without a GPU: a stand-in for NVIDIA's driver module (the same calls, returning
(error, value) tuples) whose memory is host bytes and whose launches run the kernel's Linear program on the PYTHON
interpreter over that memory. So allocation, copies, the kernel parameter array, launch shapes, event timing and
the named errors are exercised here; the real driver only on a GPU (test_cuda_runtime.py)."""

from __future__ import annotations

import ctypes
import enum
import sys
import types
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from uopviz.kernels import ZOO

from tests.cuda.support import needs_nvrtc
from uopviz import compiler
from uopviz.compiler import compile_kernel
from uopviz.dtype import dtypes
from uopviz.pipeline import kernels_of, schedule
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.cuda import CUDAError, CUDARuntime
from uopviz.runtime.device import CompileError, DeviceUnavailableError
from uopviz.runtime.python import PythonRuntime
from uopviz.target import Kernel
from uopviz.tensor import Tensor


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_NO_DEVICE = 100
    CUDA_ERROR_INVALID_VALUE = 1


class Attr(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8


class FuncAttr(enum.IntEnum):
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4


OK = CUresult.CUDA_SUCCESS


class FakeDriver(types.ModuleType):
    """cuda.bindings.driver's calls as the runtime uses them, over host memory."""

    CUresult, CUdevice_attribute, CUfunction_attribute = CUresult, Attr, FuncAttr

    def __init__(self, devices: int = 1, threads_per_function: int = 1024) -> None:
        super().__init__("cuda.bindings.driver")
        self.devices, self.threads_per_function = devices, threads_per_function
        self.memory: dict[int, bytearray] = {}
        self.kernels: dict[str, Kernel] = {}  # by name: what a launch runs (the test registers each as it compiles)
        self.launches: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []
        self.next_ptr = 1 << 20

    def cuInit(self, flags: int) -> tuple[Any]:
        return (CUresult.CUDA_ERROR_NO_DEVICE if not self.devices else OK,)

    def cuGetErrorString(self, err: CUresult) -> tuple[Any, bytes]:
        return OK, f"fake {err.name}".encode()

    def cuDeviceGetCount(self) -> tuple[Any, int]:
        return OK, self.devices

    def cuDeviceGet(self, i: int) -> tuple[Any, int]:
        return OK, i

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[Any, str]:
        return OK, "ctx"

    def cuCtxSetCurrent(self, ctx: str) -> tuple[Any]:
        return (OK,)

    def cuDeviceGetAttribute(self, attr: Attr, dev: int) -> tuple[Any, int]:
        return OK, {Attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 9,
                    Attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: 0,
                    Attr.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: 65536,
                    Attr.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: 1024,
                    Attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: 49152}[attr]

    def cuStreamCreate(self, flags: int) -> tuple[Any, str]:
        return OK, "stream"

    def cuEventCreate(self, flags: int) -> tuple[Any, str]:
        return OK, "event"

    def cuMemAlloc(self, n: int) -> tuple[Any, int]:
        ptr, self.next_ptr = self.next_ptr, self.next_ptr + n + 256
        self.memory[ptr] = bytearray(n)
        return OK, ptr

    def cuMemFree(self, ptr: int) -> tuple[Any]:
        return (OK if self.memory.pop(ptr, None) is not None else CUresult.CUDA_ERROR_INVALID_VALUE,)

    def cuMemcpyHtoD(self, dst: int, src: np.ndarray, n: int) -> tuple[Any]:
        self.memory[dst][:n] = src.tobytes()[:n]
        return (OK,)

    def cuMemcpyDtoH(self, dst: np.ndarray, src: int, n: int) -> tuple[Any]:
        dst.view(np.uint8).reshape(-1)[:n] = np.frombuffer(bytes(self.memory[src][:n]), np.uint8)
        return (OK,)

    def cuStreamSynchronize(self, stream: str) -> tuple[Any]:
        return (OK,)

    def cuModuleLoadData(self, image: bytes) -> tuple[Any, bytes]:
        assert image[:4] == b"\x7fELF"  # NVRTC's cubin
        return OK, image

    def cuModuleGetFunction(self, module: bytes, name: bytes) -> tuple[Any, Kernel]:
        """The kernel the test registered under this name last (compiled just now): two kernels of one program
        may share a name, whose modules (their sources) differ."""
        return OK, self.kernels[name.decode()]

    def cuFuncGetAttribute(self, attr: FuncAttr, fn: Kernel) -> tuple[Any, int]:
        return OK, self.threads_per_function if attr is FuncAttr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK else 128

    def cuEventRecord(self, event: str, stream: str) -> tuple[Any]:
        return (OK,)

    def cuEventSynchronize(self, event: str) -> tuple[Any]:
        return (OK,)

    def cuEventElapsedTime(self, start: str, end: str) -> tuple[Any, float]:
        return OK, 0.25

    def cuDriverGetVersion(self) -> tuple[Any, int]:
        return OK, 13000

    def cuDeviceGetName(self, n: int, dev: int) -> tuple[Any, bytes]:
        return OK, b"Fake GPU\x00" + b" " * (n - 9)

    def cuLaunchKernel(self, k: Kernel, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,
                       stream: str, params: int, extra: int) -> tuple[Any]:
        """Runs the kernel on the PYTHON interpreter over this memory, its arguments read from the parameter
        array as the driver reads them (a pointer per argument)."""
        slots = (ctypes.c_void_p * (len(k.params) + len(k.vars))).from_address(params)
        ptrs = [ctypes.c_uint64.from_address(slots[i]).value for i in range(len(k.params))]
        vals = [ctypes.c_int32.from_address(slots[len(k.params) + i]).value for i in range(len(k.vars))]
        arrays = [np.frombuffer(self.memory[p], dtypes.storage_numpy(dt)) for p, dt in zip(ptrs, k.params)]
        self.launches.append((k.name, (gx, gy, gz), (bx, by, bz)))
        PythonRuntime().compile(k)(arrays, vals)
        return (OK,)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDriver]:
    """The fake driver in place of cuda.bindings.driver, and a CUDA device started on it (dropped after)."""
    import cuda.bindings
    drv = FakeDriver()
    monkeypatch.setattr(cuda.bindings, "driver", drv, raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", drv)
    monkeypatch.delitem(devices._LIVE, "CUDA", raising=False)
    monkeypatch.setattr(compiler, "_programs", OrderedDict())  # no program of another test's runtime
    monkeypatch.setattr(CUDARuntime, "compile", _registering(CUDARuntime.compile, drv))
    yield drv
    devices._LIVE.pop("CUDA", None)


def _registering(compile: Any, drv: FakeDriver) -> Any:
    """CUDARuntime.compile that first tells the fake driver which kernel its next module holds."""
    def compile_and_register(rt: CUDARuntime, kernel: Kernel) -> Any:
        drv.kernels[kernel.name] = kernel
        return compile(rt, kernel)
    return compile_and_register


@needs_nvrtc
def test_without_a_gpu_the_driver_says_so(fake: FakeDriver) -> None:
    fake.devices = 0
    with pytest.raises(DeviceUnavailableError, match=r"CUDA_ERROR_NO_DEVICE.*pip install 'uopviz\[cuda\]'"):
        CUDARuntime()


@needs_nvrtc
@pytest.mark.parametrize("name", ["gemm", "softmax", "sum", "gather", "elementwise"])
def test_zoo_through_the_runtime(fake: FakeDriver, name: str) -> None:
    z = ZOO[name]
    rt = devices.get("CUDA")
    assert rt.target.tensor_cores and rt.describe() == {
        "device": "CUDA", "name": "Fake GPU", "arch": "sm_90", "driver": "CUDA 13.0", "compiler": "NVRTC",
        "compiler_version": rt.compiler_version, "flags": "--gpu-architecture=sm_90 --fmad=false"}
    out, arrays = z.build(z.sizes(small=True), "CUDA")
    np.testing.assert_allclose(out.numpy(), z.reference(*arrays), rtol=z.rtol, atol=1e-5)
    assert fake.launches and all(b[0] * b[1] * b[2] <= 1024 for _, _, b in fake.launches)


@needs_nvrtc
def test_timing_limits_and_errors(fake: FakeDriver) -> None:
    rt = devices.get("CUDA")
    x = Tensor(np.arange(8, dtype=np.float32), device="CUDA").realize()
    (ast, bufs), = kernels_of(schedule([(x * 2).uop]))
    kernel, prog = compile_kernel(ast, "CUDA", [])
    assert prog([buffers.handle(b) for b in bufs], wait=True) == pytest.approx(0.25e-3)
    np.testing.assert_array_equal(buffers.to_numpy(bufs[0]), np.arange(8) * 2)
    fake.threads_per_function = 4  # registers allow fewer threads per block than the launch has
    with pytest.raises(CompileError, match="a block of 8 threads needs 1024 registers"):
        rt.compile(kernel)
    with pytest.raises(CUDAError, match="cuMemFree failed: fake CUDA_ERROR_INVALID_VALUE"):
        rt.call("cuMemFree", 12345)



@needs_nvrtc
@pytest.mark.parametrize("name", ["softmax", "layernorm"])
def test_a_gpu_computes_each_row_reduction_once(fake: FakeDriver, name: str) -> None:
    """On a GPU a row's outputs are spread over threads, so the row's reductions are kernels of their own (each
    row shared by a work-group), not fused into the output kernel, where every thread would compute them again."""
    z = ZOO[name]
    out, arrays = z.build(z.sizes(R=5, C=256), "CUDA")
    np.testing.assert_allclose(out.numpy(), z.reference(*arrays), rtol=1e-5, atol=1e-6)
    names = [n for n, _, _ in fake.launches]
    assert len(names) >= 3 and sum("_G64_" in n for n in names) >= 2, names
    assert all(b[0] == 64 for n, _, b in fake.launches if "_G64_" in n)
