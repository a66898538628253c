"""Tensor cores without a GPU: the configs against the PTX ISA's fragment formulas, the TC opt's axes and legality,
and TC kernels (Wmma) run by the PYTHON interpreter by their config, against NumPy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from uopviz.kernels import ZOO

import uopviz
from tests.cuda.support import SM80, matmul, rounded, run_program_python, run_python, zoo_run
from uopviz.codegen.opt import KernelOptError, Opt, OptOps, Scheduler
from uopviz.codegen.opt.actions import actions, legal_actions
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.codegen.tc import MMA_SYNC, Field, coordinates, elements, fields
from uopviz.dtype import DType, dtypes
from uopviz.pipeline import lower, scheduler
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.uop.ops import AxisType, Ops, TensorCore, UOp
from uopviz.uop.spec import validate

HALF, BF16 = dtypes.float16, dtypes.bfloat16
U, W, R = AxisType.UPCAST, AxisType.WARP, AxisType.UNROLL


def ptx_fragment(k: int, operand: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) of element i of a lane's fragment, as the PTX ISA writes it for mma.m16n8k{k} with .f16/.bf16
    ("Matrix Fragments for mma.m16n8k8" / "... for mma.m16n8k16 with floating point type")."""
    group, tig = lane >> 2, lane % 4
    if operand == "a":
        high_row = (i >> 1) & 1
        return group + 8 * high_row, tig * 2 + (i & 1) + (8 if k == 16 and i >= 4 else 0)
    if operand == "b":
        return tig * 2 + (i & 1) + (8 if i >= 2 else 0), group
    return group + (8 if i >= 2 else 0), tig * 2 + (i & 1)


@pytest.mark.parametrize("tc", MMA_SYNC, ids=lambda t: f"{t.name}_{t.dtype_in.name}")
def test_configs_are_the_ptx_layouts(tc: TensorCore) -> None:
    for operand, dims in (("a", "mk"), ("b", "kn"), ("c", "mn")):
        layout, seen = getattr(tc, operand), set()
        for lane in range(32):
            for e in range(elements(layout)):
                at = coordinates(layout, lane, e)
                got = (at[dims[0]], at[dims[1]])
                assert got == ptx_fragment(tc.dims[2], operand, lane, e), (operand, lane, e)
                seen.add(got)
        rows = tc.dims[0] if dims[0] == "m" else tc.dims[2]
        cols = tc.dims[1] if dims[1] == "n" else tc.dims[2]
        assert len(seen) == rows * cols  # every element of the matrix, once


def test_the_tc_axes_follow_cs_layout() -> None:
    assert fields(MMA_SYNC[0]) == [Field(W, "m", 0, 3, 2), Field(W, "n", 1, 2, 0), Field(U, "m", 3, 1, 1),
                                   Field(U, "n", 0, 1, 0), Field(R, "k", 0, 4)]


def _tc_axis(ast: UOp) -> int:
    return next(i for i, (t, _) in enumerate(scheduler(ast, SM80).shape()) if t is AxisType.REDUCE)


