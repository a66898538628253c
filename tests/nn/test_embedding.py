"""nn.Embedding: rows picked as indexing picks them (against torch, gradient included), stored in the layout the
model reads them in."""

from __future__ import annotations

import numpy as np
import torch

from uopviz import Tensor, nn
from uopviz.pipeline import kernels_of, lower, schedule
from uopviz.runtime import device as devices
from uopviz.uop.ops import AxisType, Ops
from uopviz.uop.symbolic import step


def test_embedding_rows_and_gradient_match_torch() -> None:
    emb = nn.Embedding(11, 5)
    w = emb.weight.numpy().astype(np.float64)
    idx = np.array([[0, 6, 3, 3], [10, 2, 6, 6]])
    g = np.random.default_rng(0).standard_normal((2, 4, 5))
    out = emb(Tensor(idx.astype(np.int32)))
    (out * Tensor(g.astype(np.float32))).sum().backward()
    tw = torch.tensor(w, requires_grad=True)
    (torch.nn.functional.embedding(torch.tensor(idx), tw) * torch.tensor(g)).sum().backward()
    assert out.dtype == emb.weight.dtype
    np.testing.assert_allclose(out.numpy(), w[idx], rtol=1e-6)
    assert emb.weight.grad is not None
    np.testing.assert_allclose(emb.weight.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_embedding_indices_read_as_indexing_reads_them() -> None:
    """Negative indices wrap; beyond the table's rows, zeros (a lazy index is not bounds-checked); any int dtype."""
    emb = nn.Embedding(7, 3)
    w = emb.weight.numpy()
    got = emb(Tensor(np.array([-1, -7, 7, -8, 2], dtype=np.int32))).numpy()
    np.testing.assert_array_equal(got, np.stack([w[6], w[0], np.zeros(3), np.zeros(3), w[2]]))
    np.testing.assert_array_equal(emb(Tensor(np.array([1, 6], dtype=np.uint8))).numpy(), w[[1, 6]])


def test_embedding_is_stored_rows_first() -> None:
    """A sum over the features of the embedded rows (a layernorm's) reads them one after another: the embedding's
    kernel stores (..., embedding_dim), not its transpose (the GPT's layernorms read 16-float gathers)."""
    emb = nn.Embedding(11, 5)
    idx = Tensor(np.array([[0, 6, 3, 3], [10, 2, 6, 6]], dtype=np.int32))
    target = devices.get("CPU").target
    steps = []
    for ast, _ in kernels_of(schedule([emb(idx).sum(-1).uop])):
        nodes = lower(ast, target).linear.toposort()
        features = [u for u in nodes if u.op is Ops.RANGE and u.arg.type is AxisType.REDUCE and u.src[0].arg.value == 5]
        steps += [step(u.src[0].src[1], r) for r in features for u in nodes if u.op is Ops.LOAD]
    assert steps and max(steps) == 1, steps
