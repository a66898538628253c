"""CPU libraries compiled in batches (CPURuntime.libraries): one compiler run for several kernels, kernels of one
name and the renderer's static helpers of one name in one batch, each kernel's entry points and helpers named apart,
each kernel's library a link to its batch's that runs as the kernel compiled alone would. Counted and compared, not
timed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from uopviz import Tensor
from uopviz.pipeline import kernels_of, lower, schedule
from uopviz.runtime import cpu
from uopviz.runtime import device as devices
from uopviz.runtime.cpu import CPURuntime
from uopviz.search.policy import default_opts
from uopviz.target import Kernel

X = np.random.default_rng(1).standard_normal((32, 64)).astype(np.float32)


def kernels_for(*outs: Tensor) -> list[Kernel]:
    rt = devices.get("CPU")
    return [lower(ast, rt.target, default_opts(ast, "CPU"))
            for ast, _ in kernels_of(schedule([t.uop for t in outs]))]


def test_a_batch_is_one_compiler_run_and_each_kernel_runs_as_alone(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path))
    rt = devices.get("CPU")
    assert isinstance(rt, CPURuntime)
    x = Tensor(X, device="CPU")
    # two schedules of elementwise kernels on one shape: kernels of one name; fma helpers in each
    ks = kernels_for(x * 1.5 + 0.25) + kernels_for((x * 0.5 + 2.0).exp2()) + kernels_for((x @ x.T).relu())
    assert len({k.name for k in ks}) < len(ks) and sum("static inline" in (k.source or "") for k in ks) >= 2
    assert rt.compiler_version
    runs: list[str] = []
    real = cpu.run_compiler
    monkeypatch.setattr(cpu, "run_compiler", lambda args, stdin, dev, name: runs.append(name) or
                        real(args, stdin, dev, name))
    rt.libraries(ks)
    assert runs == [f"batch of {len(ks)} kernels"]  # kernels of one name, and their helpers, in one unit
    rt.libraries(ks)
    assert len(runs) == 1  # every library cached
    batched = [run(rt, k) for k in ks[:2]]
    assert len(runs) == 1  # loaded from the batch's library
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path / "alone"))
    for k, got, want in zip(ks, batched, [X * 1.5 + 0.25, np.exp2(X * 0.5 + 2.0)], strict=False):
        np.testing.assert_array_equal(got, run(rt, k))  # bit for bit the kernel compiled alone
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert len(runs) == 3


def run(rt: CPURuntime, k: Kernel) -> np.ndarray:
    dst = cpu.aligned_empty(X.size, np.float32)
    rt.compile(k)([dst, X.reshape(-1).copy()])
    return dst.reshape(X.shape)
