"""The `loop epilogues` pass (codegen/epilogue.py): a tiled reduction's expensive epilogue runs once per vector of
the tile in a loop over its copies, not copied for each, checked against NumPy on CPU and PYTHON; where it must not
fire (a cheap epilogue, copies that share one sum, a target without private memory) the kernel is exactly the one
lowered without it; and the heuristic's code size counts a looped epilogue once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

from uopviz import Tensor
from uopviz.codegen.epilogue import looped_epilogues
from uopviz.codegen.expand import lane_axes
from uopviz.codegen.opt import Opt, OptOps
from uopviz.codegen.opt.heuristic import _size
from uopviz.pipeline import kernels_of, lower, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.target import Kernel, Target
from uopviz.uop.ops import AddrSpace, AxisType, Ops, UOp

SPLIT, U = OptOps.SPLIT, AxisType.UPCAST
TERMS = {"exp2": "0.24022650718688965f", "gelu": "0.16666415333747864f"}
"""A coefficient of the CPU's exp2 polynomial, and of exp's (which GELU's density takes: it reduces its argument and
builds e^r itself, and its RECIP makes the epilogue expensive): a fixed count of lines of C per epilogue written."""
TILE = [Opt(SPLIT, 1, (16, U, False)), Opt(SPLIT, 1, (2, U, False)), Opt(SPLIT, 0, (4, U, False))]
"""A tile of 4 rows by 2 vectors of 16 columns: 8 copies of the epilogue without the pass."""
SMALL_TILE = [Opt(SPLIT, 1, (4, U, False)), Opt(SPLIT, 0, (4, U, False))]
"""The interpreter's (a target without vector types, whose lanes count as copies toward MAX_EXPANDED): 4 rows by a
vector of 4 columns."""

rng = np.random.default_rng(5)
A, B = rng.standard_normal((8, 40)).astype(np.float32), rng.standard_normal((40, 64)).astype(np.float32)
C = rng.standard_normal((8, 64)).astype(np.float32)


def _gelu_np(x: np.ndarray) -> np.ndarray:
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


EPILOGUES: dict[str, tuple[Callable[[Tensor, Tensor], Tensor], Callable[[np.ndarray, np.ndarray], np.ndarray]]] = {
    "exp2": (lambda y, c: (y * 0.1).exp2() * c, lambda y, c: np.exp2(y * 0.1) * c),
    "gelu": (lambda y, c: y.gelu() + c, lambda y, c: _gelu_np(y) + c),
    "sigmoid": (lambda y, c: y.sigmoid(), lambda y, c: 1 / (1 + np.exp(-y))),
}


def matmul_kernel(epilogue: Callable[[Tensor, Tensor], Tensor], device: str) -> tuple[UOp, list[UOp], Tensor]:
    """The kernel of epilogue(A @ B, C) (the operands it reads realized first), its buffers and the result."""
    a, b, c = (Tensor(x, device=device).realize() for x in (A, B, C))
    out = epilogue(a @ b, c)
    ks = kernels_of(schedule([out.uop]))
    for ast, bufs in ks[:-1]:  # a packed operand
        run(lower(ast, devices.get(device).target, []), device, bufs)
    ast, bufs = ks[-1]
    return ast, bufs, out


def run(k: Kernel, device: str, bufs: list[UOp]) -> None:
    devices.get(device).compile(k)([buffers.handle(b) for b in bufs], wait=True)


def tiles(k: Kernel, size: int) -> int:
    """How many of the kernel's REG buffers have a tile's size."""
    return sum(u.op is Ops.BUFFER and u.arg.addrspace is AddrSpace.REG and u.arg.size == size for u in k.linear.src)


def without_pass(target: Target) -> Target:
    return dataclasses.replace(target, private_memory=0)


@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
@pytest.mark.parametrize("name", list(EPILOGUES))
def test_an_expensive_epilogue_loops_over_the_tile(name: str, device: str) -> None:
    fn, ref = EPILOGUES[name]
    ast, bufs, out = matmul_kernel(fn, device)
    target = devices.get(device).target
    opts, size = (TILE, 4 * 2 * 16) if device == "CPU" else (SMALL_TILE, 4 * 4)
    k, old = lower(ast, target, opts), lower(ast, without_pass(target), opts)
    assert tiles(k, size) == 1 and tiles(old, size) == 0
    if device == "CPU" and name in TERMS:  # the epilogue's exponential is written once, not once per copy
        assert 8 * k.source.count(TERMS[name]) == old.source.count(TERMS[name]) > 0
    for kernel in (k, old):
        buffers.handle(bufs[0])[:] = np.nan
        run(kernel, device, bufs)
        got = buffers.to_numpy(bufs[0])[: A.shape[0] * B.shape[1]].reshape(out.shape)
        np.testing.assert_allclose(got, ref(A.astype(np.float64) @ B, C), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("fn", "opts"), [
    (lambda y, c: y * 2 + c, TILE),  # cheap: copies cost nothing
    (lambda y, c: y.exp(), TILE[:1]),  # no copies: a vector alone
])
def test_the_pass_leaves_other_kernels_alone(fn: Callable[[Tensor, Tensor], Tensor], opts: list[Opt]) -> None:
    ast, _, _ = matmul_kernel(fn, "CPU")
    target = devices.get("CPU").target
    assert lower(ast, target, opts).linear is lower(ast, without_pass(target), opts).linear


def test_a_row_kernels_copies_share_their_sums() -> None:
    """Softmax's output loop copied 3 times along the row it summed: every copy reads one max and one sum, so
    there is no tile of sums to loop over (the row cache's case, codegen/rowcache.py)."""
    x = Tensor(rng.standard_normal((6, 129)).astype(np.float32), device="CPU")
    (ast, _), = kernels_of(schedule([x.softmax(-1).uop]))
    target = devices.get("CPU").target
    s = scheduler_of(ast, target)
    for o in (Opt(SPLIT, 1, (3, U, False)), Opt(SPLIT, 3, (3, AxisType.UNROLL, False))):
        s = s.apply_opt(o)
    assert [r.src[0].arg.value for r in s.ast.toposort() if r.op is Ops.RANGE and r.arg.type is U] == [3]
    assert looped_epilogues(s.ast, lane_axes(s.ast), target.private_memory) == []


def test_code_size_counts_a_looped_epilogue_once() -> None:
    """The heuristic's code size (codegen/opt/size.py) of the 8-copy tile: the GELU written once where the pass
    loops it, 8 times where it cannot (no private memory)."""
    ast, _, _ = matmul_kernel(EPILOGUES["gelu"][0], "CPU")
    target = devices.get("CPU").target

    def size(t: Target, opts: list[Opt]) -> int:
        s = scheduler_of(ast, t)
        for o in opts:
            s = s.apply_opt(o)
        return _size(s).ops
    vector, looped, copied = size(target, TILE[:1]), size(target, TILE), size(without_pass(target), TILE)
    assert copied - vector > 4 * (looped - vector) > 0
