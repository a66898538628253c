"""A process that compiles kernels without end stays within its memory mappings: compile_kernel keeps the most
recently used programs, and a CPU library is unloaded with its last program (one process of the fuzzer failed
"failed to map segment from shared object" after about 10,000 kernels: vm.max_map_count)."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz import compiler as compiler_mod
from uopviz.runtime import device as devices


def _mappings() -> int:
    return len(Path("/proc/self/maps").read_text().splitlines())


def _kernel(i: int) -> np.ndarray:
    """A kernel of its own for each i (the constants are in its source)."""
    return Tensor(np.arange(7, dtype=np.float32)).add(i + 0.5).mul(float(i)).numpy()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="counts mappings in /proc/self/maps (Linux)")
def test_libraries_of_dropped_programs_are_unloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiler_mod, "PROGRAMS_KEPT", 8)
    rt = devices.get("CPU")
    for i in range(10):
        _kernel(1000 + i)
    gc.collect()
    before = _mappings()
    for i in range(50):
        np.testing.assert_array_equal(_kernel(2000 + i), (np.arange(7, dtype=np.float32) + (2000 + i + 0.5)) *
                                      np.float32(2000 + i))
    gc.collect()
    assert len(compiler_mod._programs) <= 8
    assert len(rt._libs) <= 8 + 2, "libraries of dropped programs stay loaded"
    assert _mappings() - before < 40, "each of 50 kernels left its library's mappings behind"


def test_a_program_still_held_keeps_its_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program dropped from compile_kernel's cache but held by a @jit replay still runs after the libraries of
    the dropped programs around it were unloaded."""
    monkeypatch.setattr(compiler_mod, "PROGRAMS_KEPT", 2)

    @uopviz.jit
    def step(x: Tensor) -> Tensor:
        return x.mul(3.25).add(1.0)

    x = np.arange(5, dtype=np.float32)
    for _ in range(3):  # traced, then replayed
        step(Tensor(x)).numpy()
    for i in range(6):
        _kernel(3000 + i)
    gc.collect()
    np.testing.assert_array_equal(step(Tensor(x + 1)).numpy(), (x + 1) * np.float32(3.25) + 1)
