"""`uopviz.profile()`, `Tensor.profile()` and profiled @jit replays: every launch is counted once, in order, with its
device and the line of user code that ran it; shares add up to 1 over launches, kernels and lines alike; the launches'
times add up to the profile's kernel time, inside its wall time; results stay those of NumPy on every device."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import uopviz
from tests.lines import here
from uopviz import Tensor
from uopviz.profile import Profile
from uopviz.profile.roofs import Roofs
from uopviz.realize import capture

RNG = np.random.default_rng(11)
A, B = RNG.random((9, 13), dtype=np.float32), RNG.random((13, 6), dtype=np.float32)


def _check_shares(p: Profile) -> None:
    for rows in (p.rows(), p.by_kernel(), p.by_line(), *(line["kernels"] for line in p.by_line())):
        assert all(0 <= r["share"] <= 1 for r in rows)
    for rows in (p.rows(), p.by_kernel(), p.by_line()):
        assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert sum(r["launches"] for r in p.by_kernel()) == sum(r["launches"] for r in p.by_line()) == len(p.runs)
    assert p.kernel_s == pytest.approx(sum(r.time_s for r in p.runs))
    assert 0 < p.kernel_s <= p.wall_s
    assert all(0 < r.device_s for r in p.runs)


def test_every_launch_once_in_order_by_line(device: str) -> None:
    """Launches are filed under the Tensor line whose op made each kernel's value (the matmul's line, the
    softmax's), and each also says the line that ran it (the realize, the numpy)."""
    a, b = Tensor(A, device=device), Tensor(B, device=device)
    with capture() as launches, uopviz.profile() as p:
        made_c = here() + 1
        c = (a @ b).relu().contiguous()
        first = here() + 1  # the line that runs its kernel: the next
        c.realize()
        made_d = here() + 1
        d = (c.softmax(-1) * 2).sum()
        second = here() + 1
        got = d.numpy()
    assert [r.kernel for r in p.runs] == [launch.kernel.name for launch in launches]
    assert {r.device for r in p.runs} == {device}
    assert {r.line["line"] for r in p.runs if r.line} == {first, second}
    by_line = {line["line"]["line"]: line for line in p.by_line()}
    assert set(by_line) == {made_c, made_d}
    assert by_line[made_c]["op"] == "Tensor.relu" and not by_line[made_c]["backward"]  # seen through contiguous
    assert by_line[made_d]["op"] in ("Tensor.softmax", "Tensor.__mul__", "Tensor.sum")
    assert all(line["line"]["file"].endswith("test_profile.py") for line in p.by_line())
    assert p.by_line()[0]["line"]["function"] == "test_every_launch_once_in_order_by_line"
    _check_shares(p)
    want = (np.exp(np.maximum(A @ B, 0) - np.maximum(A @ B, 0).max(-1, keepdims=True)))
    np.testing.assert_allclose(got, (want / want.sum(-1, keepdims=True) * 2).sum(), rtol=1e-5)


def test_a_gradient_kernel_is_filed_under_its_forward_line(device: str) -> None:
    """backward's kernels are filed under the line of the forward op whose gradient they compute, marked as the
    backward; the forward's under the same line, unmarked (sizes at which the gradients get kernels of their own,
    not one kernel with the loss)."""
    a, b = RNG.random((64, 80), dtype=np.float32), RNG.random((80, 30), dtype=np.float32)
    x, w = Tensor(a, requires_grad=True, device=device), Tensor(b, requires_grad=True, device=device)
    with uopviz.profile() as p:
        made = here() + 1
        y = (x @ w).relu()
        loss = y.sum()
        loss.backward()  # realizes the gradients
    lines = {(line["line"]["line"], line["backward"]): line for line in p.by_line()}
    assert (made, False) in lines and (made, True) in lines
    assert lines[made, True]["op"] in ("Tensor.__matmul__", "Tensor.relu")
    assert all(r.origin is not None for r in p.runs)
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), a.T @ (a @ b > 0), rtol=1e-5)


def test_jit_replays_are_profiled(device: str) -> None:
    w = Tensor(B, device=device).realize()
    step = uopviz.jit(lambda x: (x @ w).relu().sum(0))
    x = Tensor(A, device=device).realize()
    for _ in range(3):  # run, capture, replay
        step(x)
    (replay,) = step.replays.values()
    with uopviz.profile() as p:
        out = step(x)
        step(x)
    assert [r.kernel for r in p.runs] == [launch.kernel.name for launch in replay.launches] * 2
    assert [k["launches"] for k in p.by_kernel()] == [2] * len(replay.launches)
    _check_shares(p)
    np.testing.assert_allclose(out.numpy(), np.maximum(A @ B, 0).sum(0), rtol=1e-5)


