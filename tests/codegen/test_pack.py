"""The `pack` pass (uopviz/schedule/pack.py): a matmul operand whose rows alias in the L1 is read from a copy in
panels, made by a kernel of its own. Results on every runtime against NumPy at sizes that are not powers of two
(each device given an L1 description small enough that small operands alias: the pass decides from the Target,
so the copy kernel runs wherever a Target says to pack); where it fires and where it must not."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np
import pytest
from uopviz.kernels import ZOO

import uopviz
from uopviz import Tensor
from uopviz.pipeline import kernels_of, schedule
from uopviz.runtime import device as devices
from uopviz.target import Cache
from uopviz.uop.ops import Ops, UOp

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]
TINY = Cache(line=16, sets=4, ways=1)  # 64 bytes whose set span is too: rows 16 bytes apart fall in 4 sets
SAPPHIRE = Cache(line=64, sets=64, ways=12)  # 48 KiB, 12 ways: the L1 the rule was measured on

Case = tuple[tuple[int, ...], tuple[int, ...], Callable[[Tensor, Tensor], Tensor], Callable[..., np.ndarray]]
CASES: dict[str, Case] = {  # A's shape, B's array's shape, the product, NumPy's
    "gemm": ((65, 5), (5, 12), lambda a, b: a @ b, lambda a, b: a @ b),  # B's rows 48 bytes apart: 4 sets of TINY
    # B's rows run along k: 32 bytes; 10 columns padded
    "transposed": ((66, 8), (10, 8), lambda a, b: a @ b.T, lambda a, b: a @ b.T),
    "batched": ((2, 65, 3), (2, 3, 20), lambda a, b: a @ b, lambda a, b: a @ b),  # 80 bytes: 4 sets, a batch
    "broadcast": ((3, 30, 7), (7, 12), lambda a, b: a @ b, lambda a, b: a @ b),  # B re-read for 3 x 30 rows
    # A computed in the kernel (an MLP's activation times the next weight's transpose): B is packed still
    "computed": ((66, 8), (10, 8), lambda a, b: (a * a + 1) @ b.T, lambda a, b: (a * a + 1) @ b.T),
    # B computed too (attention's k plus the qkv projection's bias): the copy computes it, once an element
    "computed B": ((66, 8), (10, 8), lambda a, b: a @ (b * 2 + 1).T, lambda a, b: a @ (b * 2 + 1).T),
}


def with_l1(monkeypatch: pytest.MonkeyPatch, device: str, cache: Cache | None) -> None:
    """The device's Target as it is, but with this L1 description."""
    rt = devices.get(device)
    monkeypatch.setattr(rt, "target", dataclasses.replace(rt.target, l1=cache))


