"""The CPU's native worker pool: a THREAD kernel's every index runs exactly once per call, with its symbolic sizes,
on more than one thread; calls from several Python threads at once and from a forked child stay right."""

from __future__ import annotations

import ctypes
import multiprocessing
import threading

import numpy as np
import pytest

from uopviz.dtype import dtypes
from uopviz.runtime import workers
from uopviz.runtime.cpu import CPURuntime
from uopviz.target import Kernel
from uopviz.uop.ops import Ops, UOp

ADD_N = """void add_n(int* restrict data0, int n, int tidx0) {
  data0[tidx0] += n + tidx0;
}
"""

WHO = """#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>
static int gave_up;
void who(long* restrict data0, int tidx0) {
  long me = syscall(SYS_gettid);
  struct timespec t0, t;
  __atomic_store_n(&data0[tidx0], me, __ATOMIC_SEQ_CST);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!__atomic_load_n(&gave_up, __ATOMIC_SEQ_CST)) {  /* wait for an index run by another thread */
    for (int j = 0; j < 16; j++) {
      long other = __atomic_load_n(&data0[j], __ATOMIC_SEQ_CST);
      if (other != 0 && other != me) return;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > 5) __atomic_store_n(&gave_up, 1, __ATOMIC_SEQ_CST);
  }
}
"""


@pytest.fixture(scope="module")
def rt() -> CPURuntime:
    return CPURuntime()


def add_n(rt: CPURuntime, threads: int) -> object:
    return rt.compile(Kernel("add_n", UOp(Ops.LINEAR, ()), ADD_N, (dtypes.int32,), vars=("n",), threads=threads))


@pytest.mark.parametrize("threads", [2, 7, 61])
def test_every_index_runs_once_per_call_with_its_sizes(rt: CPURuntime, threads: int) -> None:
    run, out = add_n(rt, threads), rt.alloc(threads, dtypes.int32)
    out[:] = 0
    for call in range(300):  # rounds back to back, while the workers still spin, and after they sleep
        run([out], (call,))
    expected = sum(range(300)) + 300 * np.arange(threads)
    np.testing.assert_array_equal(out, expected)


def test_the_indices_run_on_more_than_one_thread(rt: CPURuntime) -> None:
    """A pool of 3 workers whatever this machine's core count (on one core the runtime's own pool has none)."""
    kernel = Kernel("who", UOp(Ops.LINEAR, ()), WHO, (dtypes.int64,), threads=16)
    # the test's own C includes headers, which kernel source may not (runtime/source.py): built as the pool's is
    lib = ctypes.CDLL(str(rt._library(kernel.source + workers.task_source(kernel), kernel.name)))
    task = ctypes.cast(lib.who_task, ctypes.c_void_p)
    out = rt.alloc(16, dtypes.int64)
    out[:] = 0
    workers.Workers(rt._workers_library, 4).run(task, (ctypes.c_longlong * 1)(out.ctypes.data), 16)
    assert 0 not in out.tolist()  # every index ran; each waits (up to 5 s, once) for an index another thread ran,
    assert len(set(out.tolist())) >= 2  # so a loaded machine only delays the workers' first index


def test_calls_from_several_threads_at_once_each_get_their_answer(rt: CPURuntime) -> None:
    run = add_n(rt, 13)
    outs = [rt.alloc(13, dtypes.int32) for _ in range(4)]
    for o in outs:
        o[:] = 0

    def calls(k: int) -> None:
        for _ in range(100):
            run([outs[k]], (k,))

    threads = [threading.Thread(target=calls, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for k, o in enumerate(outs):
        np.testing.assert_array_equal(o, 100 * (k + np.arange(13)))


def _in_child(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    rt = CPURuntime()
    run, out = add_n(rt, 9), rt.alloc(9, dtypes.int32)
    out[:] = 0
    for _ in range(10):
        run([out], (1,))
    queue.put(out.tolist())


def test_a_forked_child_runs_threaded_kernels_with_its_own_workers(rt: CPURuntime) -> None:
    add_n(rt, 9)([rt.alloc(9, dtypes.int32)], (0,))  # the parent's pool is running before the fork
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_in_child, args=(queue,))
    child.start()
    got = queue.get(timeout=60)
    child.join(timeout=60)
    assert got == (10 * (1 + np.arange(9))).tolist()
