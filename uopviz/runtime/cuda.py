"""The CUDA runtime: NVIDIA GPUs through NVIDIA's Python bindings (`cuda-bindings`): NVRTC compiles the CUDA C the
CUDA dialect writes into a cubin for the device's architecture, the driver API loads and launches it, and events
time it on the GPU.

Lowering needs no GPU: `cuda_target("sm_80")` describes a GPU of that architecture, so kernels lower and render
for it anywhere, and `nvrtc_compile` compiles them wherever NVRTC is installed (it runs on the CPU, in a compile
worker process under the compilers' time limit). The device itself (`Tensor(..., device="CUDA")`) needs the
bindings, NVRTC and a driver with a GPU; without any of them it is unavailable, with a DeviceUnavailableError that
says what is missing. `UOPVIZ_CUDA_DEVICE` picks the GPU by index.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from uopviz.codegen.tc import MMA_SYNC
from uopviz.dtype import DType, dtypes
from uopviz.renderer.dialect import CUDA
from uopviz.runtime.compile_worker import worker
from uopviz.runtime.device import CompileError, DeviceError, DeviceUnavailableError, Runtime
from uopviz.runtime.source import check_source
from uopviz.target import Kernel, Target
from uopviz.uop.ops import Ops

INSTALL_HINT = ("the CUDA device needs NVIDIA's Python bindings and NVRTC: pip install 'uopviz[cuda]' (CUDA 13 "
                "drivers) or 'uopviz[cuda12]' (CUDA 12 drivers), and an NVIDIA GPU with its driver")
FLAGS = ("--fmad=false",)  # a*b+c stays two roundings: only the pipeline fuses (Target.fma)
MAX_BLOCK = (1024, 1024, 64)  # threads per block along x, y, z on every GPU since sm_20
MAX_GRID = (2**31 - 1, 65535, 65535)


class CUDAError(DeviceError):
    """A driver call that failed (the message names the call and the driver's error)."""


def cuda_target(arch: str, max_local: int = 1024, local_memory: int = 48 * 1024) -> Target:
    """The Target of an NVIDIA GPU of architecture `arch` ("sm_80", "sm_90", ...): no GPU or driver needed.

    max_local: threads per block; local_memory: bytes of static shared memory per block. Tensor cores (mma.sync
    for half and bfloat16) from sm_80 on. Every such GPU has a fused multiply-add (fma: the pipeline fuses where
    it may, NVRTC's own contraction stays off, FLAGS).
    """
    m = re.fullmatch(r"sm_(\d+)[a-z]?", arch)
    if m is None:
        raise ValueError(f"a CUDA architecture is sm_ and its compute capability (sm_80, sm_90), got {arch!r}")
    return Target("CUDA", dialect=CUDA, native=frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT}), global_dims=3,
                  local_dims=3, max_local=max_local, local_memory=local_memory,
                  emulated=frozenset({"bfloat16", "float16"}), fma=True, simt=True,
                  tensor_cores=MMA_SYNC if int(m[1]) >= 80 else ())


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise DeviceUnavailableError(f"cuda.bindings is not importable ({e}); {INSTALL_HINT}") from None
    return nvrtc


def nvrtc_version() -> str:
    """NVRTC's version ("13.0"); DeviceUnavailableError where it is not installed."""
    nvrtc = _nvrtc()
    try:
        _, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # the bindings found no libnvrtc
        raise DeviceUnavailableError(f"NVRTC is not loadable ({e}); {INSTALL_HINT}") from None
    return f"{major}.{minor}"


def nvrtc_compile(source: str, name: str, arch: str, ptx: bool = False) -> bytes:
    """`source` compiled by NVRTC for `arch` ("sm_90"): the cubin, or with `ptx` the PTX (for compute_90). Needs
    NVRTC only, no GPU; CompileError with NVRTC's log when the source does not compile. NVRTC runs in this
    process's compile worker (runtime/compile_worker.py), where a compile that hangs or runs away is killed at the
    time limit (CompileTimeoutError) or with its request. The source must be as the renderer writes it
    (UntrustedSourceError otherwise), so that NVRTC reads no file the text names."""
    check_source(source, "CUDA", name, asm=True)
    nvrtc_version()  # DeviceUnavailableError here, saying how to install it, before a worker is started
    head = {"op": "nvrtc", "name": name, "arch": arch, "ptx": ptx, "flags": list(FLAGS)}
    return worker().compile(head, source, "CUDA", name, "NVRTC", failures={"cuda": CUDAError})


