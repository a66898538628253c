"""realize()'s schedule cache (uopviz.realize.schedule_cache): a realize whose graph has the structure of an earlier
one runs that one's kernels on its own buffers without scheduling, and gives NumPy's answers; a graph that differs
in a constant, a shape, a dtype, a device or in which reads are of the same buffer is scheduled anew; assign writes
its targets; a trace still records every pass; a change of the tuning state or of compile_kernel's programs is not
served stale; symbolic sizes reuse one schedule for every value. On every device (CPU, CL, PYTHON)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import uopviz
import uopviz.realize
from uopviz import Tensor, nn
from uopviz import compiler as compiler_mod
from uopviz.realize import schedule_cache
from uopviz.runtime import device as devices

RNG = np.random.default_rng(29)


def data(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.fixture
def schedules(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A fresh cache (so earlier tests' schedules do not count) and the number of schedules the test runs."""
    schedule_cache.clear()
    monkeypatch.setattr(schedule_cache, "enabled", True)
    counted = [0]
    real = uopviz.realize.schedule

    def schedule_(*a: Any, **k: Any) -> Any:
        counted[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(uopviz.realize, "schedule", schedule_)
    yield counted
    schedule_cache.clear()


def program(x: Tensor, y: Tensor) -> Tensor:
    return ((x @ y).relu() * 2.0 + x.sum(1, keepdim=True)).exp2().mean(0)


def program_np(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.exp2(np.maximum(x @ y, 0) * 2.0 + x.sum(1, keepdims=True)).mean(0)


def test_the_same_structure_with_other_data_is_not_scheduled_again(device: str, schedules: list[int]) -> None:
    arrays = [(data(5, 6) * 0.3, data(6, 6) * 0.3) for _ in range(4)]
    results = []
    for a, b in arrays:
        results.append(program(Tensor(a, device=device), Tensor(b, device=device)).realize())
    assert schedules[0] == 1 and (schedule_cache.hits, schedule_cache.misses) == (3, 1)
    for r, (a, b) in zip(results, arrays):  # each result its own buffer: a later run does not overwrite it
        np.testing.assert_allclose(r.numpy(), program_np(a, b), rtol=1e-5, atol=1e-6)


def test_reading_one_buffer_twice_is_another_structure(device: str, schedules: list[int]) -> None:
    """x + 2y of two buffers and of one buffer twice are different graphs (one Buffer node or two): neither is served
    the other's schedule, and each repeat is."""
    a, b = data(4, 3), data(4, 3)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)

    def f(x: Tensor, y: Tensor) -> Tensor:
        return (x + y * 2.0).sum(0)

    np.testing.assert_allclose(f(ta, tb).numpy(), (a + b * 2).sum(0), rtol=1e-6)
    np.testing.assert_allclose(f(ta, ta).numpy(), (a * 3).sum(0), rtol=1e-6)
    assert schedules[0] == 2
    np.testing.assert_allclose(f(tb, tb).numpy(), (b * 3).sum(0), rtol=1e-6)
    np.testing.assert_allclose(f(tb, ta).numpy(), (b + a * 2).sum(0), rtol=1e-6)
    assert schedules[0] == 2 and schedule_cache.hits == 2
    # a view of one buffer against a view of another: transposes of the same and of different buffers
    sq, sq2 = data(4, 4), data(4, 4)
    s1, s2 = Tensor(sq, device=device), Tensor(sq2, device=device)
    np.testing.assert_allclose((s1 + s1.T).numpy(), sq + sq.T, rtol=1e-6)
    np.testing.assert_allclose((s1 + s2.T).numpy(), sq + sq2.T, rtol=1e-6)
    np.testing.assert_allclose((s2 + s2.T).numpy(), sq2 + sq2.T, rtol=1e-6)
    assert schedules[0] == 4


@pytest.mark.parametrize("change", ["constant", "negative zero", "shape", "dtype"])
def test_a_graph_differing_only_in_one_thing_is_scheduled_again(device: str, schedules: list[int],
                                                                 change: str) -> None:
    a = data(3, 4)
    x = Tensor(a, device=device)
    np.testing.assert_allclose((x * 2.0 + 0.0).numpy(), a * 2, rtol=1e-6)
    if change == "constant":
        np.testing.assert_allclose((x * 3.0 + 0.0).numpy(), a * 3, rtol=1e-6)
    elif change == "negative zero":  # 0.0 and -0.0 are equal floats but other constants
        got = (Tensor(np.full((3, 4), -0.0, np.float32), device=device) * 2.0 + -0.0).numpy()
        assert np.signbit(got).all()
    elif change == "shape":
        b = data(4, 4)
        np.testing.assert_allclose((Tensor(b, device=device) * 2.0 + 0.0).numpy(), b * 2, rtol=1e-6)
    else:
        c = np.arange(12, dtype=np.int32).reshape(3, 4)
        np.testing.assert_array_equal((Tensor(c, device=device) * 2 + 0).numpy(), c * 2)
    assert schedules[0] == 2 and schedule_cache.hits == 0


def test_another_device_is_another_structure(device: str, schedules: list[int]) -> None:
    other = "PYTHON" if device != "PYTHON" else "CPU"
    a = data(6)
    for d in (device, other):
        np.testing.assert_allclose((Tensor(a, device=d) * 2.0).numpy(), a * 2, rtol=1e-6)
    assert schedules[0] == 2 and schedule_cache.hits == 0


def test_assign_in_place(device: str, schedules: list[int]) -> None:
    """A parameter-like update p <- p*0.5 + q, p read by its own value: the same buffers and other ones."""
    p0, q = data(8), data(8)
    p, tq = Tensor(p0.copy(), device=device).realize(), Tensor(q, device=device)
    want = p0.copy()
    for _ in range(4):
        p.assign(p * 0.5 + tq)
        want = want * np.float32(0.5) + q
        np.testing.assert_allclose(p.numpy(), want, rtol=1e-6)
    first = schedules[0]
    assert schedule_cache.hits > 0
    other = Tensor(p0.copy(), device=device).realize()  # another target: the same schedule, its own buffer
    other.assign(other * 0.5 + tq)
    np.testing.assert_allclose(other.numpy(), p0 * np.float32(0.5) + q, rtol=1e-6)
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-6)
    assert schedules[0] == first
    # writing into a buffer the value does not read, then one it does: other structures
    r = Tensor(np.zeros(8, np.float32), device=device).realize()
    r.assign(tq * 3.0)
    np.testing.assert_allclose(r.numpy(), q * 3, rtol=1e-6)
    r.assign(r * 3.0)
    np.testing.assert_allclose(r.numpy(), q * 9, rtol=1e-6)


