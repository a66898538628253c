"""Kernels of several outputs (uopviz/schedule/split.py `siblings`): elementwise values of one shape and device are
stored by one kernel, a member that reads another uses its expression, and what cannot share a kernel (a read through
a view, a cycle through a value outside) does not; optimizer steps against torch float64, the launch count of an
AdamW step, a @jit replay, BEAM's check of every output, the memory plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import uopviz
from uopviz import Tensor, nn
from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, schedule
from uopviz.realize import capture
from uopviz.runtime import buffer as buffers
from uopviz.schedule.split import outputs_of
from uopviz.search import beam
from uopviz.search.timing import Workbench
from uopviz.uop.ops import UOp

RNG = np.random.default_rng(11)
SHAPES = [(7,), (3, 5), (3, 5), (4, 1, 3), (5, 3)]  # odd sizes; two of one shape share their kernel


def _arrays(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    return [RNG.standard_normal(s).astype(np.float32) for s in shapes]


def _kernels(*roots: Tensor) -> list[tuple[UOp, list[UOp]]]:
    return kernels_of(schedule([r.uop for r in roots]))


@pytest.mark.parametrize("name, kw", [("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01}),
                                      ("Adam", {"lr": 0.01, "weight_decay": 0.1}),
                                      ("AdamW", {"lr": 0.01, "weight_decay": 0.1})])
def test_optimizer_steps_match_torch(device: str, name: str, kw: dict[str, Any]) -> None:
    torch = pytest.importorskip("torch")
    w0s, g0s = _arrays(*SHAPES), _arrays(*SHAPES)
    ws = [Tensor(w.copy(), device=device).realize() for w in w0s]
    opt = getattr(nn.optim, name)(ws, **kw)
    tw = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in w0s]
    topt = getattr(torch.optim, name)(tw, **kw)
    for step in range(3):
        for w, t, g in zip(ws, tw, g0s, strict=True):
            w.grad = Tensor(g * (step + 1), device=device).realize()
            t.grad = torch.tensor(g * (step + 1), dtype=torch.float64)
        opt.step()
        topt.step()
    for w, t in zip(ws, tw, strict=True):
        np.testing.assert_allclose(w.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_an_adamw_step_is_one_launch_per_parameter_shape(device: str) -> None:
    """Two (3, 5) and two (6,) parameters: one kernel for both bias-correction powers (two 0-d values), one for the
    (3, 5) ones' m, v and p (6 outputs and 11 inputs: p, m, v, g each, the two powers and lr) and one for the (6,)
    ones': 3 launches, where a kernel per value was 2 + 3·4 = 14."""
    ws = [Tensor(a, device=device).realize() for a in _arrays((3, 5), (6,), (3, 5), (6,))]
    opt = nn.optim.AdamW(ws, lr=0.01)
    for w, g in zip(ws, _arrays((3, 5), (6,), (3, 5), (6,)), strict=True):
        w.grad = Tensor(g, device=device).realize()
    with capture() as launches:
        opt.step()
    assert len(launches) == 3
    assert sorted(launch.outputs for launch in launches) == [2, 6, 6]


def test_a_jit_replay_of_an_optimizer_step(device: str) -> None:
    """A @jit training step (its AdamW kernels of several outputs) replayed: each replay as the eager step."""
    w0, x0 = _arrays((4, 3), (5, 4))
    runs = []
    for jitted in (False, True):
        w, x = Tensor(w0.copy(), device=device).realize(), Tensor(x0, device=device).realize()
        opt = nn.optim.AdamW([w], lr=0.05)

        def step(x: Tensor, w: Tensor = w, opt: nn.optim.AdamW = opt) -> Tensor:
            opt.zero_grad()
            loss = (x @ w).square().sum()
            loss.backward()
            opt.step()
            return loss
        run = uopviz.jit(step) if jitted else step
        runs.append([(float(run(x).numpy()), w.numpy().copy()) for _ in range(4)])
    for (le, we), (lj, wj) in zip(*runs, strict=True):
        assert le == pytest.approx(lj, rel=1e-6)
        np.testing.assert_allclose(wj, we, rtol=1e-6, atol=1e-7)


