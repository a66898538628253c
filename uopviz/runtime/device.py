"""The device registry: names (CPU, CL, PYTHON) to runtimes, the runtime interface, and the named errors.

A name is a family, optionally with an index: `CPU` is the CPU runtime, `CPU:0`, `CPU:1`, ... are further CPU
runtimes of their own (separate memory and programs, one thread each: the devices of a sharded tensor), `CL:i` is
the i-th OpenCL device. A tuple of names is a multi-device (uopviz/tensor/multi.py); each member is one runtime.

A runtime owns memory (alloc, copyin, copyout) and turns a rendered `Kernel` into a callable program; it
describes its device to the lowering with a `Target` (both in uopviz/target.py), so codegen never imports a
runtime's driver.
"""

from __future__ import annotations

import os
import re
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


Factory = Callable[[str | None], Runtime]
"""Starts a family's runtime for an index (None: the unindexed device); UnknownDeviceError for an index that
does not exist, with a sentence saying which do."""

_FACTORIES: dict[str, Factory] = {}
_INDEXED: set[str] = set()
_LIVE: dict[str, Runtime] = {}
_LOCK = threading.Lock()
_INDEX = re.compile(r"\d+(\.\d+)?")


def register(name: str, factory: Factory, indexed: bool = False) -> None:
    """Make `name` resolvable (and `name:i` where the family is indexed); the factory runs on first use (so a
    missing driver costs nothing until then)."""
    _FACTORIES[name.upper()] = factory
    if indexed:
        _INDEXED.add(name.upper())


def split_name(device: str) -> tuple[str, str | None]:
    """(family, index) of a canonical name: "CPU:1" -> ("CPU", "1"), "CL" -> ("CL", None)."""
    family, _, index = device.partition(":")
    return family, index or None


def shard_free(device: str) -> str:
    """The name with its index replaced by '*' ("CPU:1" -> "CPU:*", "CL:0.1" -> "CL:*.*", "CPU" stays): what the
    devices of one family and index kind share, so a kernel tuned on one shard's device serves every shard of the
    same shape, and a sub-device's results never answer for a whole device."""
    family, index = split_name(device)
    return family if index is None else f"{family}:{'*.*' if '.' in index else '*'}"


def canonical(device: str | None) -> str:
    """The registry spelling of a device name ("cpu" -> "CPU", "cl:1" -> "CL:1"); None means the default."""
    if device is None:
        return default_device()
    if not isinstance(device, str):
        raise UnknownDeviceError(f"device must be a string like 'CPU' or 'CPU:1', got {device!r}")
    family, index = split_name(device.strip())
    family = family.upper()
    _load_builtin()
    if family not in _FACTORIES:
        raise UnknownDeviceError(f"unknown device {device!r}; known devices: {', '.join(sorted(_FACTORIES))} "
                                 f"(and {', '.join(f'{f}:i' for f in sorted(_INDEXED))} for separate devices)")
    if index is None:
        return family
    if family not in _INDEXED:
        raise UnknownDeviceError(f"{family} takes no index (got {device!r}); the devices that do: "
                                 f"{', '.join(f'{f}:i' for f in sorted(_INDEXED))}")
    if not _INDEX.fullmatch(index):
        raise UnknownDeviceError(f"device {device!r}: the index after ':' must be a number (CPU:1) or, for an "
                                 "OpenCL sub-device, device.sub-device (CL:0.1)")
    return f"{family}:{index}"


def canonical_devices(device: str | Sequence[str] | None) -> str | tuple[str, ...]:
    """canonical() of a name, or of each name of a multi-device (a tuple of at least two distinct devices)."""
    if device is not None and not isinstance(device, str):
        names = tuple(canonical(d) for d in device)
        if len(names) < 2 or len(set(names)) != len(names):
            raise UnknownDeviceError(f"a multi-device is a tuple of two or more distinct devices, got {device!r}")
        return names
    return canonical(device)


def get(device: str | None = None) -> Runtime:
    """The runtime for a device name, started once; UnknownDeviceError or DeviceUnavailableError otherwise."""
    if type(device) is str and (live := _LIVE.get(device)) is not None:  # canonical and started: each buffer asks
        return live
    name = canonical(device)
    with _LOCK:
        if name not in _LIVE:
            family, index = split_name(name)
            _LIVE[name] = _FACTORIES[family](index)
        return _LIVE[name]


def target_of(device: Any) -> Target | None:
    """The Target of a device by name, for a schedule pass that plans for it (None where the name is not one
    device's, or the device does not start: the pass then keeps its default)."""
    if not isinstance(device, str):
        return None
    try:
        return get(device).target
    except DeviceError:
        return None


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


def device_help() -> str:
    """The sentence a command line's --device option shows: the registered devices and the default."""
    _load_builtin()
    *first, last = sorted(_FACTORIES)
    return f"{', '.join(first)} or {last} (default: $UOPVIZ_DEVICE or CPU)"


def _load_builtin() -> None:
    if _FACTORIES:
        return
    from uopviz.runtime import builtin  # noqa: F401  (registers CPU, CL, PYTHON, CUDA)
