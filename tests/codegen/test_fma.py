"""The CPU's fused multiply-add (the `fuse multiply-add` pass), its matmul register tile and its THREAD factors:
answers against NumPy, the pass in the trace, and what a target without an FMA keeps."""

from __future__ import annotations

import dataclasses
import platform
import subprocess

import numpy as np
import pytest
from uopviz.kernels import ZOO

import uopviz
from uopviz.codegen.decompositions import fuse_mulacc
from uopviz.codegen.opt import Opt, OptOps
from uopviz.codegen.opt.heuristic import heuristic_opts, thread_factors
from uopviz.compiler import compile_kernel
from uopviz.dtype import dtypes
from uopviz.pipeline import kernels_of, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.cpu import FLAGS, find_compiler
from uopviz.tensor import Tensor
from uopviz.uop.ops import AxisType, Ops, UOp

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]


def test_rule_fuses_float_products_only() -> None:
    a, b, c = (UOp.const(dtypes.float32, v) for v in (1.5, 2.5, 3.5))
    fused = fuse_mulacc(c + a * b)
    assert fused is not None and fused.op is Ops.MULACC and fused.src == (a, b, c)
    assert fuse_mulacc(a * b + c).src == (a, b, c)  # type: ignore[union-attr]
    assert fuse_mulacc(c + a * -1.0) is None  # a subtraction stays one
    i, j, k = (UOp.const(dtypes.int32, v) for v in (2, 3, 4))
    assert fuse_mulacc(k + i * j) is None  # integers (and index arithmetic) are exact either way
    h = [UOp.const(dtypes.bfloat16, v) for v in (1.0, 2.0, 3.0)]
    assert fuse_mulacc(h[2] + h[0] * h[1]) is None  # an emulated type rounds after every op


def test_cpu_rounds_a_product_and_a_constant_once_python_twice() -> None:
    """(1+2^-12)^2 - 1 = 2^-11 + 2^-24 exactly; rounding the product to float32 first loses the 2^-24. A product
    and a constant (a polynomial's step) are one fused multiply-add on the CPU."""
    x = np.full(5, 1 + 2.0 ** -12, np.float32)
    exact, twice = np.float32(2.0 ** -11 + 2.0 ** -24), np.float32(2.0 ** -11)
    got = {d: (Tensor(x, device=d) * Tensor(x, device=d) + -1.0).numpy() for d in ("CPU", "PYTHON")}
    assert (got["CPU"] == exact).all() and (got["PYTHON"] == twice).all()


def test_a_product_and_a_tensor_are_rounded_twice_everywhere() -> None:
    """A product added to another value of the program rounds as NumPy and torch round it, on every device: fused,
    it no longer cancels with the same product rounded in another kernel (x·c − max(x·c) was not 0 at the max, so a
    1-wide softmax had a gradient of 3e-4 for torch's 0; fuzzer, CPU seed 82618: tests/tensor/test_fuzz.py)."""
    x = np.full(5, 1 + 2.0 ** -12, np.float32)
    c = np.full(5, -1.0, np.float32)
    for d in DEVICES:
        got = (Tensor(x, device=d) * Tensor(x, device=d) + Tensor(c, device=d)).numpy()
        assert (got == x * x + c).all(), d


@pytest.fixture(scope="module")
def gemm() -> tuple[UOp, list[UOp], np.ndarray]:
    z = ZOO["gemm"]
    arrays = z.arrays(z.sizes(M=40, K=200, N=40))
    (ast, bufs), = kernels_of(schedule([z.program(*z.tensors(arrays, "CPU")).uop]))
    return ast, bufs, z.reference(*arrays)


def test_matmul_tile_is_fused(gemm: tuple[UOp, list[UOp], np.ndarray]) -> None:
    ast, bufs, want = gemm
    opts = heuristic_opts(scheduler_of(ast, devices.get("CPU").target))
    with uopviz.trace() as tr:
        kernel, prog = compile_kernel(ast, "CPU", opts)
    # 40 columns: a float8 (16 does not divide 40); 8 rows; the 40 rows' other factor over the cores
    assert kernel.name.endswith("_R200_u8_u8"), kernel.name
    assert "fmaf(" in (kernel.source or "")
    steps = [p for c in tr.contexts for p in c.passes if p.name == "fuse multiply-add"]
    assert steps and any(p.steps for p in steps)
    prog([buffers.handle(b) for b in bufs], wait=True)
    np.testing.assert_allclose(buffers.to_numpy(bufs[0]).reshape(want.shape), want, rtol=1e-5, atol=1e-5)


def test_targets_without_fma_keep_product_and_sum(gemm: tuple[UOp, list[UOp], np.ndarray]) -> None:
    ast, _, _ = gemm
    for device in ["PYTHON", *devices.available(["CL"])]:
        kernel, _ = compile_kernel(ast, device, [])
        ops = {u.op for u in kernel.linear.toposort()}
        assert Ops.MULACC not in ops and Ops.MUL in ops, device


