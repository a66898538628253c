"""The device registry: names (CPU, CL, PYTHON, CUDA) to runtimes, the runtime interface, and the named errors.

A runtime owns memory (alloc, copyin, copyout) and turns a rendered `Kernel` into a callable program. What the
lowering pipeline needs to know about a device (its dialect, its native ops, whether it has GPU-style global
ids) is its `Target`, so codegen never imports a runtime's driver.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from uopviz.dtype import DType
from uopviz.uop.ops import Ops, UOp


class DeviceError(RuntimeError):
    """Base of the errors a device raises."""


class UnknownDeviceError(DeviceError, ValueError):
    """A device name that no runtime answers to."""


class DeviceMismatchError(DeviceError, ValueError):
    """One computation uses tensors on different devices."""


class DeviceUnavailableError(DeviceError):
    """A known device whose driver or compiler is missing here; the message says how to install it."""


class CompileError(DeviceError):
    """A kernel's source did not compile: keeps the source and the compiler's message."""

    def __init__(self, device: str, name: str, source: str, log: str) -> None:
        self.device, self.name, self.source, self.log = device, name, source, log
        numbered = "\n".join(f"{i + 1:4d}  {ln}" for i, ln in enumerate(source.splitlines()))
        super().__init__(f"{device} failed to compile kernel {name}:\n{log.strip()}\n--- source ---\n{numbered}")


@dataclass(frozen=True)
class Target:
    """What codegen may use on a device.

    dialect: the C-style dialect the renderer writes ("c", "opencl"), or None for the PYTHON interpreter.
    native: decomposed ops the device computes itself (the rest get SPEC's decompositions).
    global_dims: how many GLOBAL ranges become hardware ids (0 on the CPU: everything is a loop).
    local_dims, max_local, local_memory: work-group dimensions, work-items per group and bytes of local memory
    for LOCAL and GROUP_REDUCE axes (0: the device has no work-groups).
    emulated: float dtypes without arithmetic on the device (bfloat16 everywhere, half on OpenCL without
    cl_khr_fp16): the renderer computes them in float32, rounding after every op, and stores their bits.
    vectors: the lane counts Instruction Selection may keep as vector values (see codegen/devectorize.py).
    """

    device: str
    dialect: str | None
    native: frozenset[Ops] = frozenset()
    global_dims: int = 0
    local_dims: int = 0
    max_local: int = 0
    local_memory: int = 0
    threads: int = 0  # CPU threads a THREAD axis may use (0: none)
    emulated: frozenset[str] = frozenset({"bfloat16"})  # float dtypes computed in float32, stored as 16 bits
    vectors: frozenset[int] = frozenset()  # lane counts of the dialect's vector types (none: scalar code only)


@dataclass(frozen=True)
class Kernel:
    """A lowered kernel as runtimes receive it.

    params: the dtype of each buffer parameter, by slot (slot 0 is written).
    global_size/local_size: work-items in all and per work-group, per dimension (innermost first), for
    targets with global ids; None elsewhere (local_size None: the driver picks).
    vars: names of the symbolic integer arguments, in call order.
    threads: how many calls of the CPU function, one per index of its THREAD axis (its last argument), cover
    the work; they run concurrently.
    """

    name: str
    linear: UOp
    source: str | None
    params: tuple[DType, ...]
    global_size: tuple[int, ...] | None = None
    local_size: tuple[int, ...] | None = None
    vars: tuple[str, ...] = ()
    threads: int = 1
    meta: dict[str, Any] = field(default_factory=dict, compare=False)


Program = Callable[..., float | None]
"""A compiled kernel: `prog(handles, vals=(), wait=False)`; returns seconds taken when wait=True."""


class Runtime(ABC):
    """One device's memory and programs. Handles are runtime-specific (a NumPy array, a cl.Buffer, ...)."""

    name: str
    target: Target

    @abstractmethod
    def alloc(self, size: int, dtype: DType) -> Any:
        """Memory for `size` elements of dtype (contents undefined)."""

    @abstractmethod
    def copyin(self, handle: Any, data: Any) -> None:
        """Fill the buffer from a contiguous NumPy array of its dtype and size."""

    @abstractmethod
    def copyout(self, handle: Any, size: int, dtype: DType) -> Any:
        """A new NumPy array holding the buffer's contents."""

    @abstractmethod
    def compile(self, kernel: Kernel) -> Program:
        """A callable program for the kernel; raises CompileError with the source and the compiler's message."""

    def synchronize(self) -> None:  # noqa: B027  (a default: most runtimes are synchronous)
        """Wait for queued work (a no-op where calls are synchronous)."""

    def describe(self) -> dict[str, str]:
        """Device name, driver and compiler versions: what makes a timing comparable with another.

        Keys: device (always); name, driver, compiler, compiler_version and flags where the device has them
        (the tuning database's cache key is made of these); runtimes may add more for display.
        """
        return {"device": self.name}


_FACTORIES: dict[str, Callable[[], Runtime]] = {}
_LIVE: dict[str, Runtime] = {}
_LOCK = threading.Lock()


def register(name: str, factory: Callable[[], Runtime]) -> None:
    """Make `name` resolvable; the factory runs on first use (so a missing driver costs nothing until then)."""
    _FACTORIES[name.upper()] = factory


def canonical(device: str | None) -> str:
    """The registry spelling of a device name ("cpu" -> "CPU", "CL:0" -> "CL"); None means the default."""
    if device is None:
        return default_device()
    if not isinstance(device, str):
        raise UnknownDeviceError(f"device must be a string like 'CPU', got {device!r}")
    name = device.split(":")[0].upper()
    _load_builtin()
    if name not in _FACTORIES:
        raise UnknownDeviceError(f"unknown device {device!r}; known devices: {', '.join(sorted(_FACTORIES))}")
    return name


def get(device: str | None = None) -> Runtime:
    """The runtime for a device name, started once; UnknownDeviceError or DeviceUnavailableError otherwise."""
    name = canonical(device)
    with _LOCK:
        if name not in _LIVE:
            _LIVE[name] = _FACTORIES[name]()
        return _LIVE[name]


def default_device() -> str:
    """`UOPVIZ_DEVICE` if set (checked), else CPU."""
    env = os.environ.get("UOPVIZ_DEVICE")
    return canonical(env) if env else "CPU"


def available(names: Sequence[str] | None = None) -> list[str]:
    """The devices that start here (of `names`, default all registered)."""
    _load_builtin()
    out = []
    for n in names or sorted(_FACTORIES):
        try:
            get(n)
        except DeviceError:
            continue
        out.append(canonical(n))
    return out


def _load_builtin() -> None:
    if _FACTORIES:
        return
    from uopviz.runtime import builtin  # noqa: F401  (registers CPU, CL, PYTHON, CUDA)
