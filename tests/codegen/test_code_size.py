"""Lowering whose cost grows with the kernel, not with lanes (issue 29): the heuristic's code-size budget
(codegen/opt/size.py, heuristic.py), and devectorize's work, counted in nodes visited, not timed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uopviz import Tensor
from uopviz.codegen import devectorize as devectorize_module
from uopviz.codegen.opt import Opt, OptOps, Scheduler
from uopviz.codegen.opt.heuristic import CODE_BUDGET, TRANSPOSE_COLUMNS, _size, heuristic_opts
from uopviz.codegen.opt.size import code_size
from uopviz.pipeline import kernels_of, lower, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.runtime import device as devices
from uopviz.uop.ops import AxisType, Ops, UOp
from uopviz.uop.pattern import PatternMatcher, UPat, graph_rewrite
from uopviz.uop.symbolic import step

EXPANDED = (AxisType.UPCAST, AxisType.UNROLL)


def chain(n: int, x: np.ndarray) -> Tensor:
    """An elementwise chain of n mixed ops (sin, exp2, relu, mul-add in turn) on x: one fused kernel."""
    y = Tensor(x, device="CPU")
    for i in range(n):
        k = i % 4
        y = y.sin() if k == 0 else y.exp2() if k == 1 else y.relu() if k == 2 else y * 0.5 + 0.25
    return y


def chain_np(n: int, x: np.ndarray) -> np.ndarray:
    y = x.astype(np.float64)
    for i in range(n):
        k = i % 4
        y = np.sin(y) if k == 0 else np.exp2(y) if k == 1 else np.maximum(y, 0) if k == 2 else y * 0.5 + 0.25
    return y


def only_kernel(t: Tensor) -> UOp:
    (ast, _), = kernels_of(schedule([t.uop]))
    return ast


def optimized(ast: UOp) -> tuple[Scheduler, Scheduler]:
    """(the kernel's Scheduler, the same with the heuristic's opts applied) on the CPU."""
    s = scheduler_of(ast, devices.get("CPU").target)
    t = s
    for o in heuristic_opts(s):
        t = t.apply_opt(o)
    return s, t


def expanded(s: Scheduler) -> int:
    """The product of a kernel's UPCAST and UNROLL axes: lanes times copies of its body."""
    return math.prod(n or 1 for t, n in s.shape() if t in EXPANDED)


X = np.random.default_rng(0).uniform(-2, 2, (64, 64)).astype(np.float32)


@pytest.mark.parametrize("n", [30, 80])
def test_a_long_chain_is_vectorized_within_the_budget(n: int) -> None:
    """The chain's sines compute in float64: 16 lanes of them are vectors of 128 bytes, which the C compiler
    splits (the 30-op chain compiled for 18 s and ran 4x slower than at 8 lanes); 8 lanes fill a register, and
    no copies of an 80-op body are made."""
    before, after = optimized(only_kernel(chain(n, X)))
    assert expanded(after) == 8
    size = _size(after)
    assert size.ops <= max(CODE_BUDGET, _size(before).ops)
    assert 2 * size.wide <= size.vector


def test_a_row_reduction_per_output_is_not_tiled() -> None:
    """A 2 x 128-style reduction (each of 8 x 64 outputs sums its own row of 128, as layernorm's backward does):
    no load is shared by a tile's rows, so the outputs get one vector, not a 256-fold tile (r_L2_R128_u8_u2_u16)."""
    x = Tensor(np.ones((8, 64, 128), np.float32), device="CPU")
    g = Tensor(np.ones(128, np.float32), device="CPU")
    _, after = optimized(only_kernel(((x * g).sqrt() + x).sum(-1)))
    assert expanded(after) <= 16
    assert _size(after).ops <= CODE_BUDGET


