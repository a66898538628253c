"""Row fusion (the `fuse rows` pass) and the row kernels it makes: one kernel per softmax, layernorm or
logsumexp whose reductions are computed once per row before the row's outputs, each pass its own vector lane axis,
on every runtime against NumPy at non-power-of-two sizes; and the heuristic's rules for such kernels and for
kernels too small to thread."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from uopviz.kernels import ZOO

import uopviz
from uopviz import Tensor
from uopviz.codegen.opt.heuristic import MIN_THREADED, MIN_THREADED_OPS, heuristic_opts
from uopviz.codegen.opt.size import executed_ops
from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.schedule.rows import ROW
from uopviz.uop.ops import AxisType, Ops

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]

softmax_np = ZOO["softmax"].reference  # NumPy's softmax over the last axis


def _logsumexp_np(x: np.ndarray) -> np.ndarray:
    m = x.max(-1, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(-1, keepdims=True)))[..., 0]


ROWS: dict[str, tuple[Callable[[Tensor], Tensor], Callable[[np.ndarray], np.ndarray]]] = {
    "softmax": (lambda x: x.softmax(-1), softmax_np),
    "layernorm": (ZOO["layernorm"].program, ZOO["layernorm"].reference),
    "logsumexp": (lambda x: x.logsumexp(-1), _logsumexp_np),
}


def run(out: Tensor, device: str, heuristic: bool) -> tuple[np.ndarray, list[str], list[str]]:
    """out computed kernel by kernel with no opts or the heuristic's: its value, the kernels' names and sources."""
    names, sources = [], []
    graph = schedule([out.uop])
    for ast, bufs in kernels_of(graph):
        opts = heuristic_opts(scheduler_of(ast, devices.get(device).target)) if heuristic else []
        kernel, prog = compile_kernel(ast, device, opts)
        prog([buffers.handle(b) for b in bufs], wait=True)
        names.append(kernel.name)
        sources.append(kernel.source or "")
    result = graph.src[0].src[0]
    return buffers.to_numpy(result)[: out.uop.size].reshape(out.shape), names, sources


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(ROWS))
@pytest.mark.parametrize("heuristic", [False, True])
def test_row_programs_are_one_kernel(device: str, name: str, heuristic: bool) -> None:
    x = np.random.default_rng(1).standard_normal((7, 45)).astype(np.float32)
    fn, ref = ROWS[name]
    got, names, _ = run(fn(Tensor(x, device=device)), device, heuristic)
    assert len(names) == 1 and names[0].startswith("r_")
    np.testing.assert_allclose(got, ref(x), rtol=1e-4, atol=1e-5)


def test_the_pass_is_a_step_of_the_trace_and_tags_the_row_reductions() -> None:
    x = Tensor(np.ones((3, 5), np.float32))
    with uopviz.trace() as tr:
        x.softmax(-1).realize()
    step = next(p for p in tr.contexts[0].passes if p.name == "fuse rows")
    assert step.stage == "Rangeify" and step.error is None
    graph = schedule([x.softmax(-1).uop])
    (ast, _), = kernels_of(graph)
    assert [r.arg.type for r in scheduler_of(ast, devices.get("CPU").target).axes].count(AxisType.REDUCE) == 2
    fused = [u for u in x.softmax(-1).uop.toposort() if u.op is Ops.REDUCE]
    assert fused and all(u.tag is None for u in fused)  # the pass tags its own copy, not the Tensor's graph
    assert ROW == "row"


def test_attention_stores_its_probabilities_once() -> None:
    """The row kernel of softmax ends where its rows are read by a matmul: three kernels, the middle one fused."""
    z = ZOO["attention"]
    out, arrays = z.build(z.sizes(small=True))
    got, names, _ = run(out, "CPU", True)
    assert len(names) == 3 and names[1].count("R") == 2
    np.testing.assert_allclose(got, z.reference(*arrays), rtol=1e-4, atol=1e-5)


def test_row_kernel_vectorizes_every_pass() -> None:
    x = np.random.default_rng(2).standard_normal((64, 1024)).astype(np.float32)
    got, (name,), (source,) = run(Tensor(x).softmax(-1), "CPU", True)
    assert name.endswith("_u16_r16_r16")  # the output and both reductions: three lane axes
    assert source.count("float16 val") >= 3  # each pass loads a vector per step
    np.testing.assert_allclose(got, softmax_np(x), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("name", "sizes"), [("gemm", {"M": 32, "K": 64, "N": 48}), ("softmax", {"R": 16, "C": 100}),
                                             ("elementwise", {"N": 100_000})])
def test_small_kernels_are_not_threaded(name: str, sizes: dict[str, int]) -> None:
    """Waking the other cores costs more than these take: the heuristic leaves them on one."""
    z = ZOO[name]
    out, _ = z.build(z.sizes(**sizes))
    for ast, _ in kernels_of(schedule([out.uop])):
        opts = heuristic_opts(scheduler_of(ast, devices.get("CPU").target))
        assert all(o.arg[1] is not AxisType.THREAD for o in opts), opts


def test_large_kernels_are_threaded() -> None:
    z = ZOO["gemm"]
    out, _ = z.build({"M": 256, "K": 256, "N": 256})
    ast = next(a for a, _ in kernels_of(schedule([out.uop])) if any(u.op is Ops.REDUCE for u in a.toposort()))
    assert 256 ** 3 >= MIN_THREADED
    opts = heuristic_opts(scheduler_of(ast, devices.get("CPU").target))
    assert opts[-1].arg[1] is AxisType.THREAD


@pytest.mark.parametrize(("costly", "threaded"), [(True, True), (False, False)])
def test_costly_iterations_are_threaded(costly: bool, threaded: bool) -> None:
    """Iterations too few to thread (MIN_THREADED) of a body of some forty operations (softplus: an exp and a log
    an element) pay for waking the other cores; as many iterations of an add do not."""
    x = Tensor(np.random.default_rng(3).standard_normal((512, 256)).astype(np.float32))
    out = (x.exp() + 1).log() if costly else x + 1
    (ast, _), = kernels_of(schedule([out.uop]))
    target = devices.get("CPU").target
    sched = scheduler_of(ast, target)
    assert 512 * 256 < MIN_THREADED and (executed_ops(sched.ast, target.native) >= MIN_THREADED_OPS) == costly
    opts = heuristic_opts(sched)
    assert any(o.arg[1] is AxisType.THREAD for o in opts) == threaded, opts
    got = out.numpy()
    want = np.log1p(np.exp(x.numpy())) if costly else x.numpy() + 1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
