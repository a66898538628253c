"""The `store pads` pass: a padded input that a reduction re-reads (a convolution's) is stored by a kernel of its
own, so the reduction's loads carry no guards; the answers are NumPy's on every runtime."""

from __future__ import annotations

import numpy as np
import pytest

import uopviz
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.codegen.opt.scheduler import Opt, OptOps
from uopviz.pipeline import kernels_of, schedule, scheduler
from uopviz.runtime import device as devices
from uopviz.tensor import Tensor
from uopviz.uop.ops import AxisType, Ops, UOp


def _conv_np(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))).astype(np.float64)
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return out


def _ops(kernel: UOp) -> set[Ops]:
    return {u.op for u in kernel.toposort()}


def test_convolution_stores_its_padded_input(device: str) -> None:  # `device`: tests/tensor/conftest.py's
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 9), dtype=np.float32)
    w = rng.standard_normal((5, 3, 3, 3), dtype=np.float32)
    out = Tensor(x, device=device).conv2d(Tensor(w, device=device), padding=1)
    (pad, _), (conv, _) = kernels_of(schedule([out.uop]))
    assert _ops(pad) >= {Ops.PAD} and Ops.REDUCE not in _ops(pad)  # the copy: (2, 3, 9, 11) padded elements
    assert Ops.PAD not in _ops(conv) and Ops.REDUCE in _ops(conv)  # the reduction's loads need no guard
    np.testing.assert_allclose(out.numpy(), _conv_np(x, w, 1), rtol=1e-4, atol=1e-5)


def test_the_pass_is_a_named_step_of_the_schedule() -> None:
    x, w = Tensor(np.ones((1, 2, 5, 6), np.float32)), Tensor(np.ones((4, 2, 3, 3), np.float32))
    with uopviz.trace() as tr:
        got = x.conv2d(w, padding=1).numpy()
    step = next(p for p in tr.contexts[0].passes if p.name == "store pads")
    assert step.stage == "Rangeify" and step.steps  # it changed the graph
    np.testing.assert_allclose(got, _conv_np(np.ones((1, 2, 5, 6)), np.ones((4, 2, 3, 3)), 1), rtol=1e-6)


def test_pads_read_once_or_of_constants_stay_fused() -> None:
    x = Tensor(np.arange(35, dtype=np.float32).reshape(5, 7))
    once = x.pad(((1, 1), (2, 0))).sum(1)  # each padded element read once: storing it would only add a pass
    assert len(kernels_of(schedule([once.uop]))) == 1
    np.testing.assert_allclose(once.numpy(), np.pad(x.numpy(), ((1, 1), (2, 0))).sum(1))
    w = Tensor(np.ones((4, 1, 3, 3), np.float32))
    ones = Tensor.ones(1, 1, 6, 6).conv2d(w, padding=1)  # a padded constant is cheaper computed than loaded
    assert len(kernels_of(schedule([ones.uop]))) == 1
    np.testing.assert_allclose(ones.numpy(), _conv_np(np.ones((1, 1, 6, 6)), np.ones((4, 1, 3, 3)), 1))


def test_unpadded_convolution_is_one_kernel(device: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 6, 7), dtype=np.float32)
    w = rng.standard_normal((3, 2, 3, 3), dtype=np.float32)
    out = Tensor(x, device=device).conv2d(Tensor(w, device=device))
    assert len(kernels_of(schedule([out.uop]))) == 1
    np.testing.assert_allclose(out.numpy(), _conv_np(x, w, 0), rtol=1e-4, atol=1e-5)


def _opts(out: Tensor, device: str = "CPU") -> list[list[Opt]]:
    """The heuristic's opts for each kernel of out on device."""
    target = devices.get(device).target
    return [heuristic_opts(scheduler(ast, target)) for ast, _ in kernels_of(schedule([out.uop]))]


def _upcasts(opts: list[Opt]) -> list[int]:
    return [o.arg[0] for o in opts if o.op is OptOps.SPLIT and o.arg[1] is AxisType.UPCAST]


