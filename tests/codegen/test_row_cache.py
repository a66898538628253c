"""The `cache row values` pass (codegen/rowcache.py): a row kernel's later loop loads the expensive values its
reduction's loop cached instead of computing them again (softmax's exp once per element), checked against NumPy on
CPU, PYTHON and CL at non-power-of-two sizes, with the heuristic's opts and hand-picked ones; and where it must not
fire (loops split differently, a value that is cheap, a cache that does not fit, a target without private memory),
the kernel is exactly the one lowered without it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from devices_here import needs_cl
from uopviz.kernels import ZOO

import uopviz
from uopviz import Tensor
from uopviz.codegen.opt import Opt, OptOps
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.codegen.rowcache import STACK_BYTES
from uopviz.pipeline import kernels_of, lower, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.cuda import cuda_target
from uopviz.target import Kernel, Target
from uopviz.uop.ops import AddrSpace, AxisType, Ops, UOp

DEVICES = ["CPU", "PYTHON", pytest.param("CL", marks=needs_cl)]
EXP2_TERM = "0.24022650718688965f"  # a coefficient of the CPU's exp2 polynomial: one line of C per Exp2 computed
SPLIT, U, R, T, L = OptOps.SPLIT, AxisType.UPCAST, AxisType.UNROLL, AxisType.THREAD, AxisType.LOCAL

softmax_np = ZOO["softmax"].reference  # NumPy's softmax over the last axis


def _logsoftmax_np(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _logsumexp_np(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))[..., 0]


PROGRAMS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray], bool]] = {
    # name: (program, NumPy reference, whether a later loop computes the reduction's exp again)
    "softmax": (lambda x: x.softmax(-1), softmax_np, True),
    "scaled softmax": (lambda x: (x * 0.5 + 1).softmax(-1), lambda x: softmax_np(x * 0.5 + 1), True),
    "log_softmax": (lambda x: x.log_softmax(-1), _logsoftmax_np, False),
    "logsumexp": (lambda x: x.logsumexp(-1), _logsumexp_np, False),
}


def row_kernel(fn: Callable[[Tensor], Tensor], x: np.ndarray, device: str) -> tuple[UOp, list[UOp], Tensor]:
    """The one kernel of fn(x), its buffers (inputs written), and the lazy result."""
    out = fn(Tensor(x, device=device))
    (ast, bufs), = kernels_of(schedule([out.uop]))
    return ast, bufs, out


def without_pass(target: Target) -> Target:
    return dataclasses.replace(target, private_memory=0)


def caches(k: Kernel, row: int) -> list[int]:
    """Sizes of the kernel's REG buffers that hold whole rows (accumulators hold a vector's lanes at most)."""
    return [u.arg.size for u in k.linear.src if u.op is Ops.BUFFER and u.arg.addrspace is AddrSpace.REG
            and u.arg.size >= row]


def _missing(target: Target) -> set[AxisType]:
    """The axis types the target has no hardware for: THREAD (the CPU's cores), LOCAL (work-groups)."""
    return {t for t, has in ((T, target.threads), (L, target.local_dims)) if not has}


def run(k: Kernel, device: str, bufs: list[UOp], shape: tuple[int, ...]) -> np.ndarray:
    devices.get(device).compile(k)([buffers.handle(b) for b in bufs], wait=True)
    return buffers.to_numpy(bufs[0])[: int(np.prod(shape))].reshape(shape)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("shape", [(7, 1000), (13, 129)])
def test_row_programs_with_the_heuristic(name: str, shape: tuple[int, int], device: str) -> None:
    """The heuristic splits every loop of a row by the same vector width: exp(x - max) is cached on CPU and PYTHON
    (never on CL, whose Target has no private memory), and the answers are NumPy's."""
    fn, ref, again = PROGRAMS[name]
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32) * 4
    ast, bufs, out = row_kernel(fn, x, device)
    target = devices.get(device).target
    k = lower(ast, target, heuristic_opts(scheduler_of(ast, target)))
    fired = bool(caches(k, shape[1]))
    assert fired == (again and device != "CL"), k.name
    if not fired:
        assert k.linear is lower(ast, without_pass(target), k.meta["opts"]).linear
    np.testing.assert_allclose(run(k, device, bufs, out.shape), ref(x), rtol=2e-5, atol=1e-6)