def test_nested_profiles_both_see_the_inner_launches() -> None:
    a = Tensor(A)
    with uopviz.profile() as outer:
        (a + 1).realize()
        with uopviz.profile() as inner:
            (a * 3).realize()
    assert [r.kernel for r in inner.runs] == [r.kernel for r in outer.runs[1:]]
    assert len(outer.runs) == 2


def test_cached_schedules_are_profiled() -> None:
    """A realize the schedule cache answers (the second of one structure) runs its launches through the profile too."""
    a = Tensor(A)
    ((a + 1) * 2).realize()
    with uopviz.profile() as p:
        ((a + 1) * 2).realize()
    assert len(p.runs) == 1


def test_tensor_profile(device: str) -> None:
    t = Tensor(A, device=device) @ Tensor(B, device=device)
    p = t.profile()
    assert t.is_realized and len(p.runs) >= 1
    _check_shares(p)
    np.testing.assert_allclose(t.numpy(), A @ B, rtol=1e-5)


def test_rates_roof_and_bound(fixed_roofs: Roofs) -> None:
    """GFLOP/s and GB/s are work over time; the roof is the larger of the two fractions of the device's roofs (the
    rate over the attainable rate at the kernel's intensity); a kernel above the ridge point is compute-bound."""
    def launch(kernel: str, flops: int, nbytes: int) -> dict[str, object]:  # rates over device_s, shares of time_s
        return {"kernel": kernel, "ast": None, "device": "CPU", "time_s": 0.8, "device_s": 0.5, "flops": flops,
                "bytes": nbytes, "line": None}
    p = Profile.from_dict({"wall_s": 1.0, "roofs": {"CPU": fixed_roofs._asdict()},
                           "launches": [launch("k", 20 * 10**9, 10**9), launch("m", 10**9, 4 * 10**9)]})
    k, m = p.rows()
    assert (k["gflops"], k["gbs"], k["bound"]) == (40.0, 2.0, "compute")  # 20 FLOP/B x 10 GB/s > 100 GFLOP/s
    assert k["roof"] == pytest.approx(0.4)
    assert (m["gflops"], m["gbs"], m["bound"]) == (2.0, 8.0, "memory")
    assert m["roof"] == pytest.approx(0.8)
    assert (k["share"], p.kernel_s, p.device_s) == (0.5, 1.6, 1.0)
    assert p.by_line()[0]["line"] is None and p.by_line()[0]["launches"] == 2


def test_table_shows_lines_and_kernels() -> None:
    a = Tensor(A)
    with uopviz.profile() as p:
        made = here() + 1
        ((a @ Tensor(B)).exp() + 1).sum().realize()
    text = str(p)
    assert f"test_profile.py:{made} in test_table_shows_lines_and_kernels" in text
    assert all(r.kernel in text for r in p.runs)
    assert "launches of" in text and "GFLOP/s" in text and "in kernels as the devices time them" in text
    n = len(p.by_kernel())
    assert n > 1 and f"(and {n - 1} more kernels of this line)" in p.table(top=1)


def test_document_round_trip() -> None:
    with uopviz.profile() as p:
        (Tensor(A) * 2).realize()
    again = Profile.from_dict(p.to_dict())
    assert again.runs == p.runs and again.roofs == p.roofs and again.wall_s == p.wall_s


def test_jit_replays_are_filed_under_the_lines_that_made_them(device: str) -> None:
    """A replayed launch is filed under the line that scheduled it while the step was captured: a realize inside the
    step's function, or (for what the step returns, realized after it) the line that called it for the capture."""
    w = Tensor(B, device=device).realize()
    inside = here() + 3

    def fn(x: Tensor) -> Tensor:
        h = (x @ w).relu().realize()
        return (h * 2).sum(0)
    step = uopviz.jit(fn)
    x = Tensor(A, device=device).realize()
    step(x)
    captured = here() + 1
    step(x)
    with uopviz.profile() as p:
        out = step(x)
    assert {r.line["line"] for r in p.runs if r.line} == {inside, captured}
    assert [line["line"]["function"] for line in p.by_line()] in (["fn", _this()], [_this(), "fn"])
    np.testing.assert_allclose(out.numpy(), (np.maximum(A @ B, 0) * 2).sum(0), rtol=1e-5)


def _this() -> str:
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_code.co_name
