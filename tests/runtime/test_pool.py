"""The memory pool: a dead Buffer's memory serves the next Buffer of its device, size and dtype, never while
anything else still holds it, and results stay right when memory is reused."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
from devices_here import needs_cl

from uopviz.dtype import dtypes
from uopviz.runtime import buffer as buffers
from uopviz.runtime.pool import POOL, MemoryPool
from uopviz.tensor import Tensor

DEVICES = ["CPU", "PYTHON", pytest.param("CL", marks=needs_cl)]


@pytest.fixture(autouse=True)
def empty_pool() -> None:
    gc.collect()
    POOL.clear()


def test_a_dead_buffers_memory_serves_the_next_of_its_shape() -> None:
    first = buffers.new_buffer(1001, dtypes.float32, "CPU")
    address = buffers.handle(first).ctypes.data
    del first
    again = buffers.new_buffer(1001, dtypes.float32, "CPU")
    assert buffers.handle(again).ctypes.data == address
    other = buffers.new_buffer(1001, dtypes.int32, "CPU")  # another dtype: fresh memory
    assert buffers.handle(other).ctypes.data != address


def test_memory_still_held_elsewhere_is_never_reused() -> None:
    buf = buffers.new_buffer(777, dtypes.float32, "CPU")
    view = buffers.handle(buf)[:10]  # a view of the buffer outlives it
    view[:] = 7.0
    del buf
    assert POOL.bytes == 0
    fresh = buffers.new_buffer(777, dtypes.float32, "CPU")
    buffers.handle(fresh)[:] = -1.0
    assert (view == 7.0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_repeated_calls_on_reused_memory_give_each_calls_answer(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    reused = []
    take = POOL.take

    def counted(key: Any) -> Any:
        if (h := take(key)) is not None:
            reused.append(h)
        return h

    monkeypatch.setattr(POOL, "take", counted)
    rng = np.random.default_rng(0)
    for _ in range(3):
        a, b = rng.standard_normal((37, 19), dtype=np.float32), rng.standard_normal((37, 19), dtype=np.float32)
        out = ((Tensor(a, device=device) * Tensor(b, device=device)).relu() + 1).numpy()
        np.testing.assert_allclose(out, np.maximum(a * b, 0) + 1, rtol=1e-6)
        s = Tensor(a, device=device).sum(axis=1).numpy()
        np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert reused  # later calls ran on memory the earlier ones had given back


def test_the_pool_keeps_at_most_its_limit_dropping_the_longest_unused() -> None:
    pool = MemoryPool(limit_bytes=100)
    pool.give(("CPU", 10, dtypes.float32), "a", 40)
    pool.give(("CPU", 11, dtypes.float32), "b", 40)
    pool.give(("CPU", 12, dtypes.float32), "c", 40)  # over the limit: "a" goes
    assert pool.bytes == 80 and pool.take(("CPU", 10, dtypes.float32)) is None
    assert pool.take(("CPU", 12, dtypes.float32)) == "c" and pool.bytes == 40
    pool.give(("CPU", 13, dtypes.float32), "huge", 1000)  # larger than the whole pool: not kept
    assert pool.bytes == 40