@pytest.mark.parametrize(("shape", "stride", "padding", "run"), [
    ((2, 3, 13, 13), 1, 1, 15),  # rows of 13 + 2: one run of 15 lanes
    ((1, 2, 9, 32), 2, 1, 17),  # 32 + 2 = 34: two runs of 17 (a convolution's rows the vectors do not divide)
    ((1, 3, 7, 10), 1, 2, 14),  # 10 + 4 = 14: one run, where a vector of 2 divides it
])
def test_a_stored_pad_copies_its_rows_in_runs(device: str, shape: tuple[int, ...], stride: int, padding: int,
                                             run: int) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape, dtype=np.float32)
    w = rng.standard_normal((5, shape[1], 3, 3), dtype=np.float32)
    out = Tensor(x, device=device).conv2d(Tensor(w, device=device), stride=stride, padding=padding)
    pad, _ = _opts(out)
    assert _upcasts(pad) == [run]  # on the CPU's target: the pad kernel's rows in runs
    want = _conv_np(x, w, padding)[:, :, ::stride, ::stride]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)


def test_rows_in_runs_only_for_a_pad_the_vectors_do_not_divide() -> None:
    x = Tensor(np.ones((2, 3, 6, 32), np.float32))
    assert _upcasts(_opts(x + 1)[0]) == [16]  # a plain elementwise kernel: vectors as before
    assert _upcasts(_opts(Tensor(np.ones((3, 34), np.float32)) * 2)[0]) == [2]  # unguarded: no runs
    wide = x.conv2d(Tensor(np.ones((4, 3, 3, 3), np.float32)), padding=((1, 1), (1, 15)))  # rows of 1 + 32 + 15
    assert _upcasts(_opts(wide)[0]) == [16]  # 48 wide: the widest vector divides it
    if "CL" in devices.available(["CL"]):  # a work-item target keeps its vectors
        cl = Tensor(np.ones((1, 2, 9, 32), np.float32), device="CL")
        assert 17 not in _upcasts(_opts(cl.conv2d(Tensor(np.ones((3, 2, 3, 3), np.float32), device="CL"),
                                                  padding=1), "CL")[0])


def test_a_realized_pad_copies_in_runs_too(device: str) -> None:
    x = np.arange(3 * 5 * 17, dtype=np.float32).reshape(3, 5, 17)
    out = Tensor(x, device=device).pad(((0, 0), (1, 0), (2, 3)))  # rows of 2 + 17 + 3 = 22: runs of 22
    assert _upcasts(_opts(out)[0]) == [22]
    np.testing.assert_array_equal(out.numpy(), np.pad(x, ((0, 0), (1, 0), (2, 3))))


@pytest.mark.parametrize("transposed", [False, True])
def test_a_pad_the_vectors_divide_copies_in_runs_of_vectors(device: str, transposed: bool) -> None:
    """A piece of a concatenation (128 of 384 columns): runs of 8 vectors of 16, one run per piece, so every lane's
    guard and index folds alike (the GPT step's E_L8_L64_L24 kernels)."""
    x = np.arange(4 * 8 * 128, dtype=np.float32).reshape(4, 8, 128)
    src = Tensor(x.transpose(0, 2, 1).copy(), device=device).transpose(1, 2) if transposed else Tensor(x, device=device)
    out = src.pad(((0, 0), (0, 0), (128, 128)))
    assert _upcasts(_opts(out)[0]) == [16, 8]
    np.testing.assert_array_equal(out.numpy(), np.pad(x, ((0, 0), (0, 0), (128, 128))))


def test_a_sum_of_pads_is_stored_as_one_buffer(device: str) -> None:
    """The gradient of a fused projection split in three (the GPT's q, k, v) is each part's gradient padded to the
    whole width, added: stored as that sum, one kernel writing one buffer, which the weight's gradient (x^T times it)
    then reads with plain loads; stored pad by pad, each pad wrote its zeros and the product read three buffers."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((37, 11), dtype=np.float32), rng.standard_normal((11, 15), dtype=np.float32)
    up = [rng.standard_normal((37, 5), dtype=np.float32) for _ in range(3)]
    W = Tensor(w, device=device, requires_grad=True)
    q, k, v = (Tensor(x, device=device) @ W).split(5, dim=1)
    (grad,) = sum((t * Tensor(u, device=device)).sum() for t, u in zip((q, k, v), up)).gradient(W)
    kernels = [ast for ast, _ in kernels_of(schedule([grad.uop]))]
    stored = [k for k in kernels if Ops.PAD in _ops(k)]
    assert len(stored) == 1 and Ops.REDUCE not in _ops(stored[0])  # the sum of the three pads, one kernel
    assert Ops.PAD not in _ops(kernels[-1])  # the product reads plain memory
    np.testing.assert_allclose(grad.numpy(), x.astype(np.float64).T @ np.concatenate(up, 1), rtol=1e-5, atol=1e-5)
