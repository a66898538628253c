"""GROUP_REDUCE: a reduction shared by the work-items of a work-group through local memory and barriers, on CL and
on the PYTHON interpreter (which runs a group's work-items in turns between barriers), against NumPy and the
unoptimized kernel; the generated OpenCL; and the refusals (the CPU has no work-groups, the work-group limits)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from uopviz.kernels import ZOO

import uopviz
from uopviz.codegen.opt import KernelOptError, Opt, OptOps
from uopviz.codegen.opt.actions import legal_actions
from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.realize import to_host
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.schedule import rows
from uopviz.target import Target
from uopviz.uop.ops import AddrSpace, AxisType, Ops, UOp
from uopviz.uop.spec import validate

DEVICES = ["PYTHON", *devices.available(["CL"])]
G, L, U, UN = AxisType.GROUP_REDUCE, AxisType.LOCAL, AxisType.UPCAST, AxisType.UNROLL


def split(axis: int, k: int, target: AxisType, top: bool = False) -> Opt:
    return Opt(OptOps.SPLIT, axis, (k, target, top))


def target(device: str) -> Target:
    return devices.get(device).target


def run_program(name: str, device: str, opts: list[Opt], **sizes: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A zoo program run with `opts` on each kernel that reduces (the others unoptimized): its output, the output
    of its unoptimized kernels, and the names of the kernels the opts applied to."""
    z = ZOO[name]
    out, _ = z.build(z.sizes(small=True, **sizes), device)
    graph = schedule([out.uop])
    result, names = [], []
    for use in (opts, []):
        for ast, bufs in kernels_of(graph):
            reduces = any(t is AxisType.REDUCE for t, _ in scheduler_of(ast, target(device)).shape())
            kernel, prog = compile_kernel(ast, device, use if reduces else [])
            prog([buffers.handle(b) for b in bufs], wait=True)
            if reduces and use:
                names.append(kernel.name)
        result.append(to_host(graph.src[0].src[0].reshape(out.uop.shape)).copy())
    return result[0], result[1], names


def reference(name: str, **sizes: int) -> np.ndarray:
    z = ZOO[name]
    s = z.sizes(small=True, **sizes)
    return z.reference(*z.arrays(s))


# ---- results ----
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("opts", "kernel"), [
    ([split(0, 8, G)], "r_G8_R125"),
    ([split(0, 8, G, top=True)], "r_G8_R125"),  # each work-item reads one contiguous eighth
    ([split(0, 8, G), split(1, 5, UN)], "r_G8_R25_r5"),
    ([Opt(OptOps.PADTO, 0, 16), split(0, 16, G), split(1, 7, UN)], "r_G16_R9_r7"),  # 1000 padded to 1008
])
def test_sum_in_one_work_group(device: str, opts: list[Opt], kernel: str) -> None:
    got, unoptimized, names = run_program("sum", device, opts)
    assert names == [kernel]
    np.testing.assert_allclose(got, reference("sum"), rtol=1e-4)
    np.testing.assert_allclose(got, unoptimized, rtol=1e-5)


