"""Each launch's FLOPs and bytes, counted from its kernel graph, equal the counts by hand: a gemm (2·M·N·K, every
operand read once and the result written once), an elementwise kernel (its ops per element), a reduction, a copy
between devices and a kernel of symbolic size at the values it ran with."""

from __future__ import annotations

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz.profile.work import Work, kernel_work
from uopviz.uop.ops import UOp

RNG = np.random.default_rng(3)


def _one_run(t: Tensor) -> uopviz.profile.Run:
    with uopviz.profile() as p:
        t.realize()
    assert len(p.runs) == 1, [r.kernel for r in p.runs]
    return p.runs[0]


def test_gemm(device: str) -> None:
    m, k, n = 5, 7, 3
    a, b = RNG.random((m, k), dtype=np.float32), RNG.random((k, n), dtype=np.float32)
    c = Tensor(a, device=device) @ Tensor(b, device=device)
    run = _one_run(c)
    assert (run.flops, run.bytes) == (2 * m * n * k, 4 * (m * k + k * n + m * n))
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_elementwise(device: str) -> None:
    a, b, c = (RNG.random((13, 7), dtype=np.float32) for _ in range(3))
    x = Tensor(a, device=device) * Tensor(b, device=device) + Tensor(c, device=device)
    run = _one_run(x)
    assert (run.flops, run.bytes) == (2 * 13 * 7, 4 * 4 * 13 * 7)  # a mul and an add; three reads and a write
    np.testing.assert_allclose(x.numpy(), a * b + c, rtol=1e-6)


def test_broadcast_input_is_read_once(device: str) -> None:
    a, row = RNG.random((9, 11), dtype=np.float32), RNG.random(11, dtype=np.float32)
    x = Tensor(a, device=device) + Tensor(row, device=device)
    assert _one_run(x).bytes == 4 * (9 * 11 + 11 + 9 * 11)


def test_row_sum(device: str) -> None:
    a = RNG.random((6, 17), dtype=np.float32)
    x = Tensor(a, device=device).sum(1)
    run = _one_run(x)
    assert (run.flops, run.bytes) == (6 * 17, 4 * (6 * 17 + 6))  # an add per element read
    np.testing.assert_allclose(x.numpy(), a.sum(1), rtol=1e-5)


def test_copy_moves_its_bytes_twice() -> None:
    src = UOp.param(1, (10,), uopviz.dtypes.float32, "CPU")
    assert kernel_work(src.copy_to("PYTHON"), {}) == Work(0, 2 * 4 * 10)


def test_symbolic_size_counts_the_values_it_ran_with(device: str) -> None:
    n = uopviz.Variable("n", 1, 32)
    a = RNG.random(32, dtype=np.float32)
    step = uopviz.jit(lambda x: x * 2.0)
    for size in (5, 9, 9, 21):  # capture, then replays at several lengths
        x = Tensor(a, device=device)[:n.bind(size)].realize()
        with uopviz.profile() as p:
            out = step(x)
        assert [(r.flops, r.bytes) for r in p.runs] == [(size, 8 * size)]
        np.testing.assert_allclose(out.numpy(), a[:size] * 2.0, rtol=1e-6)


@pytest.mark.parametrize("shape", [(1,), (3, 1, 5)])
def test_a_function_counts_one_operation(device: str, shape: tuple[int, ...]) -> None:
    """exp2 is one operation an element, whatever its decomposition in the kernel (counted before lowering)."""
    a = RNG.random(shape, dtype=np.float32)
    x = (Tensor(a, device=device) * 1.5).exp2()
    run = _one_run(x)
    assert (run.flops, run.bytes) == (2 * a.size, 2 * 4 * a.size)
    np.testing.assert_allclose(x.numpy(), np.exp2(a * 1.5), rtol=1e-6)
