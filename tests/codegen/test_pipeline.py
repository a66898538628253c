"""The lowering pipeline end to end: hand-built kernels and scheduled graphs on every runtime, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz.codegen.linearize import LinearizeError, linearize
from uopviz.dtype import dtypes
from uopviz.pipeline import lower, schedule
from uopviz.realize import KernelArgumentError, realize, run_kernel, to_host
from uopviz.runtime import device as devices
from uopviz.runtime.buffer import from_numpy
from uopviz.schedule import rows
from uopviz.uop.ops import AxisType, Ops, UOp

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]
STAGES = ["Rangeify", "Optimize", "Expand", "Instruction Selection", "Linearize", "Register/Memory Plan", "Render"]


def gemm_kernel(M: int, K: int, N: int, k_type: AxisType = AxisType.REDUCE, n_type: AxisType = AxisType.LOOP) -> UOp:
    """C = A @ B written by hand from Params, Ranges, Index, Load, Reduce, Store and End."""
    c, a, b = UOp.param(0, (M * N,)), UOp.param(1, (M * K,)), UOp.param(2, (K * N,))
    i, j, k = UOp.range(M, 0), UOp.range(N, 1, n_type), UOp.range(K, 2, k_type)
    prod = a.index(i * K + k).load() * b.index(k * N + j).load()
    return UOp.sink(c.index(i * N + j).store(prod.reduce(Ops.ADD, k)).end(i, j))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("types", [(AxisType.REDUCE, AxisType.LOOP), (AxisType.UNROLL, AxisType.UPCAST)])
def test_hand_built_gemm(device: str, types: tuple[AxisType, AxisType]) -> None:
    M, K, N = 5, 7, 3
    rng = np.random.default_rng(0)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    out = run_kernel(gemm_kernel(M, K, N, *types), [np.zeros(M * N, np.float32), a, b], device)[0]
    np.testing.assert_allclose(out.reshape(M, N), a @ b, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_hand_built_elementwise_with_floor_division(device: str) -> None:
    # (i - 5) // 3 and (i - 5) % 3 for i in 0..10: C's / and % truncate; the dialect must floor
    n = 11
    out = UOp.param(0, (2 * n,), dtypes.int32)
    i = UOp.range(n, 0)
    v = (i - 5).cast(dtypes.int32)
    k = UOp.sink(UOp(Ops.GROUP, (out.index(i).store(v // 3), out.index(i + n).store(v % -3))).end(i))
    got = run_kernel(k, [np.zeros(2 * n, np.int32)], device)[0]
    x = np.arange(n) - 5
    np.testing.assert_array_equal(got, np.concatenate([x // 3, x % -3]))


def test_run_kernel_checks_its_arguments() -> None:
    with pytest.raises(KernelArgumentError, match="slots"):
        run_kernel(gemm_kernel(2, 2, 2), [np.zeros(4, np.float32)])
    with pytest.raises(KernelArgumentError, match="slot 1"):
        run_kernel(gemm_kernel(2, 2, 2), [np.zeros(4, np.float32), np.zeros(5, np.float32), np.zeros(4, np.float32)])


def test_linearize_hoists_invariants_and_nests_loops() -> None:
    lin = lower(gemm_kernel(5, 7, 3), devices.get("CPU").target).linear
    ops = [u.op for u in lin.src]
    assert ops.count(Ops.RANGE) == ops.count(Ops.END) == 3
    pos = {u: n for n, u in enumerate(lin.src)}
    ranges = [u for u in lin.src if u.op is Ops.RANGE]
    # i*7 (depends on i only) is computed before the j loop opens
    i7 = next(u for u in lin.src if u.op is Ops.MUL and u.src[0] is ranges[0])
    assert pos[ranges[0]] < pos[i7] < pos[ranges[1]]


def test_linearize_rejects_open_and_twice_closed_ranges() -> None:
    r = UOp.range(4, 0)
    st = UOp.param(0, (4,)).index(r).store(UOp.const(dtypes.float32, 1.0))
    with pytest.raises(LinearizeError, match="no End"):
        linearize(UOp.sink(st))
    with pytest.raises(LinearizeError, match="two Ends"):
        linearize(UOp.sink(st.end(r), UOp.param(1, (4,)).index(r).store(UOp.const(dtypes.float32, 2.0)).end(r)))


@pytest.mark.parametrize("device", DEVICES)
def test_scheduled_reductions_share_registers(device: str) -> None:
    x = np.random.default_rng(1).random((4, 33), dtype=np.float32)
    X = from_numpy(x, device).reshape((4, 33))
    y = X.reduce(Ops.ADD, axes=(1,)) + X.reduce(Ops.MAX, axes=(1,))
    with uopviz.trace() as tr:
        (out,) = realize([y])
    np.testing.assert_allclose(to_host(out), x.sum(1, keepdims=True) + x.max(1, keepdims=True), rtol=1e-5)
    (kctx,) = [c for c in tr.contexts if c.kind == "kernel"]
    lin = tr.uop(next(p for p in kctx.passes if p.name == "register plan").output)
    regs = [u for u in lin.src if u.op is Ops.BUFFER]
    assert len(regs) == 1  # the max reuses the sum's accumulator


def test_trace_of_realize_shows_every_stage() -> None:
    a = from_numpy(np.arange(12, dtype=np.float32)).reshape((3, 4))
    with uopviz.trace() as tr:
        realize([(a * 2).reduce(Ops.ADD, axes=(1,))])
    sched, kern = tr.contexts
    assert (sched.name, sched.kind) == ("schedule", "schedule")
    assert [(p.name, p.stage) for p in sched.passes if p.depth == 0] == [
        ("callify", "Callify"), ("fuse rows", "Rangeify"), ("split reductions", "Rangeify"),
        ("store pads", "Rangeify"), ("store operands", "Rangeify"), ("pack", "Rangeify"), ("kernel split", "Rangeify"),
        ("memory plan", "Register/Memory Plan")]
    assert [(p.name, p.parent) for p in sched.passes if p.depth == 1] == [("buffers to params", 0)]
    assert kern.name == "r_L3_r4"  # realize's default opts: the heuristic unrolls the short reduction
    assert list(dict.fromkeys(p.stage for p in kern.passes)) == STAGES
    assert all(p.error is None for c in tr.contexts for p in c.passes)


def _softmax_like(x: UOp, axis: int) -> UOp:
    m = x.reduce(Ops.MAX, axes=(axis,)).expand(x.shape)
    e = (x - m)
    return e * e.reduce(Ops.ADD, axes=(axis,)).expand(x.shape).recip()


def _calls(y: UOp) -> int:
    return len([u for u in schedule([y]).toposort() if u.op is Ops.CALL])


def test_kernel_split_materializes_broadcast_reductions(monkeypatch: pytest.MonkeyPatch) -> None:
    x = from_numpy(np.ones((4, 5), np.float32)).reshape((4, 5))
    assert _calls(_softmax_like(x, 0)) == 3  # along columns: each reduction is read by every row, so it is stored
    monkeypatch.setattr(rows, "ROW_BYTES", 16)  # rows longer than this are not kept in one kernel
    assert _calls(_softmax_like(x, 1)) == 3
    monkeypatch.undo()
    assert _calls(_softmax_like(x, 1)) == 1  # row reductions whose rows fit stay in their row's kernel
    chain = x
    for _ in range(10):
        chain = (chain * 1.5 + 1.0).maximum(0.0)
    assert _calls(chain) == 1


@pytest.mark.parametrize("device", DEVICES)
def test_a_reduction_two_kernels_would_compute_is_stored_once(device: str) -> None:
    """A matmul's result read by two kernels (the forward's activation and the backward's derivative of it, here two
    outputs) is stored once; a small one is computed again in each, which costs less than a kernel of its own."""
    from uopviz.pipeline import kernels_of
    from uopviz.schedule.split import SHARED_WORK
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((33, 40), dtype=np.float32), rng.standard_normal((40, 65), dtype=np.float32)
    assert 33 * 40 * 65 >= SHARED_WORK
    y = Tensor(a, device=device) @ Tensor(b, device=device)
    relu, sine = y.relu() * 2, y.sin()

    def matmuls(*outs: Tensor) -> int:
        asts = [ast for ast, _ in kernels_of(schedule([o.uop for o in outs]))]
        return sum(any(u.op is Ops.REDUCE for u in ast.toposort()) for ast in asts)
    assert matmuls(relu, sine) == 1
    small = Tensor(a[:4, :5], device=device) @ Tensor(b[:5, :6], device=device)
    assert matmuls(small.relu(), small.sin()) == 2
    relu.realize(sine)
    y64 = a.astype(np.float64) @ b
    np.testing.assert_allclose(relu.numpy(), np.maximum(y64, 0) * 2, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sine.numpy(), np.sin(y64), rtol=1e-4, atol=1e-4)


def test_arange_composition_collapses_to_linear_work() -> None:
    n = 1000
    one = UOp.const(dtypes.int32, 1).reshape((1,)).expand((n,))
    x = one.pad((n - 1,), (2 * n - 1,)).reshape((1, 2 * n - 1)).expand((n + 1, 2 * n - 1))
    x = x.reshape(((n + 1) * (2 * n - 1),)).shrink((0,), (2 * n * n,)).reshape((n, 2 * n)).shrink((0, 0), (n, n))
    ar = x.reduce(Ops.ADD, axes=(1,)).reshape((n,)) - one
    with uopviz.trace() as tr:
        (out,) = realize([ar])
    np.testing.assert_array_equal(to_host(out), np.arange(n))
    lin = tr.uop(next(p for p in tr.contexts[1].passes if p.name == "linearize").output)
    assert [u.op for u in lin.src].count(Ops.RANGE) == 1  # the inner sum was replaced by its closed form


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["gemm", "softmax", "conv2d", "prefix_sum", "scatter_add"])
def test_every_pass_output_is_valid_spec(name: str, device: str) -> None:
    from uopviz.kernels import get

    from uopviz.uop.spec import validate
    z = get(name)
    out, _ = z.build(z.sizes(small=True), device)
    with uopviz.trace() as tr:
        out.realize()
    outputs = [tr.uop(p.output) for c in tr.contexts for p in c.passes if p.output is not None]
    for u in outputs:
        validate(u)
    assert {Ops.LINEAR, Ops.PROGRAM} <= {u.op for u in outputs} and len(outputs) > 10


@pytest.mark.parametrize("device", DEVICES)
def test_memory_plan_reuses_dead_intermediates(device: str) -> None:
    from uopviz.pipeline import kernels_of
    x = np.random.default_rng(2).random((8, 13), dtype=np.float32)
    X = from_numpy(x, device).reshape((8, 13))
    y, want = X, x
    for _ in range(5):  # each step materialized (Contiguous) and read only by the next, through a transpose (so
        y = UOp(Ops.CONTIGUOUS, (y.permute((1, 0)) * 2.0 + 1.0,))  # no two share a kernel: split.siblings)
        want = want.T * 2 + 1
    graph = schedule([y])
    kernels = kernels_of(graph)
    assert len(kernels) == 5
    assert len({b for _, bufs in kernels for b in bufs}) == 4  # x, out, and two intermediates taking turns
    np.testing.assert_allclose(to_host(realize([y])[0]), want, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_keeps_parameters_whose_reads_fold_away(device: str) -> None:
    x = from_numpy(np.arange(5, dtype=np.int32), device).reshape((5,))
    (out,) = realize([x.ne(x)])  # x != x is False for ints: the kernel never reads x, but is still called with it
    np.testing.assert_array_equal(to_host(out), np.zeros(5, bool))


def _attention_gradient(device: str) -> tuple[list[np.ndarray], list[Tensor]]:
    """The smallest program in which the memory plan let a kernel overwrite a value that another kernel had still
    to read (issue 27): an attention block's input gradient, through a broadcast scale, split and softmax."""

    T, C = 4, 8
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in [(T, C), (C,), (C, 3 * C), (C, C), (T, C)]]
    x, g, wa, wp, w = (Tensor(a, device=device, requires_grad=True) for a in arrs)
    q, k, v = ((x * g) @ wa).split(C, dim=1)
    loss = ((((q @ k.T).softmax(-1) @ v) @ wp) * w).sum()
    return arrs, list(loss.gradient(x, g, wa, wp, w))


@pytest.mark.parametrize("device", DEVICES)
def test_memory_plan_reuse_waits_for_every_reader(device: str) -> None:
    import torch  # the float64 reference (a dev dependency)
    arrs, grads = _attention_gradient(device)
    # in the order the graph runs, every read of a shared storage reads the tenant its kernel was built to read
    graph = schedule([t.uop for t in grads])
    calls = [u for u in graph.toposort() if u.op is Ops.CALL]
    last_writer: dict[UOp, UOp] = {}
    for call in calls:
        for s in call.src[2:]:
            if s.op is Ops.AFTER:
                assert last_writer[s.memory()] is s.src[1], "a kernel reads storage that a later tenant overwrote"
        last_writer[call.src[1].memory()] = call
    assert len(last_writer) < len(calls), "the plan shares no storage, so this tests nothing"
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrs]
    x, g, wa, wp, w = ts
    q, k, v = ((x * g) @ wa).split(8, dim=1)
    ((((q @ k.T).softmax(-1) @ v) @ wp) * w).sum().backward()
    for t, mine in zip(ts, grads, strict=True):
        np.testing.assert_allclose(mine.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-4)
