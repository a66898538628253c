"""Composites built by substitution into a kept template (uopviz.tensor.template) must give the very graph a direct
build gives: the same UOps (hash-consed), the same gradient rules over the new inputs, the same values."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from uopviz import Tensor, nn
from uopviz.realize import OWN_GRADIENT
from uopviz.tensor.template import templated
from uopviz.uop import ops
from uopviz.uop.ops import Ops, UOp


@contextmanager
def direct() -> Iterator[None]:
    """Builds inside are direct: a node hook (what a trace installs) turns templates off."""
    prev = ops.on_node_built(lambda u: None)
    try:
        yield
    finally:
        ops.on_node_built(prev)


def _rand(*shape: int, seed: int = 0, dtype: type = np.float32) -> Tensor:
    return Tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype)).realize()


def _same_graph(build: Callable[[], Tensor]) -> None:
    """A direct build and a templated one of build() (twice: the first call makes the template): the same UOp,
    its gradient rules over its own nodes."""
    with direct():
        ref = build()
    for _ in range(2):
        out = build()
        assert out.uop is ref.uop
        assert out.device == ref.device
    graph = set(out.uop.toposort())  # each gradient rule, last set by the templated build, over this graph's nodes
    assert all(s in graph for u in graph if OWN_GRADIENT in u.__dict__ for s in u.__dict__[OWN_GRADIENT][0])


TARGET = Tensor(np.array([[0, 4, 1, 3, 2, 2], [3, 3, 0, 1, 4, 4]], np.int32)).realize()
CASES: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "gelu": lambda x, w, b: x.gelu(),
    "gelu tanh": lambda x, w, b: x.gelu(approximate="tanh"),
    "layernorm": lambda x, w, b: x.layernorm(eps=1e-3),
    "linear": lambda x, w, b: x.linear(w.T, b),
    "linear without bias": lambda x, w, b: x.linear(w.T),
    "attention": lambda x, w, b: x.scaled_dot_product_attention(x, x, is_causal=True),
    "attention, float mask": lambda x, w, b: x.scaled_dot_product_attention(x * 2, x, attn_mask=x.sum(-1, True)),
    "matmul": lambda x, w, b: x @ w.T,
    "matmul of a vector": lambda x, w, b: b @ w,
    "softmax": lambda x, w, b: x.softmax(1),
    "log_softmax": lambda x, w, b: x.log_softmax(),
    "cross_entropy": lambda x, w, b: x.cross_entropy(TARGET, ignore_index=3),
    "cross_entropy, smoothed": lambda x, w, b: x.cross_entropy(x.softmax(1), label_smoothing=0.25, reduction="sum"),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_templated_composite_is_the_direct_build(name: str, dtype: type) -> None:
    x, w, b = _rand(2, 5, 6, dtype=dtype), _rand(4, 6, seed=1, dtype=dtype), _rand(4, seed=2, dtype=dtype)
    _same_graph(lambda: CASES[name](x, w, b))
    x2 = _rand(2, 5, 6, seed=3, dtype=dtype)  # new inputs of the signature: the template's graph over them
    with direct():
        ref2 = CASES[name](x2, w, b)
    assert CASES[name](x2, w, b).uop is ref2.uop
    np.testing.assert_array_equal(CASES[name](x2, w, b).numpy(), ref2.numpy())


def test_gradient_rules_are_carried_over_the_new_inputs() -> None:
    """gelu's own rule (its exact derivative) on the templated node names the call's input, so backward gives the
    direct build's gradient, for every input of the signature."""
    for seed in range(3):
        x = _rand(3, 7, seed=seed).requires_grad_()
        with direct():
            x.gelu().sum().backward()
        ref = x.grad.numpy()
        x.grad = None
        out = x.gelu()
        assert out.uop.__dict__[OWN_GRADIENT][0] == (x.uop,)
        out.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), ref)


def test_modules_build_their_direct_graphs() -> None:
    ln, emb = nn.LayerNorm(6), nn.Embedding(10, 6)
    x, idx = _rand(2, 5, 6), Tensor(np.array([[1, 9, -2], [0, 3, 3]], np.int32)).realize()
    _same_graph(lambda: ln(x))
    _same_graph(lambda: emb(idx))
    _same_graph(lambda: emb(Tensor.arange(4)))
    np.testing.assert_array_equal(emb(idx).numpy(), emb.weight.numpy()[[[1, 9, 8], [0, 3, 3]]])


def test_one_tensor_in_two_places_is_one_input() -> None:
    q, k = _rand(2, 4, 8), _rand(2, 4, 8, seed=1)
    _same_graph(lambda: q.scaled_dot_product_attention(q, q))
    _same_graph(lambda: q.scaled_dot_product_attention(k, q))  # a template of its own: two inputs, not one
    with direct():
        ref = q.scaled_dot_product_attention(k, k)
    assert q.scaled_dot_product_attention(k, k).uop is ref.uop


def test_arguments_that_build_differently_get_templates_of_their_own() -> None:
    x = _rand(3, 4)
    for eps in (0.0, -0.0, 1e-5, 1, True):  # 0.0 and -0.0 are equal keys to a dict: not to a template
        with direct():
            ref = x.layernorm(eps=eps)
        assert x.layernorm(eps=eps).uop is ref.uop
    assert x.layernorm(axis=(0, 1)).uop is not x.layernorm(axis=1).uop


def test_dropout_draws_anew_each_call() -> None:
    q = _rand(2, 4, 8)
    a, b = (q.scaled_dot_product_attention(q, q, dropout_p=0.5) for _ in range(2))
    assert a.uop is not b.uop


def test_what_cannot_be_templated_is_built_directly() -> None:
    calls = []

    @templated
    def holds_its_output(x: Tensor) -> Tensor:  # a gradient rule holding the template's own graph
        calls.append(x)
        out = x.exp()
        out.uop.__dict__[OWN_GRADIENT] = ((x.uop,), lambda g, xs, need, kept=out: (g.mul(kept),))
        return out

    @templated
    def reads(x: Tensor) -> Tensor:  # reads a value: fails on placeholders, so direct builds (which may read)
        calls.append(x)
        return x * float(x.sum().item())

    x = _rand(4)
    for _ in range(2):
        assert holds_its_output(x).uop.__dict__[OWN_GRADIENT][0] == (x.uop,)
        np.testing.assert_allclose(reads(x).numpy(), x.numpy() * x.numpy().sum(), rtol=1e-6)
    # each call built directly (after one try on placeholders each)
    assert sum(c is x for c in calls) == 4 and len(calls) == 6


def test_symbolic_and_multi_device_inputs_are_built_directly() -> None:
    from uopviz import Variable
    x = _rand(8, 6)
    n = Variable("n", 1, 8).bind(5)
    sliced = x[:n]
    with direct():
        ref = sliced.layernorm()
    assert sliced.layernorm().uop is ref.uop
    shared = Tensor(np.ones((4, 6), np.float32), device=("CPU:0", "CPU:1"))
    np.testing.assert_allclose(shared.gelu().numpy(), Tensor(np.ones((4, 6), np.float32)).gelu().numpy())


def test_a_trace_notes_the_composite_each_node_came_from() -> None:
    from uopviz.trace.origins import noting
    x = _rand(3, 4)
    x.gelu()  # the template exists
    with noting({}) as m:
        out = x.gelu()
    assert m[out.uop].op == "Tensor.gelu"
    assert all(isinstance(u, UOp) for u in m) and Ops.PARAM not in {u.op for u in m}