class CUDABuffer:
    """Device memory (freed when the handle is collected)."""

    def __init__(self, runtime: CUDARuntime, nbytes: int) -> None:
        self.runtime, self.nbytes = runtime, nbytes
        self.ptr = int(runtime.call("cuMemAlloc", nbytes))

    def __del__(self) -> None:
        rt = getattr(self, "runtime", None)
        if rt is not None and getattr(self, "ptr", None) is not None:
            rt.free(self.ptr)


class CUDARuntime(Runtime):
    """One GPU: its primary context, a stream, device memory, and cubins NVRTC compiled for it."""

    name = "CUDA"

    def __init__(self) -> None:
        try:
            from cuda.bindings import driver
        except ImportError as e:
            raise DeviceUnavailableError(f"cuda.bindings is not importable ({e}); {INSTALL_HINT}") from None
        self._driver, self.context = driver, None
        try:
            self._check(driver.cuInit(0), "cuInit")
        except (RuntimeError, OSError) as e:  # CUDAError (a driver without a GPU), or no libcuda at all (no driver)
            raise DeviceUnavailableError(f"the NVIDIA driver did not start ({e}); {INSTALL_HINT}") from None
        count = int(self.call("cuDeviceGetCount"))
        index = int(os.environ.get("UOPVIZ_CUDA_DEVICE", "0") or 0)
        if not 0 <= index < count:
            raise DeviceUnavailableError(f"UOPVIZ_CUDA_DEVICE={index}, but the driver sees {count} GPU(s)")
        self.compiler_version = nvrtc_version()
        self.device = self.call("cuDeviceGet", index)
        self.context = self.call("cuDevicePrimaryCtxRetain", self.device)
        self._lock = threading.Lock()
        self._set_current()
        attr = driver.CUdevice_attribute
        major = int(self.call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device))
        minor = int(self.call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device))
        self.arch = f"sm_{major}{minor}"
        self.max_registers = int(self.call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK,
                                           self.device))
        self.target = cuda_target(
            self.arch,
            max_local=int(self.call("cuDeviceGetAttribute", attr.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                    self.device)),
            local_memory=int(self.call("cuDeviceGetAttribute",
                                       attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, self.device)))
        self.stream = self.call("cuStreamCreate", 0)
        self._events = (self.call("cuEventCreate", 0), self.call("cuEventCreate", 0))
        self._modules: dict[str, Any] = {}

    # ---- driver calls ----
    def _check(self, result: Any, call: str) -> Any:
        """The values a driver call returned after its error code; CUDAError naming the call otherwise."""
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != self._driver.CUresult.CUDA_SUCCESS:
            _, text = self._driver.cuGetErrorString(err)
            raise CUDAError(f"{call} failed: {text.decode() if isinstance(text, bytes) else err}")
        return rest[0] if len(rest) == 1 else tuple(rest) if rest else None

    def call(self, fn: str, *args: Any) -> Any:
        """Driver function `fn` with this runtime's context current (calls may come from any thread)."""
        if self.context is not None:
            self._set_current()
        return self._check(getattr(self._driver, fn)(*args), fn)

    def _set_current(self) -> None:
        self._check(self._driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    def free(self, ptr: int) -> None:
        with contextlib.suppress(CUDAError):  # at collection: an error here has no one to report to
            self.call("cuMemFree", ptr)

    # ---- memory ----
    def alloc(self, size: int, dtype: DType) -> CUDABuffer:
        return CUDABuffer(self, max(size, 1) * dtype.itemsize)

    def copyin(self, handle: CUDABuffer, data: Any) -> None:
        data = np.ascontiguousarray(data)
        if data.size:
            self.call("cuMemcpyHtoD", handle.ptr, data, data.nbytes)

    def copyout(self, handle: CUDABuffer, size: int, dtype: DType) -> np.ndarray:
        out = np.empty(size, dtypes.storage_numpy(dtype))
        if size:
            self.call("cuStreamSynchronize", self.stream)
            self.call("cuMemcpyDtoH", out, handle.ptr, out.nbytes)
        return out

    def synchronize(self) -> None:
        self.call("cuStreamSynchronize", self.stream)

    # ---- programs ----
    def compile(self, kernel: Kernel) -> CUDAProgram:
        if kernel.source is None:
            raise CompileError("CUDA", kernel.name, "", "the kernel has no rendered CUDA source")
        block, grid = launch_shape(kernel)
        module = self._modules.get(kernel.source)
        if module is None:
            cubin = nvrtc_compile(kernel.source, kernel.name, self.arch)
            module = self._modules[kernel.source] = self.call("cuModuleLoadData", cubin)
        fn = self.call("cuModuleGetFunction", module, kernel.name.encode())
        fa = self._driver.CUfunction_attribute
        threads = block[0] * block[1] * block[2]
        most = int(self.call("cuFuncGetAttribute", fa.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn))
        if threads > most:
            regs = int(self.call("cuFuncGetAttribute", fa.CU_FUNC_ATTRIBUTE_NUM_REGS, fn))
            raise CompileError("CUDA", kernel.name, kernel.source,
                               f"a block of {threads} threads needs {regs * threads} registers ({regs} per thread); "
                               f"the GPU runs at most {most} threads of this kernel per block "
                               f"({self.max_registers} registers per block)")
        return CUDAProgram(self, kernel, fn, grid, block)

    def describe(self) -> dict[str, str]:
        version = int(self.call("cuDriverGetVersion"))
        name = self.call("cuDeviceGetName", 256, self.device)
        return {"device": self.name, "name": name.split(b"\0")[0].decode(), "arch": self.arch,
                "driver": f"CUDA {version // 1000}.{version % 1000 // 10}", "compiler": "NVRTC",
                "compiler_version": self.compiler_version,
                "flags": " ".join((f"--gpu-architecture={self.arch}", *FLAGS))}


def launch_shape(kernel: Kernel) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(block, grid) in threads and blocks along x, y, z: the kernel's work-groups, or for a kernel without them
    blocks of up to CUDA.default_block threads that divide its grid; CompileError where the GPU's limits forbid
    the launch."""
    glob = [*(kernel.global_size or (1,)), 1, 1][:3]
    if kernel.local_size is not None:
        block = [*kernel.local_size, 1, 1][:3]
    else:
        block, budget = [], CUDA.default_block
        for g in glob:
            b = max(d for d in range(1, min(g, budget) + 1) if g % d == 0)
            block.append(b)
            budget //= b
    grid = [g // b for g, b in zip(glob, block)]
    too_big = [f"{what} {tuple(v)} exceeds {lim}" for what, v, lim in (("block", block, MAX_BLOCK),
                                                                          ("grid", grid, MAX_GRID))
               if any(x > m for x, m in zip(v, lim))]
    if too_big:
        raise CompileError("CUDA", kernel.name, kernel.source or "", "; ".join(too_big) + " (threads/blocks per "
                           "dimension x, y, z)")
    return (block[0], block[1], block[2]), (grid[0], grid[1], grid[2])


class CUDAProgram:
    """A loaded kernel: `prog(handles, vals=(), wait=False)`; buffers by Param slot, then the vars as int32. With
    wait, the GPU's own time between two events around the launch."""

    def __init__(self, runtime: CUDARuntime, kernel: Kernel, fn: Any, grid: tuple[int, int, int],
                 block: tuple[int, int, int]) -> None:
        self.runtime, self.kernel, self._fn, self.grid, self.block = runtime, kernel, fn, grid, block

    def __call__(self, handles: Sequence[CUDABuffer], vals: Sequence[int] = (), wait: bool = False) -> float | None:
        k, rt = self.kernel, self.runtime
        if len(handles) != len(k.params) or len(vals) != len(k.vars):
            raise ValueError(f"kernel {k.name} takes {len(k.params)} buffers and vars {k.vars}, got "
                             f"{len(handles)} buffers and {len(vals)} values")
        args: list[Any] = [ctypes.c_uint64(h.ptr) for h in handles] + [ctypes.c_int32(v) for v in vals]
        params = (ctypes.c_void_p * max(len(args), 1))(*(ctypes.addressof(a) for a in args))
        start, end = rt._events
        with rt._lock:
            if wait:
                rt.call("cuEventRecord", start, rt.stream)
            rt.call("cuLaunchKernel", self._fn, *self.grid, *self.block, 0, rt.stream, ctypes.addressof(params), 0)
            if not wait:
                return None
            rt.call("cuEventRecord", end, rt.stream)
            rt.call("cuEventSynchronize", end)
            return float(rt.call("cuEventElapsedTime", start, end)) * 1e-3
