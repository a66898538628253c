"""The device registry: names (CPU, CL, PYTHON) to runtimes, the runtime interface, and the named errors.

A runtime owns memory (alloc, copyin, copyout) and turns a rendered `Kernel` into a callable program; it
describes its device to the lowering with a `Target` (both in uopviz/target.py), so codegen never imports a
runtime's driver.
"""

from __future__ import annotations

import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from uopviz.dtype import DType
from uopviz.target import Kernel, Target


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