@pytest.mark.parametrize("dt", [HALF, BF16], ids=lambda d: d.name)
@pytest.mark.parametrize(("mkn", "pad", "extra"), [
    ((32, 32, 16), 0, []),
    ((64, 48, 32), 0, [Opt(OptOps.SPLIT, 1, (2, U, False)), Opt(OptOps.SPLIT, 0, (2, AxisType.LOCAL, False))]),
    ((15, 12, 10), 1, []),  # every axis padded to the tile
], ids=["tile", "upcast_local", "padded"])
def test_tc_gemm_equals_numpy(dt: DType, mkn: tuple[int, int, int], pad: int, extra: list[Opt]) -> None:
    m_, k_, n_ = mkn
    mm = matmul((m_, k_), (k_, n_), dt)
    kernel, got = run_python(mm, [Opt(OptOps.TC, _tc_axis(mm.ast), (-1, pad, 0)), *extra])
    wmma = [u for u in kernel.linear.src if u.op is Ops.WMMA]
    assert wmma and wmma[0].arg.dtype_in is dt and "_w8_w4_" in kernel.name
    np.testing.assert_allclose(got, mm.want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("which", [2, 3], ids=["m16n8k8_half", "m16n8k8_bfloat16"])
def test_k8_tensor_cores(which: int) -> None:
    tc = MMA_SYNC[which]
    mm = matmul((16, 24), (24, 8), tc.dtype_in)
    kernel, got = run_python(mm, [Opt(OptOps.TC, _tc_axis(mm.ast), (which, 0, 0))])
    assert {u.arg for u in kernel.linear.src if u.op is Ops.WMMA} == {tc}
    np.testing.assert_allclose(got, mm.want, rtol=1e-5, atol=1e-5)


def test_the_roles_of_the_output_axes_can_swap() -> None:
    mm = matmul((32, 16), (16, 32), HALF, seed=3)
    k = _tc_axis(mm.ast)
    got = [run_python(mm, [Opt(OptOps.TC, k, (-1, 0, mode))])[1] for mode in (0, 1)]
    for g in got:
        np.testing.assert_allclose(g, mm.want, rtol=1e-5, atol=1e-5)
    with pytest.raises(KernelOptError, match=r"choice 2 of the output axes: the kernel has 2 pairs"):
        scheduler(mm.ast, SM80).apply_opt(Opt(OptOps.TC, k, (-1, 0, 2)))


def test_half_matmul_with_half_products_uses_tensor_cores() -> None:
    """a @ b in half rounds each product to half; the Wmma computes them exactly (as cuBLAS does), so the answers
    agree to half's precision."""
    mm = matmul((32, 64), (64, 24), HALF, accumulate=False, seed=1)
    opts = heuristic_opts(scheduler(mm.ast, SM80))
    assert opts[0].op is OptOps.TC
    _, got = run_python(mm, opts)
    np.testing.assert_allclose(got, mm.want, rtol=1e-2, atol=1e-2)


def test_batched_gemm_with_the_heuristic() -> None:
    mm = matmul((3, 32, 16), (3, 16, 16), BF16, seed=2)
    opts = heuristic_opts(scheduler(mm.ast, SM80))
    assert opts[0].op is OptOps.TC and any(o.arg[1] is U for o in opts[1:])
    _, got = run_python(mm, opts)
    np.testing.assert_allclose(got, mm.want, rtol=1e-5, atol=1e-5)


def test_more_opts_after_tc() -> None:
    """BEAM's later steps: the K loop unrolled and padded, more tiles per warp, more warps per block."""
    mm = matmul((32, 40), (40, 32), HALF, seed=4)
    s = scheduler(mm.ast, SM80).apply_opt(Opt(OptOps.TC, 2, (-1, 0, 0)))
    assert [t for t, _ in s.shape()] == [AxisType.GLOBAL, AxisType.GLOBAL, W, W, AxisType.REDUCE, U, U, R]
    opts = [*s.opts, Opt(OptOps.PADTO, 4, 4), Opt(OptOps.SPLIT, 4, (2, R, False)),
            Opt(OptOps.SPLIT, 1, (4, U, False)), Opt(OptOps.SPLIT, 0, (2, AxisType.LOCAL, False))]
    kernel, got = run_python(mm, opts)
    assert kernel.local_size == (32, 2)
    np.testing.assert_allclose(got, mm.want, rtol=1e-5, atol=1e-5)


def test_the_heuristic_uses_tensor_cores_only_where_they_apply() -> None:
    half = matmul((32, 32), (32, 32), HALF)
    f32 = matmul((32, 32), (32, 32), dtypes.float32)
    assert heuristic_opts(scheduler(half.ast, SM80))[0].op is OptOps.TC
    assert all(o.op is not OptOps.TC for o in heuristic_opts(scheduler(f32.ast, SM80)))
    cpu = devices.get("CPU").target
    assert all(o.op is not OptOps.TC for o in heuristic_opts(scheduler(half.ast, cpu)))


def test_illegal_tensor_core_opts_say_why() -> None:
    half, f32 = matmul((32, 32), (32, 16), HALF), matmul((32, 32), (32, 16), dtypes.float32)
    odd = matmul((15, 12), (12, 10), HALF)
    s = scheduler(half.ast, SM80)

    def refused(sched: Scheduler, opt: Opt, message: str) -> None:
        with pytest.raises(KernelOptError, match=message):
            sched.apply_opt(opt)

    refused(scheduler(f32.ast, SM80), Opt(OptOps.TC, 2, (-1, 0, 0)),
            r"reduction over axis 2 \(float32\) is not one of bfloat16 products summed in float32, float16 products")
    refused(scheduler(half.ast, devices.get("CPU").target), Opt(OptOps.TC, 2, (-1, 0, 0)), "no tensor cores")
    refused(s, Opt(OptOps.TC, 0, (-1, 0, 0)), "axis 0 is GLOBAL; the TC reduces a REDUCE axis")
    refused(s, Opt(OptOps.TC, 2, (9, 0, 0)), r"tc 9 is not -1 or a tensor core of CUDA \(0..3\)")
    refused(s, Opt(OptOps.TC, 2, (-1, 2, 0)), "opt is 0 or 1")
    refused(s.apply_opt(Opt(OptOps.SPLIT, 0, (2, U, False))), Opt(OptOps.TC, 2, (-1, 0, 0)),
            "TC must be the first opt")
    refused(scheduler(odd.ast, SM80), Opt(OptOps.TC, 2, (-1, 0, 0)),
            r"M \(axis 0, size 15\) is not a multiple of 16.*\(opt 1 pads them\)")
    tc = s.apply_opt(Opt(OptOps.TC, 2, (-1, 0, 0)))
    refused(tc, Opt(OptOps.SWAP, 2, 3), "the tensor core's WARP, UPCAST and UNROLL axes keep their places")
    refused(tc, Opt(OptOps.SPLIT, 4, (2, AxisType.GROUP_REDUCE, False)), "stays in its warp's Wmma")
    refused(tc, Opt(OptOps.TC, 4, (-1, 0, 0)), "TC must be the first opt")


def test_beam_tries_tensor_cores_first_where_the_target_has_them() -> None:
    mm = matmul((32, 32), (32, 16), HALF)
    legal = legal_actions(scheduler(mm.ast, SM80))
    assert legal[0][0] == Opt(OptOps.TC, 2, (-1, 0, 0))
    assert {o.arg for o, _ in legal if o.op is OptOps.TC} == {(-1, p, m) for p in (0, 1) for m in (0, 1)}
    assert all(o.op is not OptOps.TC for o in actions(scheduler(mm.ast, devices.get("CPU").target)))
    tc = legal[0][1]
    assert all(o.op is not OptOps.TC for o, _ in legal_actions(tc))


def test_every_pass_of_a_tc_kernel_is_valid_and_its_trace_round_trips(tmp_path: Path) -> None:
    mm = matmul((16, 16), (16, 8), BF16)
    with uopviz.trace() as tr:
        lower(mm.ast, SM80, [Opt(OptOps.TC, 2, (-1, 0, 0))])
    outputs = [tr.uop(p.output) for c in tr.contexts for p in c.passes if p.output is not None]
    for u in outputs:
        validate(u)
    names = [p.name for c in tr.contexts for p in c.passes]
    assert "tensor cores" in names and "wmma accumulate" in names
    tr.save(tmp_path / "tc.uopviz-trace.json")
    loaded = uopviz.trace.load(tmp_path / "tc.uopviz-trace.json")
    lin = next(p for c in loaded.contexts for p in c.passes if p.name == "linearize")
    assert any(u.op is Ops.WMMA and u.arg == MMA_SYNC[1] for u in loaded.uop(lin.output).src)


@pytest.mark.parametrize(("name", "sizes"), [("gemm", {}), ("batched_gemm", {"M": 16, "K": 16, "N": 8}),
                                            ("conv2d", {"C": 16, "O": 8}), ("attention", {})])
def test_zoo_in_half_with_tensor_cores_equals_numpy(name: str, sizes: dict[str, int]) -> None:
    """The zoo's matmul-like programs on half inputs (small sizes, some raised to what a tile can pad), each kernel
    lowered for sm_80 with the heuristic's opts (TC where legal) and run on the PYTHON interpreter."""
    kernels, arrays = zoo_run(name, HALF, **sizes)
    lowered = run_program_python(kernels)
    assert any(u.op is Ops.WMMA for k in lowered for u in k.linear.src)
    want = ZOO[name].reference(*(rounded(a, HALF) if a.dtype.kind == "f" else a for a in arrays))
    got = buffers.to_numpy(kernels[-1][1][0]).astype(np.float32).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