def names(out: Tensor) -> list[str]:
    """The kernels the schedule of out makes, 'pack' for a copy (no Reduce) and 'matmul' for a Reduce."""
    return ["matmul" if any(u.op is Ops.REDUCE for u in ast.toposort()) else "pack"
            for ast, _ in kernels_of(schedule([out.uop]))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_a_packed_operand_gives_numpy_s_product(monkeypatch: pytest.MonkeyPatch, device: str, case: str) -> None:
    with_l1(monkeypatch, device, TINY)
    ashape, bshape, f, ref = CASES[case]
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(ashape, dtype=np.float32), rng.standard_normal(bshape, dtype=np.float32)
    out = f(Tensor(a, device=device), Tensor(b, device=device))
    assert names(out) == ["pack", "matmul"]
    want = ref(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_the_trace_shows_the_pass_and_the_copy_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    with_l1(monkeypatch, "CPU", TINY)
    a, b = Tensor(np.ones((65, 5), np.float32)), Tensor(np.ones((5, 12), np.float32))
    with uopviz.trace() as tr:
        (a @ b).realize()
    (packed,) = [p for p in tr.contexts[0].passes if p.name == "pack"]
    assert packed.stage == "Rangeify" and len(packed.steps) == 1
    assert [c.name[0] for c in tr.contexts[1:]] == ["E", "r"]  # the copy, then the matmul reading it


@pytest.mark.parametrize(("m", "k", "n", "packed"), [
    (1024, 1024, 1024, True),  # rows 4 KiB apart: one set
    (512, 512, 512, True),  # 2 KiB: two sets
    (768, 3072, 768, True),  # 3 KiB: four sets
    (1000, 1000, 1000, False),  # 4000 bytes: every set
    (1000, 1024, 1000, False),  # A's rows alias, but the tile reads 8 of them, which the ways hold
    (32, 1024, 1024, False),  # too few rows of A to pay for the copy
    (256, 8, 1024, False),  # B (32 KiB) fits in the L1
])
def test_the_zoo_gemm_packs_where_b_s_rows_alias(monkeypatch: pytest.MonkeyPatch, m: int, k: int, n: int,
                                                 packed: bool) -> None:
    with_l1(monkeypatch, "CPU", SAPPHIRE)
    z = ZOO["gemm"]
    out = z.program(*[Tensor.empty(*i.shape({"M": m, "K": k, "N": n}), device="CPU") for i in z.inputs])
    assert names(out) == (["pack", "matmul"] if packed else ["matmul"])


def test_a_transposed_b_packs_where_its_vectors_would_be_gathers(monkeypatch: pytest.MonkeyPatch) -> None:
    """attention's q @ k.T: B's columns are k's rows, 64 floats apart, so the tile's vector is 16 loads, whatever
    the L1 does; the panels make it one."""
    with_l1(monkeypatch, "CPU", SAPPHIRE)
    q, k = Tensor.empty(512, 64), Tensor.empty(512, 64)
    assert names(q @ k.T) == ["pack", "matmul"]
    assert names(q[:32] @ k.T) == ["matmul"]  # too few rows of A to pay for the copy
    assert names(q @ k[:64].T) == ["pack", "matmul"]  # B fits in the L1, but its vectors would still be gathers
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((70, 9), dtype=np.float32), rng.standard_normal((23, 9), dtype=np.float32)
    out = Tensor(a) @ Tensor(b).T
    assert names(out) == ["pack", "matmul"]
    np.testing.assert_allclose(out.numpy(), a @ b.T, rtol=1e-5, atol=1e-5)


def test_a_computed_b_that_reads_a_packed_matmul_s_result_packs_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPT's q @ k.T, k the qkv projection (a packed matmul) plus its bias: the copy is made of the operand as
    the pass rebuilt it (over the first matmul's packed read), and both matmuls read panels."""
    with_l1(monkeypatch, "CPU", TINY)
    rng = np.random.default_rng(5)
    q, x, w = (rng.standard_normal(s, dtype=np.float32) for s in ((70, 8), (66, 6), (6, 8)))
    out = Tensor(q) @ (Tensor(x) @ Tensor(w) + 1).T
    assert names(out) == ["pack", "matmul", "pack", "matmul"]
    want = q.astype(np.float64) @ (x.astype(np.float64) @ w + 1).T
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_a_product_summed_along_its_last_axis_packs_along_the_output_s_innermost(monkeypatch: pytest.MonkeyPatch,
                                                                                device: str) -> None:
    """Attention's backward dP = dY @ V.T sums the product's last axis: B (V, read along the output's innermost
    axis N with a stride) is copied into panels along N. The result is transposed so that the Reduce is stored (a
    Reduce read elementwise stays fused as a row reduction, schedule/rows.py); the transpose is a third kernel."""
    with_l1(monkeypatch, device, TINY)
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((66, 8), dtype=np.float32), rng.standard_normal((10, 8), dtype=np.float32)
    out = (Tensor(a, device=device)[:, None, :] * Tensor(b, device=device)[None, :, :]).sum(-1).T
    assert names(out)[:2] == ["pack", "matmul"]
    np.testing.assert_allclose(out.numpy(), (a.astype(np.float64) @ b.T).T, rtol=1e-5, atol=1e-5)


def test_a_called_function_s_matmul_packs_as_the_same_program_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A @uopviz.function body is scheduled apart, over Params shaped as its arguments (not flat buffers)."""
    with_l1(monkeypatch, "CPU", SAPPHIRE)
    f = uopviz.function(lambda q, k: q @ k.T)
    assert names(f(Tensor.empty(512, 64), Tensor.empty(512, 64))) == ["pack", "matmul"]
    with_l1(monkeypatch, "CPU", TINY)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((65, 5), dtype=np.float32), rng.standard_normal((5, 12), dtype=np.float32)
    out = uopviz.function(lambda x, y: x @ y)(Tensor(a), Tensor(b))
    assert names(out) == ["pack", "matmul"]
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_the_heuristic_keeps_row_blocks_outside_a_packed_strip(monkeypatch: pytest.MonkeyPatch) -> None:
    """B in panels streams whole, so within a core's strips the rows go back outside (heuristic._rows_outside)."""
    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.codegen.opt.scheduler import OptOps
    from uopviz.pipeline import scheduler as scheduler_of
    with_l1(monkeypatch, "CPU", SAPPHIRE)
    target = devices.get("CPU").target
    last = {}
    for n in (1024, 1000):  # 1024 packs, 1000 does not
        ast, _ = kernels_of(schedule([(Tensor.empty(n, n) @ Tensor.empty(n, n)).uop]))[-1]
        last[n] = heuristic_opts(scheduler_of(ast, target))[-1]
    assert last[1024].op is OptOps.SWAP and (last[1024].axis, last[1024].arg) == (1, 2)
    assert last[1000].op is OptOps.SPLIT  # its THREAD split: B's strip read down its rows, kept inside


def test_other_reductions_and_targets_without_an_l1_keep_one_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    with_l1(monkeypatch, "CPU", SAPPHIRE)
    x, y = Tensor.empty(1024, 1024), Tensor.empty(1024, 1024)
    assert names((x * y).sum(-1)) == ["matmul"]  # a product summed, but no operand broadcast: not a matmul
    assert names(x.sum(0)) == ["matmul"]
    assert names(x @ (y + 1)) == ["pack", "matmul"]  # B computed: the copy computes it once, aliasing rows or not
    assert names((x + 1) @ y) == ["pack", "matmul"]  # A computed (a GELU, say): B is still copied
    with_l1(monkeypatch, "CPU", None)
    assert names(x @ y) == ["matmul"]  # no L1 described: as GPUs' Targets


def test_the_cpu_describes_its_l1() -> None:
    l1 = devices.get("CPU").target.l1
    assert l1 is not None and l1.size >= 4096 and l1.line in (32, 64, 128, 256)
    assert SAPPHIRE.sets_touched(4096) == 1 and SAPPHIRE.sets_touched(3072) == 4 and SAPPHIRE.sets_touched(4000) == 64


def test_only_the_packed_matmul_reads_the_copy_not_its_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    """y = x @ W.T packs W (a transposed B); the gradient dx = dy @ W reads the same broadcast of W, summed along
    the other axis. Reading the copy there (panels laid out for the forward) made the GPT's MLP backward 16 gathers
    per vector: only the forward's Reduce reads it. Gradients checked against torch in float64."""
    import torch
    with_l1(monkeypatch, "CPU", SAPPHIRE)
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((130, 64), dtype=np.float32), rng.standard_normal((96, 64), dtype=np.float32)
    tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    with uopviz.trace() as tr:
        (tx @ tw.T).square().sum().backward()
    (packed,) = [p for p in tr.passes if p.name == "pack"]
    graph = tr.uop(packed.graph_at(len(packed.steps)))
    (copy,) = {u for u in graph.toposort() if u.op is Ops.CONTIGUOUS}

    def reads(u: UOp) -> bool:  # whether Reduce u's own product reads the copy (not through an inner Reduce)
        todo, seen = list(u.src), set()
        while todo:
            v = todo.pop()
            if v is copy:
                return True
            if v not in seen and v.op is not Ops.REDUCE:
                seen.add(v)
                todo.extend(v.src)
        return False
    readers = [u.shape for u in graph.toposort() if u.op is Ops.REDUCE and reads(u)]
    assert readers == [(130, 1, 96)]  # the forward's product; the gradient dx (130, 64, 1) reads W
    px = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    pw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    (px @ pw.T).square().sum().backward()
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_a_head_split_b_s_copy_reads_rows_as_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attention's q @ k.T, k the heads of a qkv projection plus its bias: the copy keeps B's rows (batch, head,
    head dim) as axes, so the head dim is a loop of unit stride in k's rows, which the heuristic reads as vector
    loads and shuffles (codegen/transpose.py); rows merged into one axis read `r % 128` and gathered 16 loads."""
    from uopviz import realize
    with_l1(monkeypatch, "CPU", SAPPHIRE)
    rng = np.random.default_rng(7)
    qkv, bias = rng.standard_normal((2, 64, 384), dtype=np.float32), rng.standard_normal(384, dtype=np.float32)
    x = Tensor(qkv) + Tensor(bias)
    q, k = (x[:, :, i * 128:(i + 1) * 128].reshape(2, 64, 4, 32).permute(0, 2, 1, 3) for i in (0, 1))
    with realize.capture() as launches:
        out = (q @ k.transpose(-1, -2)).numpy()
    xs = (qkv + bias).astype(np.float64).reshape(2, 64, 3, 4, 32)
    want = np.einsum("bqhd,bkhd->bhqk", xs[:, :, 0], xs[:, :, 1])
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    (copy,) = [src for launch in launches if (src := launch.kernel.source or "").startswith("#") and
               "void E_" in src]
    assert "__builtin_shufflevector" in copy and not re.search(r"float val\d+ = data1\[", copy)  # no gather of k