def test_siblings_share_a_kernel_and_a_reader_uses_the_expression(device: str) -> None:
    """m' = 0.9·m + g and p' = p − m' (p' reads m' elementwise: its expression, not m's buffer), and an independent
    value of their shape: one kernel of three Stores."""
    m0, g0, p0, q0 = _arrays((5, 7), (5, 7), (5, 7), (5, 7))
    m, g, p, q = (Tensor(a, device=device) for a in (m0, g0, p0, q0))
    m1 = (m * 0.9 + g).contiguous()
    p1 = (p - m1).contiguous()
    q1 = (q.exp() * 2).contiguous()
    (kernel, bufs), = _kernels(m1, p1, q1)
    assert outputs_of(kernel) == 3 and len(bufs) == 3 + 4  # m', p', q' written; m, g, p, q read (not m')
    uopviz.Tensor.realize(m1, p1, q1)
    np.testing.assert_allclose(m1.numpy(), m0 * 0.9 + g0, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(p1.numpy(), p0 - (m0 * 0.9 + g0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(q1.numpy(), np.exp(q0) * 2, rtol=1e-5)


@pytest.mark.parametrize("view", ["permute", "shrink"])
def test_a_read_through_a_view_does_not_share_a_kernel(device: str, view: str) -> None:
    """p' reads m' at another element (a transpose, a shift): another thread's element, so two kernels."""
    m0, p0 = _arrays((6, 6), (6, 6))
    m, p = Tensor(m0, device=device), Tensor(p0, device=device)
    m1 = (m + 1).contiguous()
    moved = m1.permute(1, 0) if view == "permute" else m1[1:].pad(((0, 1), (0, 0)))
    want = (m0 + 1).T if view == "permute" else np.pad((m0 + 1)[1:], ((0, 1), (0, 0)))
    p1 = (p * moved).contiguous()
    assert [outputs_of(k) for k, _ in _kernels(m1, p1)] == [1, 1]
    uopviz.Tensor.realize(m1, p1)
    np.testing.assert_allclose(p1.numpy(), p0 * want, rtol=1e-6)


def test_a_cycle_through_a_value_outside_does_not_share_a_kernel(device: str) -> None:
    """p' reads s, a sum of m': m' and p' have one shape, but one kernel of both would run before and after s."""
    m0, x0 = _arrays((4, 5), (4, 5))
    m, x = Tensor(m0, device=device), Tensor(x0, device=device)
    m1 = (m + 1).contiguous()
    s = m1.sum(axis=0).contiguous()
    p1 = (x * 2 + s.reshape(1, 5)).contiguous()
    assert len(_kernels(m1, p1)) == 3
    uopviz.Tensor.realize(m1, p1)
    np.testing.assert_allclose(p1.numpy(), x0 * 2 + (m0 + 1).sum(axis=0), rtol=1e-5, atol=1e-6)


def test_the_memory_plan_reuses_an_output_of_a_kernel_of_siblings(device: str) -> None:
    """a and b (one kernel) are read only by two sums; d, after them, takes a's storage. Buffers: x, a, b, the two
    sums and the output: 6, where 7 without the plan."""
    x0, = _arrays((8, 13))
    x = Tensor(x0, device=device)
    a, b = (x * 2).contiguous(), (x + 1).contiguous()
    r1, r2 = a.sum(axis=1, keepdim=True).contiguous(), b.max(axis=1, keepdim=True).contiguous()
    d = (x * r1 + r2).contiguous()
    out = (d.permute(1, 0) * 3).contiguous()
    kernels = _kernels(out)
    assert sorted(outputs_of(k) for k, _ in kernels) == [1, 1, 1, 1, 2]
    assert len({id(b) for _, bufs in kernels for b in bufs}) == 6
    want = (x0 * (x0 * 2).sum(axis=1, keepdims=True) + (x0 + 1).max(axis=1, keepdims=True)).T * 3
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_beam_checks_every_output(tmp_path: Path) -> None:
    """A candidate wrong on output 1 only is rejected, naming it; a search's winner is right on both outputs."""
    m0, p0 = _arrays((33, 17), (33, 17))
    m, p = Tensor(m0, device="CPU"), Tensor(p0, device="CPU")
    m1 = (m * 0.5).contiguous()
    (ast, bufs), = _kernels(m1, (p + m1).contiguous())
    assert outputs_of(ast) == 2
    bench = Workbench(ast, "CPU", seed=3)
    kernel, prog = compile_kernel(ast, "CPU", [])
    right = bench.bind(kernel, prog)
    assert bench.measure(right, None).error is None

    def wrong(handles: Any, wait: bool = False) -> float | None:
        t = right(handles, wait=wait)
        bench.runtime.copyin(handles[1], np.zeros(bench.bufs[1].arg.size, np.float32))
        return t
    error = bench.measure(wrong, None).error
    assert error is not None and error.startswith("output 1: wrong result")
    r = beam(ast, 2, "CPU", db=tmp_path / "beam.db", max_rounds=1, progress=False)
    got = []
    for opts in ([], r.opts):
        _, program = compile_kernel(ast, "CPU", list(opts))
        program([buffers.handle(b) for b in bufs], wait=True)
        got.append([buffers.to_numpy(b).copy() for b in bufs[:2]])
    for want, have in zip(*got, strict=True):
        np.testing.assert_allclose(have, want, rtol=1e-6)
    np.testing.assert_allclose(got[1][1].reshape(33, 17), p0 + m0 * 0.5, rtol=1e-6)