def test_thread_factors_divide_and_keep_the_cores_busy() -> None:
    assert thread_factors(125, 2)[0] == 25  # 25 calls keep 2 cores 96% busy, 5 calls 83%
    assert thread_factors(1024, 2)[0] == 8  # every power of two keeps them busy: four calls a core
    assert thread_factors(7, 2) == (7,)
    assert thread_factors(1, 2) == ()
    assert all(250 % k == 0 and 2 <= k <= 64 for k in thread_factors(250, 2))
    assert thread_factors(21, 2)[0] == 21  # one core takes 11 calls, the other 10: 95% busy, the best alone
    assert thread_factors(21, 2, lambda k: True)[0] == 7  # three strips a call, where a later split evens them out
    assert thread_factors(21, 2, lambda k: False)[0] == 21  # no later split can: the busiest alone


def test_uneven_column_strips_are_balanced_by_a_second_thread_split() -> None:
    """gemm 1000 on 2 cores: 21 column strips of 48 cannot be shared evenly, so 7 calls of 3 strips each split
    their 125 row blocks 25 ways: 175 calls, one index whose digits are the two axes; the answer holds."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1000, 1000), dtype=np.float32) for _ in range(2))
    (ast, bufs), = kernels_of(schedule([(Tensor(a) @ Tensor(b)).uop]))
    target = dataclasses.replace(devices.get("CPU").target, threads=2)
    opts = heuristic_opts(scheduler_of(ast, target))
    assert [o.arg[0] for o in opts if o.op is OptOps.SPLIT and o.arg[1] is AxisType.THREAD] == [7, 25]
    kernel, prog = compile_kernel(ast, "CPU", opts)
    assert kernel.threads == 175
    prog([buffers.handle(x) for x in bufs], wait=True)
    np.testing.assert_allclose(buffers.to_numpy(bufs[0]).reshape(1000, 1000), a @ b, rtol=1e-3, atol=1e-3)


def test_convolution_tile_rows_are_output_channels() -> None:
    """The input's vector (along W) is shared by every output channel, not by the next image row."""
    z = ZOO["conv2d"]
    arrays = z.arrays(z.sizes(N=2, C=3, H=6, W=16, O=8))
    (pad, pad_bufs), (ast, bufs) = kernels_of(schedule([z.program(*z.tensors(arrays, "CPU")).uop]))
    compile_kernel(pad, "CPU", [])[1]([buffers.handle(b) for b in pad_bufs], wait=True)  # the stored padded input
    s = scheduler_of(ast, devices.get("CPU").target)
    opts = heuristic_opts(s)
    assert [(o.axis, o.arg[0]) for o in opts] == [(3, 16), (1, 8)]  # W by a float16, O (axis 1) by 8 rows
    _, prog = compile_kernel(ast, "CPU", opts)
    prog([buffers.handle(b) for b in bufs], wait=True)
    want = z.reference(*arrays)
    np.testing.assert_allclose(buffers.to_numpy(bufs[0]).reshape(want.shape), want, rtol=1e-5, atol=1e-5)


def _assembly(source: str) -> str | None:
    """source compiled as the CPU runtime compiles it, to x86 assembly; None where the compiler does not target
    AVX-512 (the check below is about its 16-lane FMA)."""
    cc = find_compiler()
    flags = [f for f in FLAGS if f not in ("-shared", "-fPIC")]
    macros = subprocess.run([cc, *flags, "-dM", "-E", "-x", "c", "-"], input="", capture_output=True, text=True)
    if platform.machine() not in ("x86_64", "AMD64") or "__AVX512F__" not in macros.stdout:
        return None
    return subprocess.run([cc, *flags, "-S", "-x", "c", "-", "-o", "-"], input=source, capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.parametrize("device", DEVICES)
def test_padded_tile_two_vectors_wide_keeps_vector_fmas(device: str) -> None:
    """50 columns padded to 64 as two 16-lane vectors: the product's operand is a guarded load (a vector load,
    else the last block's gather), where GCC did not merge the helper's lane fmas into a vector FMA and ran 128
    scalar ones with spills (1000x1000 at 6 GFLOP/s)."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((12, 13), np.float32), rng.standard_normal((13, 50), np.float32)
    up = AxisType.UPCAST
    opts = [Opt(OptOps.PADTO, 1, 32), Opt(OptOps.SPLIT, 1, (16, up, False)), Opt(OptOps.SPLIT, 1, (2, up, False))]
    x, y = Tensor(a, device=device), Tensor(b, device=device)
    (ast, bufs), = kernels_of(schedule([(x @ y).uop]))
    kernel, prog = compile_kernel(ast, device, opts)
    prog([buffers.handle(u) for u in bufs], wait=True)
    np.testing.assert_allclose(buffers.to_numpy(bufs[0])[:600].reshape(12, 50), a @ b, rtol=1e-5, atol=1e-5)
    if device == "CPU" and (asm := _assembly(kernel.source or "")) is not None:
        fmas = [line.split()[0] for line in asm.splitlines() if line.strip().startswith("vfmadd")]
        assert fmas and all(op.endswith("ps") for op in fmas), sorted(set(fmas))
