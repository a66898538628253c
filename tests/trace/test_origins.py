"""Node-level provenance: every node a Tensor op builds while a trace records says which op and which line of the
user's code made it ("gradient of" the forward op for what backward builds), and every node the compiler makes
from it says the same, through every pass down to the rendered kernel; saved and loaded alike."""

from __future__ import annotations

import json

import numpy as np
import pytest

import uopviz
from tests.lines import here
from uopviz import Tensor
from uopviz.trace import TraceFormatError, node_id, origins
from uopviz.uop import ops

Traced = tuple[uopviz.trace.Trace, dict[str, int], Tensor]  # the trace, the lines of its ops, its relu's output
RNG = np.random.default_rng(5)
X, W = RNG.random((5, 7), dtype=np.float32), RNG.random((7, 3), dtype=np.float32)


@pytest.fixture(scope="module")
def traced() -> Traced:
    x, w = Tensor(X, requires_grad=True, device="PYTHON"), Tensor(W, requires_grad=True, device="PYTHON")
    with uopviz.trace() as tr:
        lines = {"matmul": here() + 1}
        y = x @ w
        lines["relu"] = here() + 1
        z = y.relu()
        lines["sum"] = here() + 1
        loss = z.sum()
        lines["backward"] = here() + 1
        loss.backward()
    return tr, lines, z


def test_a_forward_node_names_its_op_and_line(traced: Traced) -> None:
    tr, lines, z = traced
    made = tr.origin(node_id(z.uop)) if node_id(z.uop) in tr.nodes else None
    relu = [o for o in map(tr.origin, tr.nodes) if o and o["op"] == "Tensor.relu"]
    assert relu and {o["line"] for o in relu} == {lines["relu"]}
    assert all(o["file"].endswith("test_origins.py") and o["code"] == "z = y.relu()" and o["grad_of"] is None
               for o in relu)
    assert made is None or made["op"] == "Tensor.relu"
    assert {o["op"] for o in map(tr.origin, tr.nodes) if o and o["grad_of"] is None} >= {
        "Tensor.__matmul__", "Tensor.relu", "Tensor.sum"}


def test_a_gradient_node_names_the_forward_op_it_differentiates(traced: Traced) -> None:
    tr, lines, _ = traced
    grads = [o for o in map(tr.origin, tr.nodes) if o and o["grad_of"] is not None]
    assert {o["line"] for o in grads} == {lines["backward"]}
    assert {(o["grad_of"]["op"], o["grad_of"]["line"]) for o in grads} >= {
        ("Tensor.relu", lines["relu"]), ("Tensor.__matmul__", lines["matmul"]), ("Tensor.sum", lines["sum"])}


def test_every_node_of_every_kernel_pass_has_an_origin(traced: Traced) -> None:
    """The compiler's nodes inherit the origin of what they replace: from the kernel's input to its rendered
    program, no node of a kernel is without one, and each kernel's root names a line of this test."""
    tr, lines, _ = traced
    kernels = [c for c in tr.contexts if c.kind == "kernel"]
    assert len(kernels) >= 3
    for c in kernels:
        root = tr.origin(c.passes[0].input)
        assert root is not None and root["line"] in lines.values()
        for p in c.passes:
            missing = [n for n in tr.nodes_of(p.output or p.input) if tr.origin(n) is None]
            assert not missing, (c.name, p.name, [tr.node(n)["op"] for n in missing])


def test_every_gradient_kernel_names_the_forward_op_it_differentiates(traced: Traced) -> None:
    """backward's own nodes over a gradient (the reshape of a leaf's gradient to its shape, the sum of two
    contributions) continue that gradient: the matmul's dW and dx kernels say whose gradient they are, not just
    "backward()"."""
    tr, lines, _ = traced
    roots = [tr.origin(c.passes[0].input) for c in tr.contexts if c.kind == "kernel"]
    backward = [o for o in roots if o is not None and o["line"] == lines["backward"]]
    assert len(backward) >= 2 and all(o["grad_of"] is not None for o in backward), backward
    assert "Tensor.__matmul__" in {o["grad_of"]["op"] for o in backward}


def test_origins_survive_save_and_load(traced: Traced) -> None:
    tr, _, _ = traced
    back = uopviz.trace.Trace.from_json(tr.to_json())
    assert {n: back.origin(n) for n in tr.nodes} == {n: tr.origin(n) for n in tr.nodes}
    doc = tr.to_dict()
    assert len(doc["origins"]) < 40 < len(doc["node_origins"])  # each origin once, nodes point at them


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["node_origins"].update({next(iter(d["node_origins"])): 10**6}), "is not an index of origins"),
    (lambda d: d["node_origins"].update({"nope": 0}), "'nope' is not a node"),
    (lambda d: d["origins"][0].update(grad_of=-1), "grad_of: -1 is not an index"),
    (lambda d: d["origins"][0].pop("op"), "op"),
])
def test_damaged_origins_are_a_named_error(traced: Traced, change: object, message: str) -> None:
    doc = json.loads(traced[0].to_json())
    change(doc)  # type: ignore[operator]  # each case's lambda edits the document in place
    with pytest.raises(TraceFormatError, match=message):
        uopviz.trace.Trace.from_dict(doc)


