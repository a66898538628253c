"""OptOps: the Scheduler's legality checks and messages, the recorded steps, and the proof that every legal opt
(and random sequences of them) leaves every zoo kernel's answer unchanged on every runtime."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from uopviz.kernels import ZOO

import uopviz
from uopviz.codegen.opt import KernelOptError, Opt, OptOps, Scheduler
from uopviz.codegen.opt import scheduler as scheduler_module
from uopviz.codegen.opt.actions import actions, legal_actions
from uopviz.compiler import compile_kernel
from uopviz.parallel import compile_all
from uopviz.pipeline import kernels_of, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.uop.ops import AxisType, UOp

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]
U, R, L = AxisType.UPCAST, AxisType.REDUCE, AxisType.LOOP


@dataclass
class Case:
    name: str
    ast: UOp
    bufs: list[UOp]
    ref: np.ndarray
    device: str

    def sched(self) -> Scheduler:
        return scheduler(self.ast, self.device)

    def check(self, opts: list[Opt]) -> str:
        """Run the kernel with opts; the assertion names the opts when the answer differs."""
        kernel, prog = compile_kernel(self.ast, self.device, opts)
        prog([buffers.handle(b) for b in self.bufs], wait=True)
        got = buffers.to_numpy(self.bufs[0])
        np.testing.assert_allclose(got, self.ref, rtol=1e-4, atol=1e-5, equal_nan=True,
                                   err_msg=f"{self.name} {kernel.name} with {[str(o) for o in opts]}")
        return kernel.name


def scheduler(ast: UOp, device: str) -> Scheduler:
    """The Scheduler lower() makes for a kernel on a device."""
    return scheduler_of(ast, devices.get(device).target)


def check_all(runs: list[tuple[Case, list[Opt]]]) -> None:
    """Each case run with its opts and checked, in order, their kernels first compiled together as realize compiles
    a schedule's (compile_all: lowered side by side, the CPU's in batches of one C compiler run; a kernel that fails
    raises its error in check). One C compiler run per kernel was a third of the CPU's tests' CPU time."""
    compile_all([(case.ast, case.device, tuple(opts)) for case, opts in runs])
    for case, opts in runs:
        case.check(opts)


def cases(name: str, device: str) -> Iterator[Case]:
    """Each kernel of a zoo program at its small sizes, its inputs computed and its unoptimized answer kept."""
    z = ZOO[name]
    out, _ = z.build(z.sizes(small=True), device)
    kernels = kernels_of(schedule([out.uop]))
    compile_all([(ast, device, ()) for ast, _ in kernels])
    for ast, bufs in kernels:
        _, prog = compile_kernel(ast, device, [])  # the unoptimized kernel is the reference
        prog([buffers.handle(b) for b in bufs], wait=True)
        yield Case(name, ast, bufs, buffers.to_numpy(bufs[0]).copy(), device)


@pytest.fixture(scope="module")
def gemm_cpu() -> Case:
    return next(cases("gemm", "CPU"))


# ---- the Scheduler ----
def test_axes_are_in_loop_order_and_named_by_type(gemm_cpu: Case) -> None:
    s = gemm_cpu.sched()
    assert s.shape() == [(L, 15), (L, 10), (R, 12)]
    s = s.apply_opt(Opt(OptOps.SPLIT, 1, (5, U, False))).apply_opt(Opt(OptOps.SPLIT, 2, (4, AxisType.UNROLL, False)))
    assert s.shape() == [(L, 15), (L, 2), (R, 3), (U, 5), (AxisType.UNROLL, 4)]
    assert [r.arg.idx for r in s.axes] == [0, 1, 2, 3, 4]
    assert gemm_cpu.check(list(s.opts)) == "r_L15_L2_R3_u5_r4"


def test_split_top_and_swap_and_padto(gemm_cpu: Case) -> None:
    s = gemm_cpu.sched().apply_opt(Opt(OptOps.SPLIT, 0, (3, L, True)))
    assert s.shape() == [(L, 3), (L, 5), (L, 10), (R, 12)]
    s = s.apply_opt(Opt(OptOps.SWAP, 0, 2))
    assert s.shape() == [(L, 10), (L, 5), (L, 3), (R, 12)]
    s = s.apply_opt(Opt(OptOps.PADTO, 3, 8))
    assert s.shape() == [(L, 10), (L, 5), (L, 3), (R, 16)]
    gemm_cpu.check(list(s.opts))


@pytest.mark.parametrize(("opt", "message"), [
    (Opt(OptOps.SPLIT, 2, (5, U, False)), r"split of axis 2 \(REDUCE, size 12\) by 5: a UPCAST axis splits from "
                                          "GLOBAL, LOCAL, LOOP, not REDUCE"),
    (Opt(OptOps.SPLIT, 0, (4, U, False)), r"split of axis 0 \(LOOP, size 15\) by 4: 15 is not divisible by 4"),
    (Opt(OptOps.SPLIT, 0, (16, U, False)), "the factor must be in 2..15"),
    (Opt(OptOps.SPLIT, 0, (3, AxisType.LOCAL, False)), "the CPU target has no work-groups"),
    (Opt(OptOps.SPLIT, 0, (3, AxisType.GLOBAL, False)), "GLOBAL axes are not made by splitting"),
    (Opt(OptOps.SPLIT, 5, (3, U, False)), r"the kernel has 3 axes \(0..2\)"),
    (Opt(OptOps.PADTO, 1, 5), "10 is already a multiple of 5"),
    (Opt(OptOps.PADTO, 1, 32), "would more than double the work"),
    (Opt(OptOps.SWAP, 0, 2), r"swap of axis 0 \(LOOP\) with axis 2 \(REDUCE\): only axes of one AxisType"),
    (Opt(OptOps.SWAP, 1, 1), "the other axis must be another"),
    (Opt(OptOps.TC, 2, (-1, 0, 0)), "the CPU target has no tensor cores"),
    (Opt(OptOps.TC, 2, None), r"TC's arg is \(tc, opt, mode\), three integers"),
    (Opt(OptOps.SPLIT, "a", (3, U, False)), "needs an integer axis"),
])
def test_illegal_opts_say_why(gemm_cpu: Case, opt: Opt, message: str) -> None:
    with pytest.raises(KernelOptError, match=message):
        gemm_cpu.sched().apply_opt(opt)


def test_expansion_is_bounded_counting_a_vector_once(gemm_cpu: Case) -> None:
    s = gemm_cpu.sched().apply_opt(Opt(OptOps.SPLIT, 0, (15, U, False)))
    assert s.shape() == [(L, 10), (R, 12), (U, 15)]
    s = s.apply_opt(Opt(OptOps.SPLIT, 1, (4, AxisType.UNROLL, False)))  # 60 lanes: 15 bodies of a vector of 4
    with pytest.raises(KernelOptError, match=r"75 copies of the kernel body \(the limit is 32\)"):
        s.apply_opt(Opt(OptOps.SPLIT, 0, (5, U, False)))
    python = scheduler(gemm_cpu.ast, "PYTHON").apply_opt(Opt(OptOps.SPLIT, 0, (15, U, False)))
    with pytest.raises(KernelOptError, match=r"60 copies"):  # no vectors: every lane is a copy
        python.apply_opt(Opt(OptOps.SPLIT, 1, (4, AxisType.UNROLL, False)))


def test_nolocals() -> None:
    if "CL" not in DEVICES:
        pytest.skip("no OpenCL device here")
    case = next(cases("gemm", "CL"))
    s = case.sched()
    assert s.shape() == [(AxisType.GLOBAL, 15), (AxisType.GLOBAL, 10), (R, 12)]
    local = s.apply_opt(Opt(OptOps.SPLIT, 1, (5, AxisType.LOCAL, False)))
    with pytest.raises(KernelOptError, match="nolocals: axis 2 is already LOCAL"):
        local.apply_opt(Opt(OptOps.NOLOCALS))
    off = s.apply_opt(Opt(OptOps.NOLOCALS))
    with pytest.raises(KernelOptError, match="nolocals was applied"):
        off.apply_opt(Opt(OptOps.SPLIT, 1, (5, AxisType.LOCAL, False)))
    assert case.check(list(local.opts)) == "r_g15_g2_l5_R12"


@pytest.mark.parametrize("opt", [Opt(OptOps.SPLIT, 1, (4, U, True)), Opt(OptOps.PADTO, 0, 8), Opt(OptOps.SWAP, 0, 1),
                                 Opt(OptOps.NOLOCALS)])
def test_opts_round_trip_through_json(opt: Opt) -> None:
    assert Opt.from_json(opt.to_json()) == opt


@pytest.mark.parametrize(("doc", "message"), [
    ({"op": "SPLAT", "axis": 0, "arg": 1}, "unknown OptOp 'SPLAT'"),
    ({"op": "SPLIT", "axis": 0, "arg": [4, "SIDEWAYS"]}, "unknown AxisType 'SIDEWAYS'"),
    ({"op": "SPLIT", "axis": 0, "arg": 4}, r"SPLIT's arg is \[factor, axis type, top\]"),
    ({"op": "PADTO", "axis": 0, "arg": "8"}, "PADTO needs an integer arg"),
    ({"op": "NOLOCALS", "axis": 1}, "NOLOCALS takes no axis"),
    ([1, 2], "an opt is an object"),
])
def test_malformed_opts_are_named(doc: Any, message: str) -> None:
    with pytest.raises(KernelOptError, match=message):
        Opt.from_json(doc)


def test_each_opt_is_a_recorded_step() -> None:
    z = ZOO["gemm"]
    out, _ = z.build(z.sizes(small=True), "CPU")
    ast = kernels_of(schedule([out.uop]))[0][0]
    opts = [Opt(OptOps.SPLIT, 1, (5, U, False)), Opt(OptOps.SPLIT, 2, (3, AxisType.UNROLL, False))]
    with uopviz.trace() as tr:
        compile_kernel(ast, "CPU", opts)
    ctx = tr.contexts[-1]
    assert ctx.name == "r_L15_L2_R4_u5_r3"
    names = [p.name for p in ctx.passes if p.stage == "Optimize"]
    assert names == ["global axes", "order axes", "split axis 1 by 5 → UPCAST", "split axis 2 by 3 → UNROLL",
                     "group reduce"]


def test_action_space_is_deterministic(gemm_cpu: Case) -> None:
    s = gemm_cpu.sched()
    assert actions(s) == actions(gemm_cpu.sched())
    legal = [str(o) for o, _ in legal_actions(s)]
    assert "split axis 1 by 5 → UPCAST" in legal and "split axis 2 by 4 → UNROLL" in legal
    assert not any("LOCAL" in o for o in legal)  # the CPU has no work-groups


# ---- every legal opt keeps the answer ----
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(ZOO))
def test_every_single_legal_opt_keeps_the_answer(name: str, device: str) -> None:
    tried = 0
    for case in cases(name, device):  # a kernel's opts checked before the next kernel's reference runs, as they were
        runs = [(case, [opt]) for opt, _ in legal_actions(case.sched())]
        check_all(runs)
        tried += len(runs)
    assert tried >= 4


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "PYTHON"])
def test_random_opt_sequences_keep_the_answer(device: str) -> None:
    """150 sequences on the CPU; 60 on CL, where each compile costs several times more (the codegen before the
    renderer is the same, so CL's share is its dialect's spelling of what the opts make)."""
    rng = random.Random(1234)
    all_cases = [c for name in ZOO for c in cases(name, device)]
    runs: list[tuple[Case, list[Opt]]] = []
    for _ in range(150 if device == "CPU" else 60):
        case = rng.choice(all_cases)
        s = case.sched()
        for _ in range(rng.randint(2, 4)):
            legal = legal_actions(s)
            if not legal:
                break
            _, s = rng.choice(legal)
        runs.append((case, list(s.opts)))
    check_all(runs)
    assert len({(case.name, tuple(opts)) for case, opts in runs}) > len(runs) * 2 // 3


def test_thread_axis_splits_cpu_work(gemm_cpu: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    s = gemm_cpu.sched().apply_opt(Opt(OptOps.SPLIT, 0, (3, AxisType.THREAD, True)))
    assert s.shape()[0] == (AxisType.THREAD, 3)
    kernel, _ = compile_kernel(gemm_cpu.ast, "CPU", list(s.opts))
    assert kernel.threads == 3 and "int tidx0)" in (kernel.source or "")
    gemm_cpu.check(list(s.opts))
    monkeypatch.setattr(scheduler_module, "MAX_THREADS", 12)
    with pytest.raises(KernelOptError, match="15 thread indices exceed 12"):  # all THREAD axes together
        s.apply_opt(Opt(OptOps.SPLIT, 1, (5, AxisType.THREAD, True)))


def test_thread_axes_are_digits_of_one_call_index(gemm_cpu: Case) -> None:
    """Two THREAD splits (15 rows by 3, 10 columns by 5) make 15 calls; each call's index is split back into
    the two axes, the inner its lowest digit, so every output is computed once."""
    s = gemm_cpu.sched().apply_opt(Opt(OptOps.SPLIT, 0, (3, AxisType.THREAD, True)))
    s = s.apply_opt(Opt(OptOps.SPLIT, 2, (5, AxisType.THREAD, True)))
    assert [t for t, _ in s.shape()].count(AxisType.THREAD) == 2
    kernel, _ = compile_kernel(gemm_cpu.ast, "CPU", list(s.opts))
    assert kernel.threads == 15 and "int tidx0)" in (kernel.source or "") and "tidx1" not in (kernel.source or "")
    assert "(tidx0/5)" in (kernel.source or "") and "(tidx0%5)" in (kernel.source or "")
    gemm_cpu.check(list(s.opts))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["gemm", "softmax", "sum", "elementwise", "conv2d"])
def test_heuristic_opts_are_legal_and_keep_the_answer(name: str, device: str) -> None:
    from uopviz.codegen.opt.heuristic import heuristic_opts
    for case in cases(name, device):
        case.check(heuristic_opts(case.sched()))
