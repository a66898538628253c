"""Freed device memory kept for the next allocation of the same device, size and dtype.

A program that runs again allocates its outputs again. A fresh large allocation is not free on the CPU: the
system hands out new pages, and the first write to each 4 KiB page faults (a 64 MiB output costs about as
long as the streaming kernel that fills it). Keeping what a dead Buffer held, and handing it to the next
Buffer of the same shape, makes the second call as fast as the kernels. Memory is pooled only when nothing
else still refers to it (a NumPy view of it, a JIT's captured handle), so reuse can never alias live data.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import Any

Key = tuple[Any, int, Any]
"""(runtime, elements, dtype): what makes two allocations interchangeable."""

LIMIT_BYTES = 1 << 30
"""The most memory kept for reuse, all devices together; the longest unused goes first."""


class MemoryPool:
    """Handles by key, the most recently freed last; thread-safe (a Buffer may die in any thread)."""

    def __init__(self, limit_bytes: int = LIMIT_BYTES) -> None:
        self.limit_bytes = limit_bytes
        self.bytes = 0
        self._free: OrderedDict[Key, list[tuple[Any, int]]] = OrderedDict()
        self._lock = threading.RLock()  # a collection inside take/give may free a Buffer, which gives back here

    def take(self, key: Key) -> Any | None:
        """A kept handle for key (contents undefined, as a fresh allocation's are), or None."""
        with self._lock:
            kept = self._free.get(key)
            if not kept:
                return None
            handle, nbytes = kept.pop()
            if not kept:
                del self._free[key]
            self.bytes -= nbytes
            return handle

    def give(self, key: Key, handle: Any, nbytes: int) -> None:
        """Keep handle for the next take(key), dropping the longest unused handles past the limit."""
        if nbytes > self.limit_bytes:
            return
        with self._lock:
            self._free.setdefault(key, []).append((handle, nbytes))
            self._free.move_to_end(key)
            self.bytes += nbytes
            while self.bytes > self.limit_bytes:
                oldest = next(iter(self._free))
                _, dropped = self._free[oldest].pop(0)
                if not self._free[oldest]:
                    del self._free[oldest]
                self.bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self.bytes = 0


POOL = MemoryPool()


class Memory:
    """A Buffer's device memory; when the Buffer dies its handle goes back to the pool, unless something else
    (a view, a captured handle) still holds it."""

    __slots__ = ("handle", "key", "nbytes")
    _pool = POOL  # held here: module globals may already be gone when the last Buffer dies at exit
    _refcount = staticmethod(sys.getrefcount)

    def __init__(self, key: Key, handle: Any, nbytes: int) -> None:
        self.key, self.handle, self.nbytes = key, handle, nbytes

    def __del__(self) -> None:
        # No one else holds it: only this slot (the handle's) and the call's argument refer to the handle, and, for
        # a handle that is a NumPy view (the CPU's aligned arrays), only the handle, this name and the argument to
        # the memory it views: views of the handle refer to that memory, not to the handle.
        owner = getattr(self.handle, "base", None)
        if self._refcount(self.handle) <= 2 and (owner is None or self._refcount(owner) <= 3):
            self._pool.give(self.key, self.handle, self.nbytes)
