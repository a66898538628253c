"""Shared by the CUDA tests: matmul kernels in the tensor cores' dtypes, run lowered for a CUDA target on the
PYTHON interpreter (the reference, which executes Wmma by its config), and whether NVRTC is here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest
from uopviz.kernels import ZOO

from uopviz.codegen.opt import Opt
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.dtype import DType, dtypes
from uopviz.pipeline import kernels_of, lower, schedule, scheduler
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.cuda import cuda_target, nvrtc_version
from uopviz.runtime.device import DeviceUnavailableError
from uopviz.runtime.python import PythonRuntime
from uopviz.target import Kernel, Target
from uopviz.tensor import Tensor
from uopviz.uop.ops import UOp

SM80 = cuda_target("sm_80")
ARCHS = ("sm_80", "sm_90")


def _nvrtc_missing() -> str | None:
    try:
        nvrtc_version()
    except DeviceUnavailableError as e:
        return str(e)
    return None


HAVE_GPU = "CUDA" in devices.available(["CUDA"])
"""Whether an NVIDIA GPU with its driver and cuda-bindings starts here."""
NVRTC_MISSING = _nvrtc_missing()
needs_nvrtc = pytest.mark.skipif(NVRTC_MISSING is not None,
                                 reason=f"NVRTC is not installed here ({NVRTC_MISSING}); CI installs it with the dev "
                                        "extra")


@dataclass
class Matmul:
    """One matmul kernel on the PYTHON device: its AST, its buffers (output first) and NumPy's answer."""

    ast: UOp
    buffers: list[UOp]
    want: np.ndarray


def rounded(x: np.ndarray, dt: DType) -> np.ndarray:
    """x's values as dt holds them (as float32 for bfloat16, which NumPy lacks)."""
    if dt is dtypes.bfloat16:
        return np.vectorize(dt.normalize, otypes=[np.float32])(x.astype(np.float32))
    return x.astype(dtypes.to_numpy(dt)).astype(np.float32)


def matmul(shape_a: Sequence[int], shape_b: Sequence[int], dt: DType, accumulate: bool = True,
           seed: int = 0) -> Matmul:
    """A @ B with A, B of dtype dt: `accumulate` is fp32 accumulation of dt inputs (A.float() @ B.float()), else
    dt's own matmul (products rounded to dt, summed in float32, the result rounded to dt)."""
    rng = np.random.default_rng(seed)
    a32, b32 = (rng.random(s, dtype=np.float32) * 2 - 1 for s in (shape_a, shape_b))
    a, b = (Tensor(x, device="PYTHON").cast(dt).realize() for x in (a32, b32))
    out = a.float() @ b.float() if accumulate else a @ b
    (ast, bufs), = kernels_of(schedule([out.uop]))
    ra, rb = rounded(a32, dt), rounded(b32, dt)
    if accumulate:
        want = np.matmul(ra.astype(np.float64), rb.astype(np.float64))
    else:
        want = rounded((rounded(ra[..., :, :, None] * rb[..., None, :, :], dt)).sum(-2), dt)
    return Matmul(ast, bufs, want.astype(np.float32))


def run_python(m: Matmul, opts: Sequence[Opt], target: Target = SM80) -> tuple[Kernel, np.ndarray]:
    """The kernel lowered for `target` with opts, run on the PYTHON interpreter: (kernel, the output as float32;
    the interpreter keeps bfloat16 as float32 values)."""
    k = lower(m.ast, target, opts)
    PythonRuntime().compile(k)([buffers.handle(b) for b in m.buffers])
    return k, buffers.to_numpy(m.buffers[0]).astype(np.float32).reshape(m.want.shape)


Kernels = list[tuple[UOp, list[UOp]]]


def _inputs(name: str, dt: DType, arrays: list[np.ndarray] | None, sizes: dict[str, int]) -> list[Tensor]:
    z = ZOO[name]
    if arrays is None:  # shapes only: for lowering, nothing runs
        return [Tensor.empty(*i.shape(sizes), dtype=dt if np.dtype(i.dtype).kind == "f" else i.dtype, device="PYTHON")
                for i in z.inputs]
    ins = [Tensor(a, device="PYTHON") for a in arrays]
    return [t.cast(dt).realize() if t.dtype.is_float else t for t in ins]


def zoo_kernels(name: str, dt: DType) -> Kernels:
    """A zoo program at its default sizes with its float inputs in dt (no data): its kernels (AST, buffers)."""
    z = ZOO[name]
    return kernels_of(schedule([z.program(*_inputs(name, dt, None, z.sizes())).uop]))


def zoo_run(name: str, dt: DType, **sizes: int) -> tuple[Kernels, list[np.ndarray]]:
    """A zoo program at its small sizes (some overridden) on random inputs, its float inputs in dt: its kernels
    in order, and the input arrays."""
    z = ZOO[name]
    full = z.sizes(small=True, **sizes)
    arrays = z.arrays(full)
    return kernels_of(schedule([z.program(*_inputs(name, dt, arrays, full)).uop])), arrays


def run_program_python(kernels: Kernels, target: Target = SM80) -> list[Kernel]:
    """Each kernel lowered for target with the heuristic's opts and run in order on the PYTHON interpreter."""
    out = []
    for ast, bufs in kernels:
        k = lower(ast, target, heuristic_opts(scheduler(ast, target)))
        PythonRuntime().compile(k)([buffers.handle(b) for b in bufs])
        out.append(k)
    return out
