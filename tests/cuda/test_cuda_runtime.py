"""The CUDA device: named errors where it cannot start, the launch shapes and target it derives without a GPU,
and, on a machine with an NVIDIA GPU, its kernels against NumPy, its timings and a BEAM search there."""

from __future__ import annotations

import numpy as np
import pytest
from uopviz.kernels import ZOO

from tests.cuda.support import HAVE_GPU, matmul, run_python
from uopviz.codegen.opt import Opt, OptOps
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.codegen.tc import MMA_SYNC
from uopviz.compiler import compile_kernel
from uopviz.dtype import DType, dtypes
from uopviz.pipeline import kernels_of, lower, schedule, scheduler
from uopviz.renderer.cstyle import render
from uopviz.renderer.dialect import CUDA
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.cuda import cuda_target, launch_shape
from uopviz.runtime.device import CompileError, DeviceUnavailableError
from uopviz.runtime.python import PythonRuntime
from uopviz.search import beam
from uopviz.search.keys import describe_target
from uopviz.target import Kernel
from uopviz.tensor import Tensor
from uopviz.uop.ops import UOp

needs_gpu = pytest.mark.skipif(not HAVE_GPU, reason="no NVIDIA GPU with a driver and cuda-bindings here")


@pytest.mark.skipif(HAVE_GPU, reason="this machine has a GPU: the device starts")
def test_without_a_gpu_the_device_is_unavailable_and_says_how_to_get_it() -> None:
    with pytest.raises(DeviceUnavailableError, match=r"pip install 'uopviz\[cuda\]'"):
        devices.get("cuda")
    with pytest.raises(DeviceUnavailableError, match="CUDA device needs"):
        Tensor([1.0, 2.0], device="CUDA").numpy()
    with pytest.raises(DeviceUnavailableError):
        describe_target("CUDA")
    assert "CUDA" not in devices.available() and "CPU" in devices.available()
    np.testing.assert_array_equal((Tensor([1.0, 2.0]) * 2).numpy(), [2.0, 4.0])  # nothing else breaks


def test_cuda_targets_need_no_gpu() -> None:
    assert cuda_target("sm_90").tensor_cores == MMA_SYNC and cuda_target("sm_86").tensor_cores == MMA_SYNC
    assert cuda_target("sm_75").tensor_cores == ()
    with pytest.raises(ValueError, match="sm_ and its compute capability"):
        cuda_target("gfx90a")


def _kernel(global_size: tuple[int, ...] | None, local_size: tuple[int, ...] | None) -> Kernel:
    return Kernel("k", UOp.sink(), "", (), global_size, local_size)


def test_launch_shapes() -> None:
    assert launch_shape(_kernel((1000, 6), None)) == ((250, 1, 1), (4, 6, 1))  # blocks divide the grid
    assert launch_shape(_kernel((97,), None)) == ((97, 1, 1), (1, 1, 1))
    assert launch_shape(_kernel((4096, 64), (32, 4))) == ((32, 4, 1), (128, 16, 1))
    assert launch_shape(_kernel(None, None)) == ((1, 1, 1), (1, 1, 1))
    with pytest.raises(CompileError, match=r"block \(32, 4, 128\) exceeds \(1024, 1024, 64\)"):
        launch_shape(_kernel((32, 4, 128), (32, 4, 128)))
    with pytest.raises(CompileError, match=r"grid \(1, 100000, 1\) exceeds"):
        launch_shape(_kernel((1, 100000), (1, 1)))


def test_cuda_source_spells_the_hardware() -> None:
    mm = matmul((32, 32), (32, 16), dtypes.bfloat16)
    k = lower(mm.ast, cuda_target("sm_80"), [Opt(OptOps.TC, 2, (-1, 0, 0))])
    src = k.source or ""
    assert src == render(k.linear, k.name, CUDA, k.params, cuda_target("sm_80").emulated)
    assert 'extern "C" __global__ void __launch_bounds__(32)' in src and "threadIdx.x" in src
    assert "blockIdx.x" in src and "bfloat16_bits" in src and "mma.sync.aligned.m16n8k16" in src
    assert k.local_size == (32, 1) and k.global_size == (64, 2)  # two blocks of one warp along x and y