def test_row_sums_are_vectors_along_the_rows() -> None:
    """Each of 8 x 64 outputs sums a row of 128 contiguous floats (a layernorm's backward): the sum is unrolled a
    vector wide along the row, not the outputs upcast, whose vector would gather one float from each of 16 rows."""
    rng = np.random.default_rng(3)
    x = Tensor(rng.standard_normal((8, 64, 128), dtype=np.float32), device="CPU")
    y = Tensor(rng.standard_normal((8, 64, 128), dtype=np.float32), device="CPU")
    _, after = optimized(only_kernel((x + y).sum(-1)))
    shape = after.shape()
    assert math.prod(n or 1 for t, n in shape if t is AxisType.UNROLL) == 16
    assert not any(t is AxisType.UPCAST for t, _ in shape)
    np.testing.assert_allclose((x + y).sum(-1).numpy(), (x.numpy().astype(np.float64) + y.numpy()).sum(-1),
                               rtol=1e-4, atol=1e-4)


def test_a_matmul_is_still_tiled() -> None:
    """The rows of a matmul tile share each vector of B: the tile stays (register blocking)."""
    a = Tensor(np.ones((64, 64), np.float32), device="CPU")
    b = Tensor(np.ones((64, 64), np.float32), device="CPU")
    _, after = optimized(only_kernel(a @ b))
    assert expanded(after) >= 64


def test_a_matmul_with_an_epilogue_that_reads_memory_is_still_tiled() -> None:
    """dGELU's kernel: a matmul times a function of a stored pre-activation read per output. That load is outside
    the reduction, read once per output whatever the tile, so the tile stays (it was given one vector of 16
    outputs and ran 7x slower)."""
    a = Tensor(np.ones((64, 64), np.float32), device="CPU")
    b = Tensor(np.ones((64, 64), np.float32), device="CPU")
    h = Tensor(np.ones((64, 64), np.float32), device="CPU")
    _, after = optimized(only_kernel((a @ b) * (h * 0.5).exp()))
    assert expanded(after) >= 64


def test_a_column_sum_reads_vectors_of_outputs() -> None:
    """A bias's gradient sums each column over a batch's rows: neighbouring outputs read neighbouring memory, so
    the outputs are upcast (vector loads, several in flight) and the strided reduction is not unrolled."""
    x = Tensor(np.random.default_rng(1).standard_normal((512, 384), dtype=np.float32), device="CPU")
    _, after = optimized(only_kernel(x.sum(0)))
    shape = after.shape()
    assert math.prod(n or 1 for t, n in shape if t is AxisType.UPCAST) >= 32
    assert not any(t is AxisType.UNROLL for t, _ in shape)
    np.testing.assert_allclose(x.sum(0).numpy(), x.numpy().astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)


def test_a_column_sum_with_a_broadcast_term_reads_vectors_of_outputs() -> None:
    """Each column summed over batch and time of a value plus a term the same for every batch (a residual stream's
    position embedding, in a layernorm's weight gradient): still columns, so vectors of outputs, no unrolled
    strided sum."""
    rng = np.random.default_rng(4)
    x = Tensor(rng.standard_normal((8, 64, 128), dtype=np.float32), device="CPU")
    p = Tensor(rng.standard_normal((64, 128), dtype=np.float32), device="CPU")
    _, after = optimized(only_kernel((x + p).sum((0, 1))))
    shape = after.shape()
    assert math.prod(n or 1 for t, n in shape if t is AxisType.UPCAST) >= 32
    assert not any(t is AxisType.UNROLL for t, _ in shape)
    want = (x.numpy().astype(np.float64) + p.numpy()).sum((0, 1))
    np.testing.assert_allclose((x + p).sum((0, 1)).numpy(), want, rtol=1e-4, atol=1e-3)


def test_a_transpose_walks_the_rows_its_vectors_gather_from_innermost() -> None:
    """A transposed copy (a weight's transpose for the backward): each vector of outputs gathers one float from 16
    rows of the input, so the loop along those rows (moving every gather by one float) is innermost, and each line
    loaded serves the next iterations; that loop is upcast by TRANSPOSE_COLUMNS[0], so an iteration reads that many
    neighbouring floats of each row (codegen/transpose.py); the values are the transpose."""
    w = np.random.default_rng(6).standard_normal((128, 512), dtype=np.float32)
    t = Tensor(w, device="CPU").T.contiguous()
    _, after = optimized(only_kernel(t))
    inner = [i for i, (k, n) in enumerate(after.shape()) if k is AxisType.LOOP and n and n > 1][-1]
    loads = [u for u in after.ast.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX]
    k = TRANSPOSE_COLUMNS[0]
    assert loads and all(step(u.src[0].src[1], after.axes[inner]) == k for u in loads)
    assert (AxisType.UPCAST, k) in after.shape()
    np.testing.assert_array_equal(t.numpy(), w.T)


