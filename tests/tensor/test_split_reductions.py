"""Large reductions to one value split in two kernels (every core reads), with the same answers on every runtime."""

from __future__ import annotations

import numpy as np
import pytest

from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.runtime import device as devices
from uopviz.schedule import reductions, rows
from uopviz.tensor import Tensor


@pytest.fixture
def small_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split reductions of a few thousand elements, so the interpreter runs them too (and keep such small ones
    from being row reductions, which stay whole: at the real sizes no row is that large)."""
    monkeypatch.setattr(reductions, "SPLIT_MIN", 1000)
    monkeypatch.setattr(reductions, "MIN_PART", 8)
    monkeypatch.setattr(rows, "ROW_BYTES", 16)


@pytest.mark.usefixtures("small_split")
def test_split_sum_max_and_prod_equal_numpy(device: str) -> None:  # `device`: tests/tensor/conftest.py's
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 7, 11), dtype=np.float32)  # 1155 elements: 231 parts of 5
    t = Tensor(x, device=device)
    assert len(kernels_of(schedule([t.sum().uop]))) == 2
    np.testing.assert_allclose(t.sum().numpy(), x.sum(dtype=np.float64), rtol=1e-5)
    assert t.max().numpy() == x.max() and t.min().numpy() == x.min()
    p = rng.uniform(0.9, 1.1, 1155).astype(np.float32)
    np.testing.assert_allclose(Tensor(p, device=device).prod().numpy(), np.prod(p.astype(np.float64)), rtol=1e-4)
    i = rng.integers(-50, 50, 2002).astype(np.int32)
    assert Tensor(i, device=device).sum().numpy() == i.sum()


@pytest.mark.usefixtures("small_split")
def test_what_stays_whole() -> None:
    x = Tensor(np.ones(1009, np.float32))  # a prime count: no parts of at least MIN_PART
    assert len(kernels_of(schedule([x.sum().uop]))) == 1
    rows = Tensor(np.ones((40, 50), np.float32)).sum(axis=1)  # not to one value: its output axis has the cores
    assert len(kernels_of(schedule([rows.uop]))) == 1
    small = Tensor(np.ones(999, np.float32)).sum()  # under SPLIT_MIN
    assert len(kernels_of(schedule([small.uop]))) == 1


def test_a_large_sum_reads_on_every_core_and_the_trace_names_the_split() -> None:
    import uopviz
    n = 3 * (1 << 18)
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    t = Tensor(x)
    (first, _), _ = kernels_of(schedule([t.sum().uop]))
    target = devices.get("CPU").target
    if target.threads > 1:  # the first kernel's partial results are the cores' THREAD axis (t in its name)
        name = compile_kernel(first, "CPU", list(heuristic_opts(scheduler_of(first, target))))[0].name
        assert name.split("_")[1].startswith("t"), name
    np.testing.assert_allclose(t.sum().numpy(), x.sum(dtype=np.float64), rtol=1e-5)
    with uopviz.trace.record() as tr:
        t.sum().realize()
    sched = next(c for c in tr.contexts if c.kind == "schedule")
    assert "split reductions" in [p.name for p in sched.passes]
