"""An assign computes its values straight into the targets' buffers where no kernel can read a target's old contents
after its new ones are written (uopviz/schedule/inplace.py), and into new memory then copied otherwise; every case
against NumPy on every device, with odd sizes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from uopviz import Tensor, nn
from uopviz.realize import capture
from uopviz.schedule.inplace import writes_in_place
from uopviz.tensor import assign_all

RNG = np.random.default_rng(7)


def _data(device: str, *shapes: tuple[int, ...]) -> tuple[list[np.ndarray], list[Tensor]]:
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    return arrays, [Tensor(a.copy(), device=device).realize() for a in arrays]


def _kernels(run: Callable[[], object]) -> int:
    with capture() as launches:
        run()
    return len(launches)


def test_an_elementwise_update_of_itself_is_one_kernel(device: str) -> None:
    (a0,), (a,) = _data(device, (5, 7))
    assert _kernels(lambda: a.assign(a * 2 + 1)) == 1
    np.testing.assert_allclose(a.numpy(), a0 * 2 + 1, rtol=1e-6)


def test_a_value_reading_another_assigned_value_sees_its_new_contents(device: str) -> None:
    """m ← 0.9·m + g, p ← p − m (the new m, as an optimizer's update reads it): in place, one kernel of two Stores
    (p's uses m's expression: elementwise at the same index, so each element reads old m before writing it)."""
    (m0, p0, g0), (m, p, g) = _data(device, (3, 11), (3, 11), (3, 11))
    m_new = m * 0.9 + g
    assert _kernels(lambda: assign_all([m, p], [m_new, p - m_new])) == 1
    np.testing.assert_allclose(m.numpy(), m0 * 0.9 + g0, rtol=1e-6)
    np.testing.assert_allclose(p.numpy(), p0 - (m0 * 0.9 + g0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", ["swap", "other's old", "flip", "minus mean", "transpose"])
def test_reads_of_old_contents_elsewhere_still_see_them(device: str, case: str) -> None:
    """Each of these reads a target's old contents where another element, or another value, is written first: they
    go through new memory, and give NumPy's values."""
    (a0, b0), (a, b) = _data(device, (5, 5), (5, 5))
    targets, values, want = {
        "swap": ([a, b], [b, a], [b0, a0]),
        "other's old": ([a, b], [a + 1, a * 2], [a0 + 1, a0 * 2]),
        "flip": ([a], [a.flip(0) + 1], [a0[::-1] + 1]),
        "minus mean": ([a], [a - a.mean()], [a0 - a0.mean()]),
        "transpose": ([a], [a.T * 3], [a0.T * 3]),
    }[case]
    assert not writes_in_place([t.uop for t in targets], [v.uop for v in values])
    assign_all(targets, values)
    for t, w in zip(targets, want, strict=True):
        np.testing.assert_allclose(t.numpy(), w, rtol=1e-5, atol=1e-6)


def test_adamw_writes_its_parameters_and_state_in_place(device: str) -> None:
    """One kernel a parameter shape (m, v and p stored by one kernel of siblings; the shapes differ here) and one for
    both bias-correction powers (two 0-d values, independent); the values against torch's AdamW."""
    torch = pytest.importorskip("torch")
    shapes = [(7,), (3, 5), (4, 1, 3)]
    w0s, ws = _data(device, *shapes)
    g0s = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    opt = nn.optim.AdamW(ws, lr=0.01, weight_decay=0.1)
    tw = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in w0s]
    topt = torch.optim.AdamW(tw, lr=0.01, weight_decay=0.1)
    for step in range(3):
        for w, t, g in zip(ws, tw, g0s, strict=True):
            w.grad = Tensor(g * (step + 1), device=device).realize()
            t.grad = torch.tensor(g * (step + 1), dtype=torch.float64)
        launches = _kernels(opt.step)
        topt.step()
        assert launches == len(shapes) + 1
    for w, t in zip(ws, tw, strict=True):
        np.testing.assert_allclose(w.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
