"""The CL runtime on hand-written OpenCL C kernels, against NumPy; and its errors, each of which says what to do."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from uopviz.dtype import DType, dtypes
from uopviz.renderer.dialect import OPENCL
from uopviz.runtime.device import CompileError, DeviceUnavailableError
from uopviz.target import Kernel
from uopviz.uop.ops import Ops, UOp

cl_runtime = pytest.importorskip("uopviz.runtime.cl")
NOP = UOp(Ops.LINEAR, ())


@pytest.fixture(scope="module")
def rt() -> cl_runtime.CLRuntime:
    try:
        return cl_runtime.CLRuntime()
    except DeviceUnavailableError as e:
        pytest.skip(f"no OpenCL device here: {e}")


def kernel(name: str, source: str, params: tuple[DType, ...], global_size: tuple[int, ...] | None = None,
           vars: tuple[str, ...] = ()) -> Kernel:
    return Kernel(name, NOP, source, params, global_size=global_size, vars=vars)


def upload(rt: cl_runtime.CLRuntime, a: np.ndarray) -> object:
    h = rt.alloc(a.size, dtypes.from_numpy(a.dtype))
    rt.copyin(h, a)
    return h


VADD = """__kernel void vadd(__global float* out, __global const float* a, __global const float* b, int n) {
  int i = get_global_id(0);
  if (i < n) out[i] = a[i] + b[i];
}"""


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_vector_add(rt: cl_runtime.CLRuntime, n: int) -> None:
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = rt.alloc(n, dtypes.float32)
    prog = rt.compile(kernel("vadd", VADD, (dtypes.float32,) * 3, (n,), vars=("n",)))
    t = prog([out, upload(rt, a), upload(rt, b)], (n,), wait=True)
    assert isinstance(t, float) and t >= 0
    np.testing.assert_array_equal(rt.copyout(out, n, dtypes.float32), a + b)


def test_int_kernel_and_program_cache(rt: cl_runtime.CLRuntime) -> None:
    src = """__kernel void bits(__global int* out, __global const int* a) {
  int i = get_global_id(0);
  out[i] = (a[i] * 3) ^ (a[i] >> 2);
}"""
    a = np.array([-9, -1, 0, 5, 1 << 20, 123457], np.int32)
    out = rt.alloc(6, dtypes.int32)
    k = kernel("bits", src, (dtypes.int32, dtypes.int32), (6,))
    assert rt.compile(k)([out, upload(rt, a)]) is None
    rt.synchronize()
    np.testing.assert_array_equal(rt.copyout(out, 6, dtypes.int32), (a * 3) ^ (a >> 2))
    built = len(rt._programs)
    rt.compile(k)
    assert len(rt._programs) == built and src in rt._programs


def test_2d_global_size(rt: cl_runtime.CLRuntime) -> None:
    src = """__kernel void ids(__global int* out) {
  int x = get_global_id(0), y = get_global_id(1);
  out[y * get_global_size(0) + x] = 100 * y + x;
}"""
    out = rt.alloc(5 * 3, dtypes.int32)
    rt.compile(kernel("ids", src, (dtypes.int32,), (5, 3)))([out], wait=True)
    y, x = np.mgrid[0:3, 0:5]
    np.testing.assert_array_equal(rt.copyout(out, 15, dtypes.int32).reshape(3, 5), 100 * y + x)


def test_empty_buffer(rt: cl_runtime.CLRuntime) -> None:
    h = rt.alloc(0, dtypes.float32)
    rt.copyin(h, np.zeros(0, np.float32))
    assert rt.copyout(h, 0, dtypes.float32).shape == (0,)


def test_compile_error_keeps_source_and_log(rt: cl_runtime.CLRuntime) -> None:
    src = "__kernel void bad(__global float* out) { out[0] = undefined_name; }"
    with pytest.raises(CompileError) as info:
        rt.compile(kernel("bad", src, (dtypes.float32,)))
    assert info.value.source == src and "undefined_name" in info.value.log
    assert src in str(info.value) and "undefined_name" in str(info.value).split("--- source ---")[0]


def scaled(c: float, helper: str = "x") -> str:
    """A kernel named `scale` with a helper named `twice`, as the renderer names both alike in many kernels."""
    return (f"static inline float twice(float x) {{ return {helper} * 2.0f; }}\n"
            f"__kernel void scale(__global float* out, __global const float* a) {{\n"
            f"  int i = get_global_id(0);\n  out[i] = twice(a[i]) * {c}f;\n}}\n")


def test_kernels_build_as_one_program_each_taken_by_name(rt: cl_runtime.CLRuntime) -> None:
    """Kernels of one name, their helpers of one name too, share one program (one compiler run) and each runs its
    own code; a kernel with other extension pragmas gets a program of its own."""
    a = np.arange(8, dtype=np.float32) - 3
    sources = [scaled(1.5), scaled(-2.0), scaled(0.25, helper="(x + 1.0f)")]
    wanted = [a * 2 * 1.5, a * 2 * -2.0, (a + 1) * 2 * 0.25]
    fp64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + scaled(3.0)
    ks = [kernel("scale", src, (dtypes.float32,) * 2, (8,)) for src in [*sources, fp64]]
    rt.libraries(ks)
    assert rt._programs[sources[0]] is rt._programs[sources[1]] is rt._programs[sources[2]]
    assert fp64 not in rt._programs  # a batch of one: compile builds it, as it would here
    out = rt.alloc(8, dtypes.float32)
    for k, want in zip(ks, [*wanted, a * 2 * 3.0], strict=True):
        rt.compile(k)([out, upload(rt, a)])
        np.testing.assert_array_equal(rt.copyout(out, 8, dtypes.float32), want)
    assert rt._programs[fp64] is not rt._programs[sources[0]]


def test_a_bad_kernel_in_a_batch_fails_alone(rt: cl_runtime.CLRuntime) -> None:
    """A batch that does not compile is left to compile, kernel by kernel: the others run, and the bad one's error
    names it, shows its own source and its line as the source numbers it."""
    bad = "__kernel void bad(__global float* out) {\n  int i = 0;\n  out[i] = undefined_name;\n}"
    good = [scaled(4.0), scaled(5.0)]
    ks = [kernel("scale", good[0], (dtypes.float32,) * 2, (8,)), kernel("bad", bad, (dtypes.float32,)),
          kernel("scale", good[1], (dtypes.float32,) * 2, (8,))]
    rt.libraries(ks)
    a, out = np.ones(8, np.float32), rt.alloc(8, dtypes.float32)
    for k, c in ((ks[0], 4.0), (ks[2], 5.0)):
        rt.compile(k)([out, upload(rt, a)])
        np.testing.assert_array_equal(rt.copyout(out, 8, dtypes.float32), a * 2 * c)
    with pytest.raises(CompileError) as info:
        rt.compile(ks[1])
    assert info.value.name == "bad" and info.value.source == bad
    assert ":3:" in info.value.log and "undefined_name" in info.value.log


def test_describe(rt: cl_runtime.CLRuntime) -> None:
    d = rt.describe()
    assert d["device"] == "CL" and d["name"] and d["opencl"].startswith("OpenCL")
    assert rt.target.dialect is OPENCL and rt.target.max_local == rt.device.max_work_group_size


def test_device_choice(rt: cl_runtime.CLRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPVIZ_CL_DEVICE", "nomatch")
    with pytest.raises(DeviceUnavailableError, match=r"matches no OpenCL device.*0:0 "):
        cl_runtime.CLRuntime()
    monkeypatch.setenv("UOPVIZ_CL_DEVICE", "0:0")
    assert cl_runtime.CLRuntime().device.name
    monkeypatch.setenv("UOPVIZ_CL_DEVICE", rt.device.name.strip()[:6].upper())
    assert cl_runtime.CLRuntime().device.name == rt.device.name


def test_missing_pyopencl_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyopencl", None)
    with pytest.raises(DeviceUnavailableError, match=r"pip install 'uopviz\[opencl\]'.*pocl-opencl-icd"):
        cl_runtime.CLRuntime()


def test_no_platform_says_how_to_install() -> None:
    class FakeCL:
        class Error(Exception):
            pass

        @staticmethod
        def get_platforms() -> list[object]:
            raise FakeCL.Error("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    with pytest.raises(DeviceUnavailableError, match=r"no OpenCL platform found \(.*PLATFORM_NOT_FOUND_KHR.*pocl"):
        cl_runtime._pick_device(FakeCL, "")
