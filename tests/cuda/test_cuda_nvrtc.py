"""CUDA source without a GPU: every zoo kernel, unoptimized and with the heuristic's opts for a CUDA target (TC
where legal), renders CUDA C that NVRTC compiles to a cubin for sm_80 and sm_90; the PTX of tensor-core kernels
holds the mma instruction. NVRTC runs on the CPU (the nvidia-cuda-nvrtc wheel, in the dev extra)."""

from __future__ import annotations

import numpy as np
import pytest
from uopviz.kernels import ZOO

from tests.cuda.support import ARCHS, SM80, matmul, needs_nvrtc, zoo_kernels
from uopviz.codegen.opt import Opt, OptOps
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.codegen.tc import MMA_SYNC
from uopviz.dtype import DType, dtypes
from uopviz.pipeline import kernels_of, lower, schedule, scheduler
from uopviz.runtime.cuda import nvrtc_compile
from uopviz.runtime.device import CompileError
from uopviz.tensor import Tensor
from uopviz.uop.ops import AxisType, TensorCore

pytestmark = needs_nvrtc


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_kernels_compile_for_sm80_and_sm90(name: str, dt: DType) -> None:
    kernels = zoo_kernels(name, dt)
    used_tc = False
    for ast, _ in kernels:
        for opts in ([], heuristic_opts(scheduler(ast, SM80))):
            k = lower(ast, SM80, opts)
            used_tc |= any(o.op is OptOps.TC for o in opts)
            for arch in ARCHS:
                assert nvrtc_compile(k.source, k.name, arch)[:4] == b"\x7fELF"  # type: ignore[arg-type]
    # TC is legal exactly where a half product is reduced over an axis whose output axes it splits
    assert used_tc == (dt is dtypes.float16 and name in ("gemm", "batched_gemm", "conv2d", "attention"))


@pytest.mark.parametrize("tc", MMA_SYNC, ids=lambda t: f"{t.name}_{t.dtype_in.name}")
def test_tc_gemm_ptx_holds_mma(tc: TensorCore) -> None:
    mm = matmul((64, 64), (64, 32), tc.dtype_in)
    opts = [Opt(OptOps.TC, 2, (MMA_SYNC.index(tc), 0, 0)), Opt(OptOps.SPLIT, 1, (2, AxisType.UPCAST, False))]
    k = lower(mm.ast, SM80, opts)
    ti = "f16" if tc.dtype_in is dtypes.float16 else "bf16"
    for arch in ARCHS:
        ptx = nvrtc_compile(k.source, k.name, arch, ptx=True).decode()  # type: ignore[arg-type]
        assert f".target {arch}" in ptx
        assert f"mma.sync.aligned.{tc.name}.row.col.f32.{ti}.{ti}.f32" in ptx
        nvrtc_compile(k.source, k.name, arch)  # type: ignore[arg-type]  (ptxas accepts it too)


def test_a_compile_error_keeps_nvrtcs_log() -> None:
    with pytest.raises(CompileError, match=r"(?s)failed to compile kernel broken.*identifier \"y\" is undefined"):
        nvrtc_compile('extern "C" __global__ void broken(float* x) { x[0] = y; }', "broken", "sm_80")


@pytest.mark.parametrize("name", ["rand", "half", "bfloat16", "float64_int64", "bool_where", "bitcast", "argmax",
                                  "cumsum"])
def test_dtypes_and_ops_beyond_the_zoo_compile(name: str) -> None:
    """Threefry and bit casts, emulated half and bfloat16 arithmetic, doubles and 64-bit integers, masks and
    selects, argmax and cumsum: CUDA source NVRTC takes, unoptimized and with the heuristic's opts."""
    x = Tensor.empty(64, 33, device="PYTHON")
    program = {
        "rand": lambda: Tensor.rand(64, 33, device="PYTHON") + x,
        "half": lambda: ((x.half() * 3 + 1).sqrt().exp() / x.half()).maximum(x.half()).float(),
        "bfloat16": lambda: (x.cast(dtypes.bfloat16) * 2 - 1).exp2().cast(dtypes.float32).log2(),
        "float64_int64": lambda: ((x.cast(dtypes.float64).sin() * 7).cast(dtypes.int64) // 3 % 5).float(),
        "bool_where": lambda: ((x > 0.5) & (x < 0.9)).where(x, -x).max(-1),
        "bitcast": lambda: x.bitcast(dtypes.int32) >> 3,
        "argmax": lambda: x.argmax(-1),
        "cumsum": lambda: x.cumsum(-1),
    }[name]()
    for ast, _ in kernels_of(schedule([program.uop])):
        for opts in ([], heuristic_opts(scheduler(ast, SM80))):
            k = lower(ast, SM80, opts)
            nvrtc_compile(k.source, k.name, "sm_80")  # type: ignore[arg-type]


@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_float64_to_half_rounding_once_compiles(dt: DType) -> None:
    """The round-to-odd helper a cast from float64 to an emulated half goes through (renderer/dialect.py)."""
    out = Tensor(np.linspace(-3, 3, 15).reshape(3, 5)).mul(1.1).cast(dt)
    for ast, _ in kernels_of(schedule([out.uop])):
        k = lower(ast, SM80, [])
        assert "float32_odd(" in (k.source or "")
        for arch in ARCHS:
            assert nvrtc_compile(k.source, k.name, arch)[:4] == b"\x7fELF"  # type: ignore[arg-type]
