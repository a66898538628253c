"""The CPU runtime's worker pool: native threads (workers.c, compiled once per machine like a kernel) that run a
kernel's THREAD indices alongside the calling thread.

A kernel split over THREAD is called once per index. The pool hands indices out one at a time from a shared
counter, so a core that other work slows down takes fewer and the call ends when the last index does. The call
is one ctypes call that returns only when every index has finished, so the GIL is free meanwhile and Ctrl-C
cannot unwind Python (and free the buffers the kernel writes) halfway through it.
"""

from __future__ import annotations

import ctypes
import os
from importlib import resources
from pathlib import Path

from uopviz.runtime.trust import load_library
from uopviz.target import Kernel

SOURCE = resources.files("uopviz.runtime").joinpath("workers.c").read_text()

SPIN_NS = 50_000
"""How long a worker spins after a call before it sleeps, and the caller waits spinning for the last worker: a
program's next kernel usually follows within tens of microseconds, and waking a sleeping thread costs more than
that on a virtual machine. Not longer: on a machine that other processes keep busy, a spinning thread spends the
share of the CPU its process gets (gemm 512 beside two busy processes: 0.2 ms of spin made the call 10% slower than
sleeping at once, 50 µs as fast)."""


class Workers:
    """One process's pool: `cores - 1` threads besides the caller's."""

    def __init__(self, library: Path, cores: int) -> None:
        """The pool of the library CPURuntime built from workers.c (loaded only from a trusted folder, as a
        kernel's is)."""
        lib = self._lib = load_library(library)  # held: a dropped library is unloaded
        lib.uopviz_pool_new.restype = ctypes.c_void_p
        lib.uopviz_pool_new.argtypes = [ctypes.c_int, ctypes.c_long]
        lib.uopviz_pool_run.restype = None  # no argtypes: run's arguments are ctypes objects already
        self._pool = ctypes.c_void_p(lib.uopviz_pool_new(cores - 1, SPIN_NS))
        if not self._pool.value:
            raise MemoryError("uopviz: the CPU worker pool could not be allocated")
        self._run = lib.uopviz_pool_run

    def run(self, task: ctypes.c_void_p, args: ctypes.Array[ctypes.c_longlong], count: int) -> None:
        """Call the kernel entry at address `task` with args (buffer addresses, then symbolic sizes) for every
        THREAD index below count; return when all have finished. The arguments are passed as the ctypes objects
        they are (the pool's and the task's made once): with argtypes converting plain ints, the task cast and the
        array's type made per call, a tiny kernel's launch on 2 threads took 9.5-11 µs, against 3.2-4.8 now."""
        self._run(self._pool, task, args, count)


def cores() -> int:
    """The cores this process may run on: its affinity mask where the system has one (a container given 2 of a
    host's 64 cores runs 2 threads, not 64), else every core."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


_pools: dict[str, Workers] = {}  # this process's, by library
os.register_at_fork(after_in_child=_pools.clear)  # threads do not survive a fork: a child process starts its own


def pool(library: str) -> Workers:
    """This process's workers, from the pool library at this path (looked up on every threaded launch: a dict
    lookup, where an lru cache keyed by the process id and a Path cost 0.5 µs)."""
    found = _pools.get(library)
    if found is None:
        found = _pools[library] = Workers(Path(library), cores())
    return found


def task_source(kernel: Kernel) -> str:
    """C for the entry the pool calls for a THREAD kernel: its arguments from one array of integers (addresses,
    then symbolic sizes, as `Workers.run` passes them), its THREAD index last."""
    n = len(kernel.params)
    args = [f"(void*)a[{i}]" for i in range(n)] + [f"(int)a[{n + j}]" for j in range(len(kernel.vars))]
    return f"\nvoid {kernel.name}_task(const long long* a, int i) {{ {kernel.name}({', '.join([*args, 'i'])}); }}\n"
