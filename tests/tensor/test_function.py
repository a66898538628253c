"""@uopviz.function: traced once per signature, scheduled and compiled once, called with new inputs after; tuple
returns, nesting, closures, symbolic sizes; what cannot be traced says why. Checked against NumPy on every device."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz.tensor import FunctionTraceError
from uopviz.uop.ops import Ops

RNG = np.random.default_rng(11)
W = RNG.random((5, 3), dtype=np.float32)
B = RNG.random(3, dtype=np.float32)


def test_a_function_compiles_once_for_three_inputs(device: str, compiles: list[str]) -> None:
    @uopviz.function
    def layer(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        return (x @ w + b).relu().softmax(-1)

    w, b = Tensor(W, device=device), Tensor(B, device=device)
    after_first = None
    for _ in range(3):
        x = RNG.random((7, 5), dtype=np.float32) - 0.5
        z = np.maximum(x @ W + B, 0)
        want = np.exp(z - z.max(-1, keepdims=True)) / np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)
        np.testing.assert_allclose(layer(Tensor(x, device=device), w, b).numpy(), want, rtol=1e-5, atol=1e-6)
        after_first = after_first if after_first is not None else len(compiles)
    assert layer.traces == 1 and after_first > 0 and len(compiles) == after_first, compiles  # type: ignore[attr-defined]


def test_tuple_returns_nesting_and_closures(device: str) -> None:
    b = Tensor(B, device=device)
    scale = Tensor(np.float32(3), device=device) * 2  # lazy, closed over: its data becomes an implicit argument

    @uopviz.function
    def affine(x: Tensor, w: Tensor) -> Tensor:
        return x @ w + b

    @uopviz.function
    def both(x: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
        y = affine(x, w)  # a function calling a function
        return y * scale, y.sum(0)

    x = RNG.random((4, 5), dtype=np.float32)
    big, col = both(Tensor(x, device=device), Tensor(W, device=device))
    np.testing.assert_allclose(big.numpy(), (x @ W + B) * 6, rtol=1e-5)
    np.testing.assert_allclose(col.numpy(), (x @ W + B).sum(0), rtol=1e-5)
    assert big.shape == (4, 3) and col.shape == (3,)


def test_new_signatures_trace_again() -> None:
    @uopviz.function
    def double(x: Tensor, k: int) -> Tensor:
        return x * k

    for shape, dtype, k in [((3,), np.float32, 2), ((4,), np.float32, 2), ((3,), np.int32, 2), ((3,), np.float32, 5),
                            ((3,), np.float32, 2)]:
        x = np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
        np.testing.assert_array_equal(double(Tensor(x), k).numpy(), x * k)
    assert double.traces == 4  # type: ignore[attr-defined]  (the last call repeats the first signature)


def test_a_symbolic_input_shares_one_trace_and_one_compile(device: str, compiles: list[str]) -> None:
    @uopviz.function
    def norm(x: Tensor) -> Tensor:
        return x - x.mean(0)

    n = uopviz.Variable("n", 1, 30)
    a = RNG.random((30, 4), dtype=np.float32)
    counts = []
    for size in (3, 10, 29):
        got = norm(Tensor(a, device=device)[:n.bind(size)]).numpy()
        np.testing.assert_allclose(got, a[:size] - a[:size].mean(0), rtol=1e-5, atol=1e-6)
        counts.append(len(compiles))
    assert norm.traces == 1 and counts == [counts[0]] * 3  # type: ignore[attr-defined]


def test_returning_an_input_gives_a_copy() -> None:
    @uopviz.function
    def same(x: Tensor) -> Tensor:
        return x

    x = Tensor(np.arange(5, dtype=np.float32))
    y = same(x)
    np.testing.assert_array_equal(y.numpy(), np.arange(5))
    x.assign(Tensor(np.zeros(5, np.float32)))
    np.testing.assert_array_equal(y.numpy(), np.arange(5))


def test_the_trace_shows_the_function_and_its_call() -> None:
    @uopviz.function
    def gelu_ish(x: Tensor) -> Tensor:
        return x * (x * 1.5).sigmoid()

    with uopviz.trace() as tr:
        gelu_ish(Tensor(np.ones(6, np.float32))).numpy()
    kinds = [(c.name, c.kind) for c in tr.contexts]
    assert ("function gelu_ish", "function") in kinds and kinds[0] == ("schedule", "schedule")
    planned = tr.uop(next(p for p in tr.contexts[0].passes if p.name == "memory plan").output)
    calls = [u for u in planned.toposort() if u.op is Ops.CALL]
    assert [c.src[0].op for c in calls] == [Ops.FUNCTION] and calls[0].src[0].arg == "gelu_ish"
    tensor_graph = tr.uop(tr.contexts[0].passes[0].input)
    assert any(u.op is Ops.GETTUPLE for u in tensor_graph.toposort())


def test_what_cannot_be_traced_says_why() -> None:
    @uopviz.function
    def branches(x: Tensor) -> Tensor:
        return x if x.sum() > 0 else -x

    @uopviz.function
    def reads(x: Tensor) -> Tensor:
        return x * x.max().item()

    @uopviz.function
    def returns_a_number(x: Tensor, *rest: Any) -> float:
        return 3.0

    x = Tensor(np.ones(3, np.float32))
    with pytest.raises(FunctionTraceError, match="cannot trace branches: its Python control flow depends on a Tensor"):
        branches(x)
    with pytest.raises(FunctionTraceError, match="cannot trace reads: it reads a value"):
        reads(x)
    with pytest.raises(FunctionTraceError, match="returned float; a @function returns a Tensor"):
        returns_a_number(x)
    with pytest.raises(FunctionTraceError, match="hashable values"):
        returns_a_number(x, {1, 2})


def test_an_input_it_does_not_read_and_a_call_with_other_shapes(device: str) -> None:
    """A Function is called with the arguments its body reads (an input used for nothing, or only for its shape, is
    not one), and the Params of a function it calls are that function's own, whatever their shapes."""
    @uopviz.function
    def first(x: Tensor, unused: Tensor, like: Tensor) -> Tensor:
        return x * 2 + like.zeros_like().sum()

    a = np.array([3.0, 4.0], np.float32)
    got = first(Tensor(a, device=device), Tensor(np.ones(3, np.float32), device=device),
                Tensor(np.ones(5, np.float32), device=device))
    np.testing.assert_array_equal(got.numpy(), a * 2)

    @uopviz.function
    def total(y: Tensor) -> Tensor:
        return y.sum() * 2

    @uopviz.function
    def outer(x: Tensor, y: Tensor) -> Tensor:  # total's Param 0 has 7 elements, outer's 2
        return x * total(y)

    got = outer(Tensor(a, device=device), Tensor(np.arange(7, dtype=np.float32), device=device))
    np.testing.assert_array_equal(got.numpy(), a * 42)