def test_a_trace_without_origins_loads_and_knows_none(traced: Traced) -> None:
    doc = traced[0].to_dict()
    del doc["origins"], doc["node_origins"]
    back = uopviz.trace.Trace.from_dict(json.loads(json.dumps(doc)))
    assert all(back.origin(n) is None for n in back.nodes)


def test_nothing_is_noted_outside_a_recording() -> None:
    assert ops._on_built is None and not origins.active()
    with uopviz.trace():
        assert ops._on_built is not None and origins.active()
    assert ops._on_built is None and not origins.active()


def test_a_damaged_chain_of_gradients_ends(traced: Traced) -> None:
    """A file whose grad_of indices loop is read without looping (each origin once in the chain)."""
    doc = traced[0].to_dict()
    k = next(i for i, o in enumerate(doc["origins"]) if o["grad_of"] is not None)
    doc["origins"][doc["origins"][k]["grad_of"]]["grad_of"] = k
    back = uopviz.trace.Trace.from_dict(json.loads(json.dumps(doc)))
    nid = next(n for n, i in doc["node_origins"].items() if i == k)
    got = back.origin(nid)
    assert got is not None and got["grad_of"] is not None and got["grad_of"]["grad_of"] is None


def test_each_kernel_of_a_fused_program_is_filed_under_its_own_line(device: str) -> None:
    """A layernorm feeding a matmul feeding a softmax: the passes that rebuild around rows and operands (fuse rows
    wraps a row's end in a Contiguous) keep each kernel's origin its own op's, not the program's last line."""
    rng = np.random.default_rng(0)
    xs, ws = rng.random((64, 128), dtype=np.float32), rng.random((128, 96), dtype=np.float32)
    x, w = Tensor(xs, device=device), Tensor(ws, device=device)
    with uopviz.profile() as p:
        lines = {"Tensor.layernorm": here() + 1}
        h = x.layernorm()
        lines["Tensor.__matmul__"] = lines["Tensor.softmax"] = here() + 1
        y = (h @ w).softmax(-1)
        lines["Tensor.sum"] = here() + 1
        out = y.sum()
        got = out.item()
    made = {(r.origin["op"], r.origin["line"]) for r in p.runs if r.origin is not None}
    assert all(r.origin is not None for r in p.runs) and len(made) >= 3
    assert made <= set(lines.items()) and ("Tensor.layernorm", lines["Tensor.layernorm"]) in made
    hn = (xs - xs.mean(-1, keepdims=True)) / np.sqrt(xs.var(-1, keepdims=True) + 1e-5)
    e = np.exp(hn @ ws - (hn @ ws).max(-1, keepdims=True))
    np.testing.assert_allclose(got, (e / e.sum(-1, keepdims=True)).sum(), rtol=1e-4)


def test_recordings_inside_each_other_each_note_and_end() -> None:
    """A trace inside a trace (a script's own under `uopviz serve`) and a profile inside a trace: each notes the
    nodes built inside it, and each ends cleanly (the maps are told apart by identity, not by their equal
    contents)."""
    with uopviz.trace(), uopviz.trace(), uopviz.profile():
        pass
    with uopviz.trace() as outer, uopviz.trace() as inner:
        (Tensor([1.0, 2.0], device="PYTHON") * 3).realize()
    assert not origins.active() and ops._on_built is None
    assert inner._made and set(inner._made) <= set(outer._made)


def test_a_gradient_survives_to_the_kernels_reductions(traced: Traced) -> None:
    """The gradient kernels' reductions, after rangeify pushed their indexing down through the views around them
    (Index(Reshape(Reduce)) -> Reduce(Index...)), still name the forward op they differentiate."""
    tr, lines, _ = traced
    found = set()
    for c in tr.contexts:
        if c.kind != "kernel":
            continue
        out = next(p for p in c.passes if p.name == "rangeify").output
        assert out is not None
        for n in tr.nodes_of(out):
            o = tr.origin(n)
            if tr.node(n)["op"] == "Reduce" and o is not None and o["grad_of"] is not None:
                found.add((o["grad_of"]["op"], o["grad_of"]["line"]))
    assert ("Tensor.__matmul__", lines["matmul"]) in found


def test_a_node_built_before_the_recording_is_noted_where_the_recording_builds_it() -> None:
    """Nodes are shared: a gradient's expanded constant some earlier code built is the same node when the recorded
    code builds it again, and it is that code's work (a CI run failed where another test in the same process had
    taken the gradient of a sum of the same shape first)."""
    x = Tensor(np.ones((5, 3), np.float32), requires_grad=True, device="PYTHON")
    x.sum().backward()
    y = Tensor(np.ones((5, 3), np.float32), requires_grad=True, device="PYTHON")
    with uopviz.trace() as tr:
        line = here() + 1
        y.sum().backward()
    made = [o for o in map(tr.origin, tr.nodes) if o is not None]
    assert {o["line"] for o in made} == {line}
    assert any(o["grad_of"] is not None and o["grad_of"]["op"] == "Tensor.sum" for o in made), made
