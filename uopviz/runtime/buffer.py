"""Device memory behind Buffer UOps: a Buffer node names an allocation; this module holds its storage.

Storage is kept in the Buffer UOp (its __dict__), so memory lives exactly as long as some graph (a Tensor) still
refers to the buffer; then it goes back to the memory pool (uopviz.runtime.pool) for the next Buffer of the same
device, size and dtype. Allocation is lazy: a scheduled intermediate costs nothing until a kernel writes it.
"""

from __future__ import annotations

import itertools
from typing import Any

from uopviz.dtype import DType, dtypes
from uopviz.runtime import device as devices
from uopviz.runtime.pool import POOL, Memory
from uopviz.uop.ops import AddrSpace, Ops, UOp

_uids = itertools.count(1)
_MEMORY = "_memory"
"""Where a Buffer UOp keeps its device memory: in its __dict__, so the memory goes (back to the pool) when the node
does, as a weak mapping would give, for a dictionary read (a WeakKeyDictionary's get made a weak reference each
time: every buffer of every eager realize is looked up)."""


def new_buffer(size: int, dtype: DType, device: str | tuple[str, ...] | None = None) -> UOp:
    """A fresh Buffer UOp (distinct from every other) of `size` elements on `device`; no memory yet. On a tuple of
    devices it is SPEC's multi-device Buffer, `size` elements per device (uopviz.tensor.multi keeps its memory as
    one buffer per device)."""
    if not isinstance(size, int) or size < 0:
        raise ValueError(f"buffer size must be a non-negative int, got {size!r}")
    return UOp.buffer(max(size, 1), dtype, devices.canonical_devices(device), AddrSpace.GLOBAL, next(_uids))


def mark() -> int:
    """A number below the uid of every Buffer new_buffer makes from now on (made_since tells them)."""
    return next(_uids)


def made_since(buf: UOp, mark: int) -> bool:
    """Whether a Buffer was made by new_buffer after mark() returned `mark` (a @jit capture's own results)."""
    return buf.arg.uid > mark


def handle(buf: UOp) -> Any:
    """The device memory of a Buffer UOp, allocated on first use."""
    mem = buf.__dict__.get(_MEMORY)
    if mem is None:
        if buf.op is not Ops.BUFFER:
            raise TypeError(f"expected a Buffer UOp, got {buf.op.value}")
        a = buf.arg
        mem = buf.__dict__[_MEMORY] = scratch(a.size, a.dtype, a.device)
    return mem.handle


def scratch(size: int, dtype: DType, device: str) -> Memory:
    """Memory for `size` elements of dtype on a device (a canonical name), from the pool where it has some; back to
    the pool when the Memory dies. A Buffer's, or, without a Buffer node, a kept schedule's intermediate that
    lives only while its launches run (uopviz.realize.ScheduleCache.run)."""
    runtime = devices.get(device)
    key = (runtime, size, dtype)  # the runtime, not its name: a restarted one shares no memory with the old
    h = POOL.take(key)
    if h is None:
        try:
            h = runtime.alloc(size, dtype)
        except Exception:  # out of memory, maybe only because the pool holds it: give it all back, once
            if not POOL.bytes:
                raise
            POOL.clear()
            h = runtime.alloc(size, dtype)
    return Memory(key, h, size * dtype.itemsize)


def is_allocated(buf: UOp) -> bool:
    return _MEMORY in buf.__dict__


def from_numpy(arr: Any, device: str | None = None) -> UOp:
    """A new Buffer holding a copy of `arr` (flattened, row-major) on device; the dtype is the array's."""
    import numpy as np
    a = np.ascontiguousarray(arr).reshape(-1)
    dtype = dtypes.from_numpy(a.dtype)
    buf = new_buffer(a.size, dtype, device)
    if a.size:
        devices.get(buf.arg.device).copyin(handle(buf), a.astype(dtypes.to_numpy(dtype), copy=False))
    return buf


def to_numpy(buf: UOp) -> Any:
    """A 1-D NumPy copy of a Buffer's contents."""
    a = buf.arg
    return devices.get(a.device).copyout(handle(buf), a.size, a.dtype)


def copy(dst: UOp, src: UOp) -> None:
    """Copy src's contents into dst (same size and dtype; devices may differ) through the host."""
    if (dst.arg.size, dst.arg.dtype) != (src.arg.size, src.arg.dtype):
        raise ValueError(f"copy between buffers of {src.arg.size} {src.arg.dtype.name} and "
                         f"{dst.arg.size} {dst.arg.dtype.name}")
    transfer(dst.arg.device, handle(dst), src.arg.device, handle(src), src.arg.size, src.arg.dtype)


def transfer(dst_device: str, dst: Any, src_device: str, src: Any, size: int, dtype: DType) -> None:
    """Copy `size` elements between two devices' memory (handles) through the host."""
    devices.get(dst_device).copyin(dst, devices.get(src_device).copyout(src, size, dtype))