def test_a_gpu_matmul_is_a_block_of_register_tiles() -> None:
    """fp32 matmul on a GPU target: 16 x 16 threads a block, each a 4 x 4 tile of outputs summed with fma; run
    on the PYTHON interpreter against NumPy."""
    mm = matmul((128, 48), (48, 64), dtypes.float32)
    target = cuda_target("sm_90")
    opts = heuristic_opts(scheduler(mm.ast, target))
    kernel, got = run_python(mm, opts, target)
    assert kernel.local_size == (16, 16) and "_u4_u4" in kernel.name and "fmaf(" in (kernel.source or "")
    np.testing.assert_allclose(got, mm.want, rtol=1e-5, atol=1e-5)


# ---- on a GPU ----
@needs_gpu
@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_on_the_gpu_equals_numpy(name: str) -> None:
    z = ZOO[name]
    out, arrays = z.build(z.sizes(small=True), "CUDA")
    np.testing.assert_allclose(out.numpy(), z.reference(*arrays), rtol=max(z.rtol, 1e-4), atol=1e-4)


def _values(buf: UOp) -> np.ndarray:
    """A CUDA buffer's values as float32 (bfloat16 comes back as its 16-bit patterns)."""
    x = buffers.to_numpy(buf)
    return (x.astype(np.uint32) << 16).view(np.float32) if buf.arg.dtype is dtypes.bfloat16 else x.astype(np.float32)


@needs_gpu
@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16], ids=lambda d: d.name)
def test_tensor_cores_on_the_gpu(dt: DType) -> None:
    """The heuristic's TC kernel, run by the GPU's mma.sync, against NumPy and against the PYTHON interpreter's
    run of the same Linear program; then timed by events."""
    rng = np.random.default_rng(0)
    A, B = (Tensor(rng.random(s, dtype=np.float32) * 2 - 1, device="CUDA").cast(dt).realize()
            for s in ((256, 128), (128, 64)))
    (ast, bufs), = kernels_of(schedule([(A.float() @ B.float()).uop]))
    opts = heuristic_opts(scheduler(ast, devices.get("CUDA").target))
    assert opts[0].op is OptOps.TC
    kernel, prog = compile_kernel(ast, "CUDA", opts)
    prog([buffers.handle(x) for x in bufs])
    got, a, b = (_values(x) for x in bufs)
    np.testing.assert_allclose(got.reshape(256, 64), a.reshape(256, 128) @ b.reshape(128, 64), rtol=1e-4, atol=1e-4)
    host = [np.zeros(256 * 64, np.float32), *((a, b) if dt is dtypes.bfloat16 else (a.astype(np.float16),
                                                                                    b.astype(np.float16)))]
    PythonRuntime().compile(kernel)(host)
    np.testing.assert_allclose(got, host[0], rtol=1e-5, atol=1e-5)
    assert prog([buffers.handle(x) for x in bufs], wait=True) > 0


@needs_gpu
def test_beam_on_the_gpu() -> None:
    A, B = (Tensor(np.ones((128, 128), np.float16), device="CUDA").realize() for _ in range(2))
    (ast, _), = kernels_of(schedule([(A.float() @ B.float()).uop]))
    r = beam(ast, 2, "CUDA", max_rounds=2, progress=False)
    assert r.time_s > 0 and r.heuristic_s is not None


@needs_gpu
def test_gpu_timing_and_description() -> None:
    rt = devices.get("CUDA")
    d = rt.describe()
    assert d["name"] and d["driver"].startswith("CUDA ") and d["arch"].startswith("sm_")
    info = describe_target("CUDA")
    assert info.device_name == d["name"] and info.driver == d["driver"]