def test_the_budget_refuses_copies_of_an_expensive_body() -> None:
    """A matmul with a sine of each product inside the reduction: the heuristic's tile would copy the sine (some
    hundreds of operations) for every output of the tile; the budget keeps the copies down."""
    a = Tensor(np.ones((64, 1, 64), np.float32), device="CPU")
    b = Tensor(np.ones((1, 64, 64), np.float32), device="CPU")
    before, after = optimized(only_kernel((a * b.permute(0, 2, 1)).sin().sum(-1)))
    assert _size(after).ops <= max(CODE_BUDGET, _size(before).ops)


def test_code_size_counts_decompositions_and_gathers() -> None:
    """A Sin weighs its decomposition; a lane axis with a gathered load costs a load a lane."""
    target = devices.get("CPU").target

    def size_of(t: Tensor) -> int:
        s = scheduler_of(only_kernel(t), target)
        return code_size(s.ast, target.native, target.vector_functions, True).ops
    x = Tensor(X, device="CPU")
    assert size_of(x.sin()) > 50 * size_of(x * 2.0)


def test_the_chain_runs_right_at_its_lanes() -> None:
    np.testing.assert_allclose(chain(30, X).numpy(), chain_np(30, X), rtol=1e-4, atol=1e-5)


def test_the_row_reduction_runs_right() -> None:
    rng = np.random.default_rng(1)
    x, g = rng.standard_normal((8, 64, 128)).astype(np.float32), rng.uniform(0, 1, 128).astype(np.float32)
    got = ((Tensor(x, device="CPU") * Tensor(g, device="CPU")).abs().sqrt() + Tensor(x, device="CPU")).sum(-1)
    np.testing.assert_allclose(got.numpy(), (np.sqrt(np.abs(x * g)) + x).sum(-1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lanes", [8, 16])
def test_devectorize_visits_each_node_a_few_times(lanes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Devectorizing the 80-op chain's kernel visits a number of nodes that grows with the kernel, not with the
    kernel times its vector forms (each Trunc of a sine re-walked the whole kernel below it: 176,000 visits for
    the 40-op chain's 3,000 instructions, 700,000 for the 80-op chain's)."""
    visits = [0]
    real = devectorize_module._Devectorizer.node

    def counted(self: devectorize_module._Devectorizer, u: UOp) -> UOp:
        visits[0] += 1
        return real(self, u)
    monkeypatch.setattr(devectorize_module._Devectorizer, "node", counted)
    results = {}
    for n in (40, 80):
        visits[0] = 0
        opts = [Opt(OptOps.SPLIT, 1, (lanes, AxisType.UPCAST, False))]
        k = lower(only_kernel(chain(n, X)), devices.get("CPU").target, opts)
        results[n] = (visits[0], len(k.linear.src))
    for n, (seen, program) in results.items():
        assert seen <= 2 * program, (n, seen, program)
    assert results[80][0] <= 2.5 * results[40][0]  # linear in the chain's length


def test_a_shared_memo_rewrites_each_shared_node_once() -> None:
    """graph_rewrite's memo: graphs that share a subgraph (the lanes of an address) match it once in all."""
    seen: list[UOp] = []

    def note(x: UOp) -> None:
        seen.append(x)
    pm = PatternMatcher([(UPat(Ops.ADD, name="x"), note)])
    v = UOp.variable("v", 0, 100)
    shared = (v + 1) * 3 + v
    memo: dict[UOp, UOp] = {}
    for i in range(4):
        graph_rewrite(shared + i, pm, memo=memo)
    assert seen.count(shared) == 1
    assert seen.count(v + 1) == 1
