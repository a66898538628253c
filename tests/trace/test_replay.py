"""Replaying a pass step by step (nodes.Replay: only what each step changes is rebuilt) gives the graphs that a
substitute of the whole graph with every rewrite so far gives, on a real trace: a training step's, whose passes
rewrite nodes that later steps bring back."""

from __future__ import annotations

import numpy as np

import uopviz
from uopviz import Tensor, nn
from uopviz.trace import Trace


def test_step_by_step_replay_equals_whole_graph_substitution() -> None:
    rng = np.random.default_rng(0)
    w1, w2 = (Tensor(rng.standard_normal(s, dtype=np.float32)) for s in ((6, 9), (9, 3)))
    for w in (w1, w2):
        w.requires_grad = True
    opt = nn.optim.Adam([w1, w2], lr=0.1)
    with uopviz.trace() as tr:
        x = Tensor(rng.standard_normal((5, 6), dtype=np.float32))
        loss = ((x @ w1).gelu() @ w2).log_softmax(-1).mean().backward()
        opt.step()
        loss.item()
    tr = Trace.from_json(tr.to_json())  # as a saved trace is read: replay works on its ids alone
    steps = 0
    for c in tr.contexts:
        for p in c.passes:
            rewrites: dict[str, str] = {}
            root = p.input
            assert p.graph_at(0) == root
            for k, s in enumerate(p.steps, 1):
                rewrites[s.match] = s.replacement
                root = p._table.substitute(root, rewrites)
                assert p.graph_at(k) == root, (c.name, p.name, k)
                steps += 1
            if p.output is not None and p.steps:
                assert p.graph_at(len(p.steps)) == p.output or p.error, (c.name, p.name)
    assert steps > 500  # a real trace, not a toy
