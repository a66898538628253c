"""The `store operands` pass: a costly value that a matmul re-reads for each of its outputs (an MLP's activation, a
gradient's long expression) is stored by a kernel of its own; a cheap or rarely re-read one stays fused. The answers
are NumPy's on every runtime."""

from __future__ import annotations

import numpy as np
import pytest

import uopviz
from uopviz.pipeline import kernels_of, schedule
from uopviz.schedule.operands import FEWEST_READS, REREAD
from uopviz.tensor import Tensor
from uopviz.uop.ops import Ops


def _kernel_ops(y: Tensor) -> list[set[Ops]]:
    """The ops of each kernel of y's schedule, in order (the product's last)."""
    return [{u.op for u in ast.toposort()} for ast, _ in kernels_of(schedule([y.uop]))]


def _mlp(device: str, hidden: int, out: int, activation: str) -> tuple[Tensor, np.ndarray]:
    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal(s, dtype=np.float32) * 0.5 for s in ((9, 5), (5, hidden), (hidden, out)))
    X, W1, W2 = (Tensor(a, device=device) for a in (x, w1, w2))
    h = X @ W1
    act = {"sin-exp": lambda t: (t.exp() * 0.25).sin(), "relu": lambda t: t.relu()}[activation]
    want = {"sin-exp": lambda t: np.sin(np.exp(t) * 0.25), "relu": lambda t: np.maximum(t, 0)}[activation]
    return act(h) @ W2, want(x.astype(np.float64) @ w1) @ w2


@pytest.mark.parametrize("out", [REREAD + 3, REREAD // 2])  # the second: fewer reads of a costlier value (2 functions)
def test_a_costly_operand_re_read_by_every_output_is_stored(device: str, out: int) -> None:  # tests/tensor/conftest
    y, want = _mlp(device, hidden=7, out=out, activation="sin-exp")
    first, product = _kernel_ops(y)
    assert Ops.SIN in first and Ops.SIN not in product  # x W1's kernel computes the activation, once an element
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)


def test_cheap_or_rarely_re_read_operands_stay_fused(device: str) -> None:
    cheap, want = _mlp(device, hidden=7, out=REREAD + 3, activation="relu")
    first, product = _kernel_ops(cheap)
    assert Ops.WHERE not in first and Ops.WHERE in product  # the relu is computed in the product's kernel
    np.testing.assert_allclose(cheap.numpy(), want, rtol=1e-4, atol=1e-5)
    few, want = _mlp(device, hidden=7, out=FEWEST_READS - 1, activation="sin-exp")  # each element read 15 times
    first, product = _kernel_ops(few)
    assert Ops.SIN not in first and Ops.SIN in product
    np.testing.assert_allclose(few.numpy(), want, rtol=1e-4, atol=1e-5)


def test_the_pass_is_a_named_step_of_the_schedule() -> None:
    y, want = _mlp("CPU", hidden=4, out=REREAD, activation="sin-exp")
    with uopviz.trace() as tr:
        got = y.numpy()
    step = next(p for p in tr.contexts[0].passes if p.name == "store operands")
    assert step.stage == "Rangeify" and step.steps
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_an_embeddings_gradient_stores_the_rows_it_picks_from(device: str) -> None:
    """A gather's gradient sums a one-hot Where of the rows' gradient over the tokens for every entry of the table:
    the rows' costly gradient (a sine and an exponential each) is stored once, not computed again for every tile of
    entries; the table's gradient is NumPy's scatter-add."""
    rng = np.random.default_rng(1)
    vocab, dim = REREAD + 3, 5
    table, idx = rng.standard_normal((vocab, dim)).astype(np.float32), rng.integers(0, vocab, (3, 7))
    w = Tensor(table, device=device, requires_grad=True)
    (grad,) = w[Tensor(idx.astype(np.int32), device=device)].sin().exp().mul(0.5).sum().gradient(w)
    *first, product = _kernel_ops(grad)
    assert Ops.SIN in set().union(*first) and Ops.SIN not in product
    rows = table[idx].astype(np.float64)
    want = np.zeros((vocab, dim))
    np.add.at(want, idx, 0.5 * np.cos(rows) * np.exp(np.sin(rows)))
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-5, atol=1e-6)