@pytest.fixture
def unfused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Row reductions in kernels of their own (rows longer than 0 bytes are not fused into their consumer)."""
    monkeypatch.setattr(rows, "ROW_BYTES", 0)


ROWS = [  # (opts for the [rows 6, REDUCE 33] kernels, the name they get on CL)
    ([split(1, 11, G)], "r_g6_G11_R3"),
    ([split(1, 3, G), split(0, 3, L)], "r_g2_l3_G3_R11"),
    ([split(0, 2, U), split(1, 11, G), split(2, 3, UN)], "r_g3_G11_u2_r3"),
    ([Opt(OptOps.PADTO, 1, 4), split(1, 12, G), split(0, 2, L), split(3, 3, UN)], "r_g3_l2_G12_r3"),  # 33 -> 36
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["softmax", "layernorm", "max"])
@pytest.mark.parametrize(("opts", "kernel"), ROWS)
def test_row_reductions_in_work_groups(device: str, name: str, opts: list[Opt], kernel: str, unfused: None) -> None:
    got, unoptimized, names = run_program(name, device, opts)
    if device == "CL":
        assert set(names) == {kernel}
    assert len(names) == (1 if name == "max" else 2)  # softmax and layernorm: two row reductions, then one map
    np.testing.assert_allclose(got, reference(name), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got, unoptimized, rtol=1e-5, atol=1e-7)


def test_larger_non_power_of_two_rows(unfused: None) -> None:
    device = DEVICES[-1]
    got, _, _ = run_program("softmax", device, [split(1, 45, G), split(2, 7, UN)], R=3, C=45 * 21)
    np.testing.assert_allclose(got, reference("softmax", R=3, C=45 * 21), rtol=1e-4, atol=1e-7)


R, C = 6, 35


def max_then_sum() -> UOp:
    """out[i] = sum_r exp2(x[i, r] - max_r' x[i, r']): two reductions in one kernel, the second using the first."""
    out, x = UOp.param(0, (R,)), UOp.param(1, (R * C,))
    i, r, r2 = UOp.range(R, 0), UOp.range(C, 1, AxisType.REDUCE), UOp.range(C, 2, AxisType.REDUCE)
    m = x.index(i * C + r2).load().reduce(Ops.MAX, r2)
    return UOp.sink(out.index(i).store((x.index(i * C + r).load() - m).alu(Ops.EXP2).reduce(Ops.ADD, r)).end(i))


def run_kernel(ast: UOp, device: str, opts: list[Opt], arrays: list[np.ndarray]) -> np.ndarray:
    bufs = [buffers.from_numpy(a, device) for a in arrays]
    _, prog = compile_kernel(ast, device, opts)
    prog([buffers.handle(b) for b in bufs], wait=True)
    return buffers.to_numpy(bufs[0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("opts", [
    [split(1, 5, G), split(3, 7, G)],  # each reduction over its own work-items: [g6, G5, G7, R7, R5]
    [split(1, 5, G), split(0, 3, L)],  # only the sum grouped: [g2, l3, G5, R7, R35]
    [split(2, 7, G), split(0, 2, U), split(3, 5, UN)],  # only the max grouped: [g3, R35, G7, u2, r5]
])
def test_one_reduction_uses_another_in_one_kernel(device: str, opts: list[Opt]) -> None:
    x = np.random.default_rng(1).random((R, C), dtype=np.float32)
    got = run_kernel(max_then_sum(), device, opts, [np.zeros(R, np.float32), x.reshape(-1)])
    np.testing.assert_allclose(got, np.exp2(x - x.max(1, keepdims=True)).sum(1), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_independent_reductions_in_one_kernel(device: str) -> None:
    x = np.random.default_rng(2).random((R, C), dtype=np.float32)
    X = buffers.from_numpy(x, device).reshape((R, C))
    ((ast, bufs),) = kernels_of(schedule([X.reduce(Ops.ADD, axes=(1,)) + X.reduce(Ops.MAX, axes=(1,))]))
    s = scheduler_of(ast, target(device))
    s = s.apply_opt(split(1, 5, G)).apply_opt(split(3, 7, G)).apply_opt(split(0, 3, L))
    assert sorted((t.name, n) for t, n in s.shape() if t in (L, G)) == [("GROUP_REDUCE", 5), ("GROUP_REDUCE", 7),
                                                                        ("LOCAL", 3)]
    _, prog = compile_kernel(ast, device, list(s.opts))
    prog([buffers.handle(b) for b in bufs], wait=True)
    np.testing.assert_allclose(buffers.to_numpy(bufs[0])[:R], x.sum(1) + x.max(1), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_group_reduction_inside_a_loop(device: str) -> None:
    # conv2d: [g4, g6, g5, L2, R3, R3, R3] on CL, [L2, L4, L6, L5, R3, R3, R3] on PYTHON: output loops run the
    # group reduction again and again, in the same local memory
    got, unoptimized, names = run_program("conv2d", device, [split(4, 3, G), split(0, 2, L)])
    assert names == [{"CL": "r_g2_g6_g5_l2_L2_G3_R3_R3", "PYTHON": "r_l2_L4_L6_L5_G3_R3_R3"}[device]]
    np.testing.assert_allclose(got, reference("conv2d"), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got, unoptimized, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
def test_stores_outside_one_block_stay_gated(device: str) -> None:
    # out0[i] = sum_r x[i, r] in a loop (grouped), out1[0] = x[0, 0] after it: the two gated stores do not make
    # one If block, so each keeps its gate
    out0, out1, x = UOp.param(0, (R,)), UOp.param(1, (1,)), UOp.param(2, (R * C,))
    i, r = UOp.range(R, 0), UOp.range(C, 1, AxisType.REDUCE)
    k = UOp.sink(out0.index(i).store(x.index(i * C + r).load().reduce(Ops.ADD, r)).end(i),
                 out1.index(0).store(x.index(0).load()))
    s = scheduler_of(k, target(device)).apply_opt(split(1, 7, G))
    kernel, prog = compile_kernel(k, device, list(s.opts))
    a = np.random.default_rng(3).random((R, C), dtype=np.float32)
    bufs = [buffers.from_numpy(v, device) for v in (np.zeros(R, np.float32), np.zeros(1, np.float32), a.ravel())]
    prog([buffers.handle(b) for b in bufs], wait=True)
    np.testing.assert_allclose(buffers.to_numpy(bufs[0]), a.sum(1), rtol=1e-5)
    assert buffers.to_numpy(bufs[1])[0] == a[0, 0]
    if device == "PYTHON":  # the sum's store is inside the output loop (the CL grid has no such loop)
        ops = [u.op for u in kernel.linear.src]
        assert Ops.IF not in ops
        assert sum(u.op is Ops.STORE and len(u.src) == 3 for u in kernel.linear.src) == 2


# ---- the generated code ----
def sum_kernel(device: str) -> UOp:
    z = ZOO["sum"]
    out, _ = z.build(z.sizes(small=True, N=16 * 1000), device)
    return kernels_of(schedule([out.uop]))[0][0]


def test_opencl_source_of_a_group_sum() -> None:
    if "CL" not in DEVICES:
        pytest.skip("no OpenCL device here")
    kernel, _ = compile_kernel(sum_kernel("CL"), "CL", [split(0, 16, G)])
    assert kernel.name == "r_G16_R1000" and kernel.global_size == (16,) and kernel.local_size == (16,)
    src = kernel.source or ""
    lines = [ln.strip() for ln in src.splitlines()]
    assert "__local float temp0[16];" in lines and "int lidx0 = get_local_id(0); /* 16 */" in lines
    assert "float val1 = data1[(ridx1*16)+lidx0];" in lines  # neighbouring work-items read neighbouring floats
    put, bar, gate = lines.index("temp0[lidx0] = val2;"), lines.index("barrier(CLK_LOCAL_MEM_FENCE);"), \
        lines.index("if (lidx0<1) {")
    assert put + 1 == bar and bar + 1 == gate and src.count("barrier(") == 1
    combine = lines[gate + 1:]  # work-item 0 alone adds the 16 partials in order, and stores the sum
    assert "for (int ridx2 = 0; ridx2 < 16; ridx2++) {" in combine and "float val4 = temp0[ridx2];" in combine
    assert combine[-3:] == ["data0[0] = val5;", "}", "}"]


def test_opencl_source_of_a_group_reduction_in_a_loop() -> None:
    if "CL" not in DEVICES:
        pytest.skip("no OpenCL device here")
    z = ZOO["conv2d"]
    out, _ = z.build(z.sizes(small=True), "CL")
    kernel, _ = compile_kernel(kernels_of(schedule([out.uop]))[-1][0], "CL", [split(4, 3, G)])
    lines = [ln.strip() for ln in (kernel.source or "").splitlines()]
    loop = lines.index("for (int ridx3 = 0; ridx3 < 2; ridx3++) {")
    # a barrier first in the loop: no work-item overwrites a partial still being read from the last iteration
    assert lines[loop + 1] == "barrier(CLK_LOCAL_MEM_FENCE);" and lines.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    assert lines.index("__local float temp0[3];") < loop


@pytest.mark.parametrize("device", DEVICES)
def test_passes_are_recorded_and_valid(device: str) -> None:
    with uopviz.trace() as tr:
        compile_kernel(sum_kernel(device), device, [split(0, 16, G), split(1, 4, UN)])
    ctx = tr.contexts[-1]
    assert ctx.name == "r_G16_R250_r4"
    passes = {p.name: tr.uop(p.output) for p in ctx.passes}
    grouped = passes["group reduce"].toposort()
    assert [u.arg.size for u in grouped if u.op is Ops.BUFFER and u.arg.addrspace is AddrSpace.LOCAL] == [16]
    assert sum(u.op is Ops.BARRIER for u in grouped) == 1
    assert [u.op for u in passes["gate blocks"].src].count(Ops.IF) == 1
    for p in ctx.passes:
        validate(tr.uop(p.output))


# ---- legality ----
def test_group_reduce_is_an_action_where_there_are_work_groups() -> None:
    for device in ["CPU", *DEVICES]:
        legal = [str(o) for o, _ in legal_actions(scheduler_of(sum_kernel(device), target(device)))]
        assert ("split axis 0 by 8 → GROUP_REDUCE" in legal) == (device != "CPU"), device


@pytest.mark.parametrize(("device", "opts", "message"), [
    ("CPU", [split(0, 8, G)], r"split of axis 0 \(REDUCE, size 16000\) by 8: the CPU target has no work-groups or "
                              "local memory"),
    ("PYTHON", [Opt(OptOps.NOLOCALS), split(0, 8, G)], "nolocals was applied"),
    ("PYTHON", [split(0, 8, G), Opt(OptOps.NOLOCALS)], "nolocals: axis 0 is already GROUP_REDUCE"),
    ("PYTHON", [split(0, 8, G), split(0, 2, G)], "a GROUP_REDUCE axis splits from REDUCE, not GROUP_REDUCE"),
    ("PYTHON", [split(0, 2000, G)], "2000 work-items per group exceed PYTHON's 1024"),
])
def test_refusals_say_why(device: str, opts: list[Opt], message: str) -> None:
    s = scheduler_of(sum_kernel(device), target(device))
    with pytest.raises(KernelOptError, match=message):
        for o in opts:
            s = s.apply_opt(o)


def test_work_group_limits_count_group_reduce_items() -> None:
    z = ZOO["conv2d"]
    out, _ = z.build(z.sizes(small=True), "PYTHON")  # [L2, L4, L6, L5, R3, R3, R3]
    conv = kernels_of(schedule([out.uop]))[-1][0]  # after the stored pad's kernel
    s = scheduler_of(conv, target("PYTHON"))
    s = s.apply_opt(split(4, 3, G)).apply_opt(split(5, 3, G)).apply_opt(split(1, 2, L))
    with pytest.raises(KernelOptError, match="PYTHON has 3 local dimensions"):  # [l2, L2, L2, L6, L5, G3, G3, R3]
        s.apply_opt(split(1, 2, L))
    small = dataclasses.replace(target("PYTHON"), max_local=16)
    s = scheduler_of(conv, small).apply_opt(split(4, 3, G))
    with pytest.raises(KernelOptError, match="18 work-items per group exceed PYTHON's 16"):
        s.apply_opt(split(2, 6, L))


def test_local_memory_limit_counts_upcast_copies() -> None:
    z = ZOO["max"]
    out, _ = z.build(z.sizes(small=True), "PYTHON")  # [L6, R33]
    tiny = dataclasses.replace(target("PYTHON"), local_memory=64)
    s = scheduler_of(kernels_of(schedule([out.uop]))[0][0], tiny).apply_opt(split(1, 11, G))  # 44 bytes
    with pytest.raises(KernelOptError, match="the group reductions would take 88 bytes of local memory, PYTHON "
                                             "has 64"):
        s.apply_opt(split(0, 2, U))
    with pytest.raises(KernelOptError, match="88 bytes"):  # a slot per LOCAL work-item too
        s.apply_opt(split(0, 2, L))
    s.apply_opt(split(2, 3, UN))  # unrolling the rest of the reduction needs no more


@pytest.mark.parametrize("device", ["CPU", *DEVICES])
def test_heuristic_shares_a_whole_array_reduction_among_a_work_group(device: str) -> None:
    from uopviz.codegen.opt.heuristic import heuristic_opts
    z = ZOO["sum"]
    out, _ = z.build(z.sizes(N=1000), device)
    ((ast, _),) = kernels_of(schedule([out.uop]))
    chosen = {o.arg[1] for o in heuristic_opts(scheduler_of(ast, target(device)))}
    # a target with work-groups has too few outputs to fill its grid; the CPU has no work-groups and unrolls
    assert chosen == ({UN} if device == "CPU" else {G})
    got, unoptimized, _ = run_program("sum", device, heuristic_opts(scheduler_of(ast, target(device))), N=1000)
    np.testing.assert_allclose(got, unoptimized, rtol=1e-5)
    np.testing.assert_allclose(got, reference("sum", N=1000), rtol=1e-4)
