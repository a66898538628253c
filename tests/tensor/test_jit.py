"""@uopviz.jit: the second call of a signature captures the kernel launches, later calls replay them without
scheduling or compiling, symbolic sizes replay too; what cannot be replayed says why. Checked against NumPy on
every device."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import uopviz
import uopviz.realize
from uopviz import Tensor
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.tensor import FunctionTraceError, JitError

RNG = np.random.default_rng(5)
W1 = RNG.random((24, 10), dtype=np.float32) - 0.5
W2 = RNG.random((10, 3), dtype=np.float32) - 0.5


def mlp_np(x: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ W1, 0) @ W2
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture
def work(device: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many schedules and compiles the test caused."""
    counts = {"schedules": 0, "compiles": 0}
    rt = devices.get(device)
    real_compile, real_schedule = rt.compile, uopviz.realize.schedule

    def compile_(kernel: Any) -> Any:
        counts["compiles"] += 1
        return real_compile(kernel)

    def schedule_(*a: Any, **k: Any) -> Any:
        counts["schedules"] += 1
        return real_schedule(*a, **k)

    monkeypatch.setattr(rt, "compile", compile_)
    monkeypatch.setattr(uopviz.realize, "schedule", schedule_)
    yield counts


def test_replays_neither_schedule_nor_compile(device: str, work: dict[str, int]) -> None:
    w1, w2 = Tensor(W1, device=device), Tensor(W2, device=device)

    @uopviz.jit
    def mlp(x: Tensor) -> Tensor:
        return ((x @ w1).relu() @ w2).softmax(-1)

    inputs = [RNG.random((7, 24), dtype=np.float32) for _ in range(5)]
    xs = [Tensor(x, device=device).realize() for x in inputs]
    for k, (x, t) in enumerate(zip(inputs, xs)):
        np.testing.assert_allclose(mlp(t).numpy(), mlp_np(x), rtol=1e-5, atol=1e-6)
        if k == 1:
            assert mlp.captures == 1  # type: ignore[attr-defined]
            before = dict(work)
    assert work == before  # calls 3..5: replays only


def test_a_varying_batch_size_replays(device: str, work: dict[str, int]) -> None:
    w1, w2 = Tensor(W1, device=device), Tensor(W2, device=device)
    batch = uopviz.Variable("batch", 1, 32)

    @uopviz.jit
    def mlp(x: Tensor) -> Tensor:
        return ((x @ w1).relu() @ w2).softmax(-1)

    data = RNG.random((32, 24), dtype=np.float32)
    full = Tensor(data, device=device)
    sizes = (4, 9, 13, 30, 1)
    xs = [full[:batch.bind(n)].realize() for n in sizes]
    for k, (n, x) in enumerate(zip(sizes, xs)):
        got = mlp(x)
        assert got.shape[0].render() == f"batch={n}"
        np.testing.assert_allclose(got.numpy(), mlp_np(data[:n]), rtol=1e-5, atol=1e-6)
        if k == 1:
            before = dict(work)
    assert mlp.captures == 1 and work == before  # type: ignore[attr-defined]


def test_a_new_signature_is_captured_apart() -> None:
    @uopviz.jit
    def twice(x: Tensor) -> Tensor:
        return x * 2

    for shape in [(3,), (3,), (4,), (3,), (4,), (4,), (3, 1)]:
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        np.testing.assert_array_equal(twice(Tensor(x)).numpy(), x * 2)
    assert twice.captures == 2  # type: ignore[attr-defined]  ((3,) and (4,); (3, 1) was called once)


def test_a_kept_result_is_not_overwritten_and_a_dropped_one_lends_its_memory() -> None:
    @uopviz.jit
    def plus(x: Tensor) -> Tensor:
        return x + 1

    outs = [plus(Tensor(np.full(3, k, np.float32))) for k in range(6)]  # calls 3..6 replay
    for k, out in enumerate(outs):
        np.testing.assert_array_equal(out.numpy(), [k + 1] * 3)
    x = Tensor(np.full(3, 9, np.float32)).realize()
    y = plus(x)
    address = buffers.handle(y.uop.src[0]).address
    del y  # the result dies: the next replay writes its buffer again
    again = plus(x)
    assert buffers.handle(again.uop.src[0]).address == address
    np.testing.assert_array_equal(again.numpy(), [10] * 3)


def test_an_output_fed_back_as_the_next_input(device: str) -> None:
    """h = f(h): each replay reads the last result while it writes its own (a matmul reads every element of h for
    each one it writes), which must be other memory."""
    w = (RNG.random((64, 64), dtype=np.float32) - 0.5) / 4
    wt = Tensor(w, device=device)

    @uopviz.jit
    def step(h: Tensor) -> Tensor:
        return (h @ wt).tanh()

    h, ref = Tensor(np.ones((8, 64), np.float32), device=device), np.ones((8, 64), np.float32)
    for _ in range(6):
        h, ref = step(h), np.tanh(ref @ w)
        np.testing.assert_allclose(h.numpy(), ref, rtol=1e-4, atol=1e-5)


def test_what_cannot_be_replayed_says_why() -> None:
    x = Tensor(np.ones(3, np.float32))

    @uopviz.jit
    def reads(t: Tensor) -> Tensor:
        return t * float(t.sum().numpy())

    @uopviz.jit
    def same(t: Tensor) -> Tensor:
        return t

    reads(x)  # the first call runs as it is
    with pytest.raises(JitError, match="reads a value"):
        reads(x)
    same(x)
    with pytest.raises(JitError, match="ran no kernel"):
        same(x)
    with pytest.raises(JitError, match="distinct Tensors as positional arguments only"):
        same(x, 2)
    with pytest.raises(JitError, match="returned int"):
        uopviz.jit(lambda t: 3)(x)

    @uopviz.jit
    def noisy(t: Tensor) -> Tensor:
        return t + Tensor.rand(3)

    noisy(x)
    with pytest.raises(JitError, match="draws random numbers from the global generator"):  # a replay would repeat them
        noisy(x)
    with pytest.raises(FunctionTraceError, match="draws random numbers from the global generator"):
        uopviz.function(lambda t: t.dropout(0.5))(x)


def test_a_model_object_is_jitted_and_named_by_its_class() -> None:
    from uopviz import nn
    layer = nn.Linear(4, 2)
    step = uopviz.jit(layer)
    x = np.ones((3, 4), np.float32)
    want = x @ layer.weight.numpy().T + layer.bias.numpy()
    for _ in range(3):
        np.testing.assert_allclose(step(Tensor(x)).numpy(), want, rtol=1e-6)
    assert step.captures == 1  # type: ignore[attr-defined]
    with pytest.raises(JitError, match="@jit Linear takes distinct Tensors"):
        step(Tensor(x), 2)