HAND_PICKED: list[tuple[tuple[int, int], list[Opt], list[int]]] = [
    # (shape, opts, sizes of the caches the pass makes)
    ((7, 1000), [], [1000]),  # scalar loops
    ((7, 1000), [Opt(SPLIT, 1, (8, U, False)), Opt(SPLIT, 3, (8, R, False))], [1000]),  # lanes of 8 in both loops
    ((7, 1000), [Opt(OptOps.PADTO, 1, 16), Opt(OptOps.PADTO, 3, 16), Opt(SPLIT, 1, (16, U, False)),
                 Opt(SPLIT, 3, (16, R, False))], [1008]),  # padded rows: the cache holds the padded lanes too
    ((13, 129), [Opt(SPLIT, 1, (3, U, False)), Opt(SPLIT, 3, (3, R, False)), Opt(SPLIT, 0, (13, T, True))],
     [43, 43, 43]),  # copies (3 is no vector width), one cache each, rows split over the threads
    ((6, 129), [Opt(SPLIT, 0, (2, U, False))], [258]),  # two rows a step: their values are the two lanes
    ((6, 129), [Opt(SPLIT, 0, (3, L, False))], [129]),  # rows over a work-group's items (PYTHON), a cache each
    ((7, 1000), [Opt(SPLIT, 1, (8, U, False)), Opt(SPLIT, 3, (4, R, False))], []),  # split differently: no match
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("shape", "opts", "sizes"), HAND_PICKED)
def test_softmax_with_hand_picked_opts(shape: tuple[int, int], opts: list[Opt], sizes: list[int],
                                       device: str) -> None:
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float32) * 4
    ast, bufs, out = row_kernel(PROGRAMS["softmax"][0], x, device)
    target = devices.get(device).target
    opts = [o for o in opts if o.op is not SPLIT or o.arg[1] not in _missing(target)]
    k, old = lower(ast, target, opts), lower(ast, without_pass(target), opts)
    assert caches(k, shape[1] // 3) == (sizes if target.private_memory else [])
    if not sizes or not target.private_memory:
        assert k.linear is old.linear
    if device == "CPU" and sizes:  # the exp2 polynomial (a vector's or a copy's) is written half as often
        assert 2 * k.source.count(EXP2_TERM) == old.source.count(EXP2_TERM) > 0
    if device == "PYTHON" and sizes:  # the interpreter computes Exp2 itself: one instruction per lane in each loop
        exps = [sum(u.op is Ops.EXP2 for u in kk.linear.src) for kk in (k, old)]
        assert 2 * exps[0] == exps[1] > 0
    np.testing.assert_allclose(run(k, device, bufs, out.shape), softmax_np(x), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_attention_rows(device: str) -> None:
    """Attention's softmax row kernel (scores to probabilities) caches its exp like softmax; the whole program
    matches NumPy."""
    z = ZOO["attention"]
    out, arrays = z.build({"S": 13, "D": 7}, device)
    target = devices.get(device).target
    graph = schedule([out.uop])
    fired = []
    for ast, bufs in kernels_of(graph):
        k = lower(ast, target, heuristic_opts(scheduler_of(ast, target)))
        fired.append(bool(caches(k, 13)))
        devices.get(device).compile(k)([buffers.handle(b) for b in bufs], wait=True)
    assert fired == [False, device != "CL", False]
    got = buffers.to_numpy(graph.src[0].src[0])[: out.uop.size].reshape(out.shape)
    np.testing.assert_allclose(got, z.reference(*arrays), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "fn"), [
    ("a cheap value (x*3, in both loops)", lambda x: (x * 3) / (x * 3).sum(-1, keepdim=True)),
    ("layernorm (x - mean, in both loops)", ZOO["layernorm"].program),
])
def test_cheap_values_are_computed_again(name: str, fn: Callable[[Tensor], Tensor]) -> None:
    x = np.ones((5, 99), np.float32)
    ast, _, _ = row_kernel(fn, x, "CPU")
    target = devices.get("CPU").target
    opts = heuristic_opts(scheduler_of(ast, target))
    assert lower(ast, target, opts).linear is lower(ast, without_pass(target), opts).linear, name


def test_a_cache_that_does_not_fit_is_left_out() -> None:
    """The caches of a kernel stay within Target.private_memory: a row of 1000 floats needs 4000 bytes."""
    x = np.ones((3, 1000), np.float32)
    ast, _, _ = row_kernel(PROGRAMS["softmax"][0], x, "CPU")
    target = devices.get("CPU").target
    assert target.private_memory == STACK_BYTES >= 4000
    small = dataclasses.replace(target, private_memory=3999)
    assert lower(ast, small, []).linear is lower(ast, without_pass(target), []).linear
    assert caches(lower(ast, dataclasses.replace(target, private_memory=4000), []), 1000) == [1000]


def test_gpus_keep_computing() -> None:
    """A GPU's Target has no private memory for such arrays (they would spill): its kernel gets no row cache."""
    x = np.ones((3, 1000), np.float32)
    ast, _, _ = row_kernel(PROGRAMS["softmax"][0], x, "CPU")
    target = cuda_target("sm_89")
    assert target.private_memory == 0
    assert not caches(lower(ast, target, []), 1000)


def test_the_pass_is_a_step_of_the_trace() -> None:
    x = Tensor(np.random.default_rng(5).standard_normal((3, 50)).astype(np.float32))
    with uopviz.trace() as tr:
        got = x.softmax(-1).numpy()
    kernel = next(c for c in tr.contexts if c.name.startswith("r_"))
    step = next(p for p in kernel.passes if p.name == "cache row values")
    assert step.stage == "Instruction Selection" and step.error is None
    names = [p.name for p in kernel.passes]
    assert names.index("merge loops") < names.index("cache row values") < names.index("decompose")
    np.testing.assert_allclose(got, softmax_np(x.numpy()), rtol=2e-5, atol=1e-6)