def test_assign_of_several_targets_reading_each_other(device: str, schedules: list[int]) -> None:
    """a, b <- b, a (a swap reads what is written): the values are computed before either is written, every time."""
    x, y = data(5), data(5)
    a, b = Tensor(x, device=device).realize(), Tensor(y, device=device).realize()
    for k in range(3):
        uopviz.tensor.assign_all([a, b], [b + 0.0, a + 0.0])
        np.testing.assert_array_equal(a.numpy(), y if k % 2 == 0 else x)
        np.testing.assert_array_equal(b.numpy(), x if k % 2 == 0 else y)
    assert schedule_cache.hits > 0


def test_an_assign_decides_whether_it_writes_in_place_once_per_structure(device: str, schedules: list[int],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """An optimizer-like update in place, then a swap (which must go through new memory): each structure's answer is
    worked out once and kept, and every step still gives NumPy's values."""
    decided: list[bool] = []
    real = uopviz.realize.writes_in_place

    def writes_in_place_(*a: Any) -> bool:
        decided.append(real(*a))
        return decided[-1]
    monkeypatch.setattr(uopviz.realize, "writes_in_place", writes_in_place_)
    x, y = data(6), data(6)
    a, b = Tensor(x, device=device).realize(), Tensor(y, device=device).realize()
    want_a = x.copy()
    for _ in range(3):
        uopviz.tensor.assign_all([a], [a * 0.5 + b])
        want_a = want_a * np.float32(0.5) + y
    np.testing.assert_allclose(a.numpy(), want_a, rtol=1e-6)
    for k in range(3):
        uopviz.tensor.assign_all([a, b], [b + 0.0, a + 0.0])
        np.testing.assert_array_equal(b.numpy(), want_a if k % 2 == 0 else y)
    assert decided == [True, False]


def test_a_value_realized_later_from_the_same_graph(device: str, schedules: list[int]) -> None:
    """h is fused into out's kernel when out is realized first, and computed alone later: two structures."""
    for _ in range(2):
        a = data(4, 4)
        x = Tensor(a, device=device)
        h = (x * 2.0).exp2()
        out = (h + 1.0).sum()
        np.testing.assert_allclose(out.numpy(), (np.exp2(a * 2) + 1).sum(), rtol=1e-5)
        np.testing.assert_allclose(h.numpy(), np.exp2(a * 2), rtol=1e-5)
    assert schedules[0] == 2 and schedule_cache.hits == 2


def test_a_training_step_and_its_gradients(device: str, schedules: list[int]) -> None:
    """Eager Adam steps of a small MLP: from the second step every realize is a hit, and the losses are those of
    the same steps scheduled every time."""
    def losses(cached: bool) -> list[float]:
        schedule_cache.enabled = cached
        Tensor.manual_seed(3)
        rng = np.random.default_rng(3)
        l1, l2 = nn.Linear(6, 8, device=device), nn.Linear(8, 3, device=device)
        for layer in (l1, l2):
            layer.weight.assign(rng.standard_normal(tuple(layer.weight.shape)).astype(np.float32) * 0.3)
        opt = nn.optim.Adam([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.05)
        out = []
        for _ in range(4):
            x = Tensor(rng.standard_normal((5, 6)).astype(np.float32), device=device)
            y = Tensor(rng.integers(0, 3, 5).astype(np.int32), device=device)
            opt.zero_grad()
            loss = l2(l1(x).relu()).cross_entropy(y).backward()
            opt.step()
            out.append(loss.item())
            if len(out) == 2:
                hits = schedule_cache.hits
        assert not cached or schedule_cache.hits - hits >= 2 * 2  # steps 3 and 4: backward, update (in place)
        return out

    assert losses(True) == losses(False)


def test_a_trace_records_the_passes_of_a_cached_structure(schedules: list[int]) -> None:
    x = Tensor(data(4, 4))
    (x * 2.0).sum(0).realize()
    (x * 2.0).sum(0).realize()
    assert schedule_cache.hits == 1
    with uopviz.trace() as tr:
        (Tensor(data(4, 4)) * 2.0).sum(0).realize()
    assert schedule_cache.hits == 1 and schedules[0] == 2
    assert any(c.kind == "schedule" for c in tr.contexts)


def test_a_change_of_the_tuning_state_schedules_again(schedules: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    from uopviz.search import policy
    f = lambda: (Tensor(data(8)) + 1.0).sum().realize()  # noqa: E731
    f()
    f()
    assert schedules[0] == 1
    real = policy.tuning_state
    monkeypatch.setattr(policy, "tuning_state", lambda: (*real()[:2], 7))  # as if UOPVIZ_BEAM=7 were set now
    f()
    assert schedules[0] == 2
    f()
    assert schedules[0] == 2


def test_a_program_compile_kernel_dropped_is_compiled_again(schedules: list[int],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import OrderedDict
    a = data(8)
    np.testing.assert_allclose((Tensor(a) * 5.0).numpy(), a * 5, rtol=1e-6)
    compiled: list[str] = []
    rt = devices.get("CPU")
    real = rt.compile
    monkeypatch.setattr(rt, "compile", lambda k: compiled.append(k.name) or real(k))
    monkeypatch.setattr(compiler_mod, "_programs", OrderedDict())
    np.testing.assert_allclose((Tensor(a) * 5.0).numpy(), a * 5, rtol=1e-6)
    assert schedules[0] == 2 and len(compiled) == 1


def test_a_growing_symbolic_length_is_one_schedule(device: str, schedules: list[int]) -> None:
    n = uopviz.Variable("n", 1, 12)
    full = data(12, 5)
    base = Tensor(full, device=device)
    for k in range(2, 12):
        x = base[:n.bind(k)]
        got = (x.softmax(0) * x).sum(0).numpy()
        e = np.exp(full[:k] - full[:k].max(0))
        np.testing.assert_allclose(got, (e / e.sum(0) * full[:k]).sum(0), rtol=1e-5, atol=1e-6)
    assert schedules[0] == 1 and schedule_cache.hits == 9


def test_a_jit_capture_records_cached_launches(device: str, schedules: list[int]) -> None:
    """An eager realize hits the cache; @jit's capture of the same work (its second call) records the hit's
    launches, and its replays give the right answers."""
    w = Tensor(data(4, 3), device=device)
    wn = w.numpy()

    @uopviz.jit
    def f(x: Tensor) -> Tensor:
        return (x @ w).relu() + 1.0

    arrays = [data(2, 4) for _ in range(5)]
    for a in arrays:
        np.testing.assert_allclose(f(Tensor(a, device=device)).numpy(), np.maximum(a @ wn, 0) + 1, rtol=1e-5)
    assert f.captures == 1 and schedules[0] == 1  # type: ignore[attr-defined]


def test_a_hits_intermediates_come_from_the_memory_pool_and_go_back(device: str, schedules: list[int],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A hit runs its intermediates in memory of their own, with no Buffer node: taken from the pool and given back
    when the hit returns, so repeats allocate only their outputs (which the caller keeps) once the pool has them."""
    runtime = devices.get(device)
    allocs = [0]
    real = runtime.alloc

    def alloc(*a: Any) -> Any:
        allocs[0] += 1
        return real(*a)

    monkeypatch.setattr(runtime, "alloc", alloc)
    a, b = data(5, 6) * 0.3, data(6, 6) * 0.3
    x, y = Tensor(a, device=device).realize(), Tensor(b, device=device).realize()
    for _ in range(3):  # the schedule kept, then the pool filled by a hit's intermediates and a dropped output
        program(x, y).realize()
    allocs[0] = 0
    for _ in range(3):
        np.testing.assert_allclose(program(x, y).numpy(), program_np(a, b), rtol=1e-5, atol=1e-6)
    assert schedule_cache.hits == 5 and allocs[0] == 0


def test_off_schedules_every_time(schedules: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule_cache, "enabled", False)
    for _ in range(3):
        (Tensor(data(4)) * 2.0).realize()
    assert schedules[0] == 3 and schedule_cache.hits == schedule_cache.misses == 0


def test_the_cache_is_bounded(schedules: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule_cache, "max_entries", 3)
    for k in range(6):
        (Tensor(data(4)) * float(k)).realize()
    assert len(schedule_cache) == 3
    (Tensor(data(4)) * 0.0).realize()  # the oldest was dropped
    (Tensor(data(4)) * 5.0).realize()  # the newest is kept
    assert schedules[0] == 7 and schedule_cache.hits == 1


def test_random_numbers_are_not_repeated(schedules: list[int]) -> None:
    """The global generator's counter moves with every draw: a second draw of the same shape is other numbers."""
    a, b = Tensor.rand(64).numpy(), Tensor.rand(64).numpy()
    assert not np.array_equal(a, b)


def test_a_schedule_over_several_devices_is_not_kept(schedules: list[int]) -> None:
    """Its devices' kernels run concurrently (realize.run_schedule): it is scheduled every time."""
    x = data(8)
    for _ in range(2):
        t = Tensor(x).scatter_to(("CPU:0", "CPU:1"))
        np.testing.assert_allclose((t * 2.0).sum().numpy(), (x * 2).sum(), rtol=1e-5)
    assert schedule_cache.hits == 0 and len(schedule_cache) == 0 and schedules[0] == 2


def test_a_size_over_a_bound_variable_simplifies_as_the_variable_does() -> None:
    """The front-end simplifies a size over n.bind(k) once per expression over n (uopviz.tensor.util.sym): the
    result is d.simplify()'s for every value, and a size that also uses n unbound is simplified as it is."""
    from uopviz.tensor.util import sym
    n = uopviz.Variable("n", 1, 64)
    for k in (1, 7, 64):
        b = n.bind(k)
        for d in ((b * 4 + 8) // 4 - 2, (b + 3) * 2 - b - b, b * 0 + 5, ((b * 6) % 3) + b // 1):
            want = d.simplify()
            assert sym(d) == (int(want.arg.value) if want.is_const else want)
        mixed = b - n
        assert sym(mixed) is mixed.simplify()
