"""The `prefetch` pass (codegen/prefetch.py): on the CPU, a matmul whose B rows are far apart prefetches the rows its
k loop reads some steps later, and a row kernel prefetches the next row in one of its loops; results match NumPy on
CPU, PYTHON and CL at sizes that are not powers of two, OpenCL and the interpreter get no prefetch, a contiguous
kernel gets none, and the op is checked by the spec like every op."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np
import pytest
from devices_here import needs_cl
from uopviz.kernels import ZOO

import uopviz
from uopviz import Tensor
from uopviz.codegen.prefetch import DISTANCE
from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, lower, schedule
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.search.policy import default_opts
from uopviz.target import Kernel
from uopviz.uop.ops import Ops, SpecError, UOp
from uopviz.uop.spec import validate

DEVICES = ["CPU", "PYTHON", pytest.param("CL", marks=needs_cl)]
RNG = np.random.default_rng(15)
A, B = RNG.standard_normal((24, 40)).astype(np.float32), RNG.standard_normal((40, 700)).astype(np.float32)
X = RNG.standard_normal((13, 1000)).astype(np.float32)

softmax_np = ZOO["softmax"].reference  # NumPy's softmax over the last axis


CASES: dict[str, tuple[Callable[..., Tensor], tuple[np.ndarray, ...], np.ndarray]] = {
    "gemm 24x40x700": (lambda a, b: a @ b, (A, B), A.astype(np.float64) @ B),
    "softmax 13x1000": (lambda x: x.softmax(-1), (X,), softmax_np(X.astype(np.float64))),
}


def _kernels(out: Tensor, device: str) -> list[Kernel]:
    return [compile_kernel(ast, device, default_opts(ast, device))[0] for ast, _ in kernels_of(schedule([out.uop]))]


def _prefetches(k: Kernel) -> list[str]:
    """The element index each prefetch of the kernel's C source hints at (its address is reckoned in integers)."""
    spelled = r"__builtin_prefetch\(\(const void\*\)\(\(__UINTPTR_TYPE__\)\w+ \+ sizeof\(\*\w+\) \* \((.*)\)\)\);"
    return re.findall(spelled, k.source or "")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_results_and_where_prefetches_go(case: str, device: str) -> None:
    fn, arrays, want = CASES[case]
    out = fn(*(Tensor(a, device=device) for a in arrays))
    kernels = _kernels(out, device)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    prefetched = [p for k in kernels for p in _prefetches(k)]
    ops = [u for k in kernels for u in k.linear.src if u.op is Ops.PREFETCH]
    if device != "CPU":  # OpenCL and the interpreter keep their kernels as they were
        assert not prefetched and not ops
    elif case.startswith("gemm"):  # B's rows are 2800 bytes apart: the lines of k + DISTANCE, one per line
        line = devices.get("CPU").target.l1.line // 4  # floats per cache line of this machine (16 on x86)
        assert len(prefetched) == len(ops) == -(-48 // line)  # the tile's 3 vectors of 16 floats
        assert all(p.endswith(f"+{DISTANCE * 700 + line * i}") for i, p in enumerate(prefetched))
    else:  # the next row (1000 floats on), in one of the row's three loops
        assert len(prefetched) == len(ops) == 1 and prefetched[0].endswith("+1000")


def test_a_contiguous_kernel_gets_none() -> None:
    x = RNG.standard_normal((37, 1000)).astype(np.float32)
    out = Tensor(x) * 2 + 1
    assert not any(_prefetches(k) for k in _kernels(out, "CPU"))
    np.testing.assert_allclose(out.numpy(), x * 2 + 1, rtol=1e-6)


def test_the_interpreter_skips_it() -> None:
    """A gemm lowered for an interpreter that asks for prefetches (with the CPU's cache) runs them as no-ops."""
    rt = devices.get("PYTHON")
    target = dataclasses.replace(rt.target, prefetch=2048, l1=devices.get("CPU").target.l1)
    a, b = A[:5], B
    out = Tensor(a, device="PYTHON") @ Tensor(b, device="PYTHON")
    (ast, bufs), = kernels_of(schedule([out.uop]))
    kernel = lower(ast, target, default_opts(ast, "PYTHON"))
    assert any(u.op is Ops.PREFETCH for u in kernel.linear.src)
    rt.compile(kernel)([buffers.handle(x) for x in bufs])
    got = buffers.to_numpy(bufs[0])[:5 * 700].reshape(5, 700)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)


def test_the_op_is_checked() -> None:
    p = UOp.param(1, (64,))
    at = UOp.range(UOp.const(uopviz.dtypes.index, 8), 0)
    ok = UOp(Ops.PREFETCH, (p.index(at * 8),))
    assert validate(ok) is ok and ok.dtype == uopviz.dtypes.void
    bad = [(UOp(Ops.PREFETCH, (p,)), "src-op"),
           (UOp(Ops.PREFETCH, (p.index(UOp(Ops.STACK, (at, at + 1))),)), "prefetch-address"),
           (UOp(Ops.PREFETCH, (p.index(at), p.index(at))), "arity")]
    for u, rule in bad:
        with pytest.raises(SpecError) as e:
            validate(u)
        assert e.value.rule == rule


def test_the_pass_is_a_step_of_the_trace() -> None:
    with uopviz.trace() as tr:
        got = Tensor(X).softmax(-1).numpy()
    kernel = next(c for c in tr.contexts if c.name.startswith("r_"))
    names = [p.name for p in kernel.passes]
    step = kernel.passes[names.index("prefetch")]
    assert step.stage == "Instruction Selection" and step.error is None
    assert names.index("hardware ids") < names.index("prefetch") < names.index("linearize")
    np.testing.assert_allclose(got, softmax_np(X), rtol=2e-5, atol=1e-6)
