"""Node provenance in the API: a step's nodes say which Tensor op and user line made them (Trace.origin), a
gradient's nodes the forward op they differentiate; in the HTTP answer and the widget's alike."""

from __future__ import annotations

import inspect

import numpy as np
from uopviz.backend.answers import Answers
from uopviz.backend.store import TraceStore

import uopviz
from uopviz import Tensor
from uopviz.widget.requests import answer


def test_kernel_nodes_name_their_tensor_op_and_line_through_a_gradient() -> None:
    rng = np.random.default_rng(3)
    x = Tensor(rng.random((4, 6), dtype=np.float32), requires_grad=True, device="PYTHON")
    with uopviz.trace() as tr:
        relu_line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        loss = x.relu().sum()
        backward_line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        loss.backward()
        assert x.grad is not None
        x.grad.realize()
    store = TraceStore("PYTHON")
    st = store.add_recorded(tr, "prov")
    answers = Answers(store)
    detail = answers.trace(st.id)
    seen, kernels = [], []
    for c in detail.contexts:
        first = c.passes[0]
        got = answer(answers, 1, "step", [st.id, c.index, first.index, 0])
        assert "ok" in got, got
        made = [n["origin"] for n in got["ok"]["nodes"] if n["origin"] is not None]
        seen += made
        if c.kind == "kernel":
            kernels += made
    assert kernels, "no kernel node carries its origin"
    assert all(o["file"].endswith("test_provenance.py") for o in seen)
    grads = [o for o in seen if o["grad_of"] is not None]
    assert grads and all(o["op"] == "Tensor.backward" and o["line"] == backward_line for o in grads)
    assert ("Tensor.relu", relu_line) in {(o["grad_of"]["op"], o["grad_of"]["line"]) for o in grads}
