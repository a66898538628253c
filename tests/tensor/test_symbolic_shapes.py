"""Symbolic sizes: Tensors whose dims are bound variables compile each kernel once for the variable's range and run
for every bound value, on every device, checked against NumPy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import uopviz
from uopviz import Tensor
from uopviz.realize import KernelArgumentError, run_kernel
from uopviz.tensor import ShapeError
from uopviz.uop.ops import Ops, UOp

RNG = np.random.default_rng(7)
A = RNG.random((40, 12), dtype=np.float32)
B = RNG.random((12, 7), dtype=np.float32)
SIZES = (3, 5, 11, 17, 40)  # not powers of two, smallest to the whole range


PROGRAMS: dict[str, tuple[Callable[[Tensor, Tensor, UOp], Tensor], Callable[[np.ndarray, np.ndarray, int], Any]]] = {
    "elementwise": (lambda a, b, n: (a[:n] * 2 + 1).relu(), lambda a, b, n: np.maximum(a[:n] * 2 + 1, 0)),
    "reduction": (lambda a, b, n: a[:n].sum(0) + a[:n].max(1).mean(),
                  lambda a, b, n: a[:n].sum(0) + a[:n].max(1).mean()),
    "matmul": (lambda a, b, n: a[:n] @ b, lambda a, b, n: a[:n] @ b),
    "contracted": (lambda a, b, n: a[:4, :n] @ b[:n], lambda a, b, n: a[:4, :n] @ b[:n]),
    "softmax": (lambda a, b, n: a[:n].softmax(0), lambda a, b, n: np.exp(a[:n]) / np.exp(a[:n]).sum(0)),
}


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_symbolic_program_compiles_once_for_every_size(program: str, device: str, compiles: list[str]) -> None:
    build, ref = PROGRAMS[program]
    n = uopviz.Variable("n", 1, 12 if program == "contracted" else 40)
    a, b = Tensor(A, device=device), Tensor(B, device=device)
    counts = []
    for size in [s for s in SIZES if s <= n.arg.max]:
        out = build(a, b, n.bind(size))
        np.testing.assert_allclose(out.numpy(), ref(A, B, size), rtol=1e-5, atol=1e-6)
        counts.append(len(compiles))
    assert len(counts) >= 3 and counts[0] > 0 and counts == [counts[0]] * len(counts), (counts, compiles)


def test_a_symbolic_shape_is_the_bound_variables(device: str) -> None:
    n = uopviz.Variable("rows", 1, 40)
    x = Tensor.ones(n.bind(6), 3, device=device) * 2
    assert x.shape[0].render() == "rows=6" and x.shape[1] == 3 and len(x) == 6
    assert x.numel().simplify().render() == "(rows=6*3)"
    np.testing.assert_array_equal(x.numpy(), np.full((6, 3), 2, np.float32))
    y = Tensor.empty(n.bind(9), 2, device=device).assign(Tensor.ones(n.bind(9), 2, device=device))
    np.testing.assert_array_equal(y.reshape(n.bind(9) * 2).numpy(), np.ones(18, np.float32))


def test_sizes_are_checked_for_the_whole_range_of_a_variable() -> None:
    """A kernel compiled once runs for every value, so a slice must stay in bounds for all of them."""
    n = uopviz.Variable("n", 1, 64)
    with pytest.raises(ShapeError, match="for every value the variables may take"):
        Tensor(A)[:n.bind(10)]
    with pytest.raises(ShapeError, match="cannot broadcast"):
        Tensor.ones(n.bind(4), 2) + Tensor.ones(4, 2)
    with pytest.raises(IndexError, match="step 1"):
        Tensor(A)[:uopviz.Variable("m", 1, 40).bind(8):2]


def test_variables_and_binds_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="name must be an identifier"):
        uopviz.Variable("n; drop", 1, 4)
    with pytest.raises(ValueError, match="must be ints with min <= max"):
        uopviz.Variable("n", 5, 1)
    with pytest.raises(ValueError, match="a size cannot be negative"):
        uopviz.Variable("n", -1, 4)
    with pytest.raises(ValueError, match=r"cannot bind n to 9: it takes ints in 1\.\.4"):
        uopviz.Variable("n", 1, 4).bind(9)
    with pytest.raises(ValueError, match="variable n is not bound"):
        Tensor.ones(uopviz.Variable("n", 1, 4), 2).numpy()


def test_one_variable_bound_twice_in_one_computation_is_refused() -> None:
    n = uopviz.Variable("n", 1, 40)
    with pytest.raises(ValueError, match="bound to 3 and to 4"):
        (Tensor(A)[:n.bind(3)].sum() + Tensor(A)[:n.bind(4)].sum()).numpy()


def _scale_kernel(n: UOp) -> UOp:
    """data0[i] = data1[i] * 3 for i < n."""
    a, out = UOp.param(1, (n,), uopviz.dtypes.float32), UOp.param(0, (n,), uopviz.dtypes.float32)
    r = UOp.range(n, 0)
    return UOp.sink(out.index(r).store(a.index(r).load() * 3.0).end(r))


def test_run_kernel_passes_variable_values(device: str, compiles: list[str]) -> None:
    n = uopviz.Variable("n", 1, 16)
    x = np.arange(16, dtype=np.float32)
    for size in (2, 7, 16):
        got = run_kernel(_scale_kernel(n), [np.zeros(16, np.float32), x], device, vals={"n": size})[0]
        np.testing.assert_array_equal(got, np.concatenate([x[:size] * 3, np.zeros(16 - size, np.float32)]))
    got = run_kernel(_scale_kernel(n.bind(5)), [np.zeros(16, np.float32), x], device)[0]  # a Bind gives the value
    np.testing.assert_array_equal(got[:6], [0, 3, 6, 9, 12, 0])
    assert len(compiles) == 1
    with pytest.raises(KernelArgumentError, match="no value for variable n"):
        run_kernel(_scale_kernel(n), [np.zeros(16, np.float32), x], device)
    with pytest.raises(KernelArgumentError, match=r"variable n takes ints in 1\.\.16, got 17"):
        run_kernel(_scale_kernel(n), [np.zeros(16, np.float32), x], device, vals={"n": 17})
    with pytest.raises(KernelArgumentError, match="slot 1: Param of 9 float32 got an array of 4"):
        run_kernel(_scale_kernel(n), [np.zeros(16, np.float32), x[:4]], device, vals={"n": 9})


def test_kernels_hold_variables_not_values() -> None:
    """The kernel the schedule builds reads the variable (an argument), so one kernel serves every value."""
    from uopviz.pipeline import calls_of, schedule
    n = uopviz.Variable("n", 1, 40)
    calls = [calls_of(schedule([(Tensor(A)[:n.bind(v)] * 2).uop]))[0] for v in (3, 8)]
    assert calls[0].ast is calls[1].ast and [c.vals for c in calls] == [{"n": 3}, {"n": 8}]
    assert not any(u.op is Ops.BIND for u in calls[0].ast.toposort())


def _fancy(a: np.ndarray) -> np.ndarray:
    return a[[0, -1, 2]]


# ops a decoder needs over an axis of symbolic length n (x is A, 40 × 12): each against NumPy at every size
AXIS_OPS: dict[str, tuple[Callable[[Tensor, UOp], Tensor], Callable[[np.ndarray, int], Any]]] = {
    "arange": (lambda x, n: Tensor.arange(n, device=x.device), lambda a, n: np.arange(n)),
    "arange down": (lambda x, n: Tensor.arange(n, 0, -1, device=x.device), lambda a, n: np.arange(n, 0, -1)),
    "arange step": (lambda x, n: Tensor.arange(2, n, 3, device=x.device), lambda a, n: np.arange(2, n, 3)),
    "arange from n": (lambda x, n: Tensor.arange(n, n + 4, device=x.device), lambda a, n: np.arange(n, n + 4)),
    "arange float": (lambda x, n: Tensor.arange(n, dtype="float32", device=x.device) * 0.5,
                     lambda a, n: np.arange(n, dtype=np.float32) * 0.5),
    "tril": (lambda x, n: Tensor.ones(n, n, device=x.device).tril(), lambda a, n: np.tril(np.ones((n, n)))),
    "triu": (lambda x, n: Tensor.ones(n, n, device=x.device).triu(1), lambda a, n: np.triu(np.ones((n, n)), 1)),
    "tril data": (lambda x, n: (x[:n] @ x[:n].T).tril(-1), lambda a, n: np.tril(a[:n] @ a[:n].T, -1)),
    "arange mask": (lambda x, n: Tensor.arange(n, device=x.device).reshape(n, 1)
                    .ge(Tensor.arange(n, device=x.device).reshape(1, n)),
                    lambda a, n: np.arange(n)[:, None] >= np.arange(n)[None, :]),
    "argmax": (lambda x, n: x[:n].argmax(0), lambda a, n: a[:n].argmax(0)),
    "argmax last": (lambda x, n: x[:n].T.argmax(-1, keepdim=True), lambda a, n: a[:n].T.argmax(-1)[:, None]),
    "argmax flat": (lambda x, n: x[:n].argmax(), lambda a, n: a[:n].argmax()),
    "argmin": (lambda x, n: x[:n].argmin(0), lambda a, n: a[:n].argmin(0)),
    "var": (lambda x, n: x[:n].var(0), lambda a, n: a[:n].var(0, ddof=1)),
    "std": (lambda x, n: x[:n].T.std(1, correction=0), lambda a, n: a[:n].T.std(1)),
    "cumsum": (lambda x, n: x[:n].cumsum(0), lambda a, n: a[:n].cumsum(0)),
    "cumsum last": (lambda x, n: x[:n].T.cumsum(-1), lambda a, n: a[:n].T.cumsum(-1)),
    "cummax": (lambda x, n: x[:n].cummax(0)[1], lambda a, n: torch.tensor(a[:n]).cummax(0)[1].numpy()),
    "softmax": (lambda x, n: x[:n].T.softmax(-1), lambda a, n: torch.tensor(a[:n].T).softmax(-1).numpy()),
    "x[0, 9]": (lambda x, n: x[:n][0, 9], lambda a, n: a[:n][0, 9]),
    "x[-1]": (lambda x, n: x[:n][-1], lambda a, n: a[:n][-1]),
    "x[:, -1]": (lambda x, n: x.T[:, :n][:, -1], lambda a, n: a.T[:, :n][:, -1]),
    "x[[0, -1, 2]]": (lambda x, n: x[:n][[0, -1, 2]], lambda a, n: _fancy(a[:n])),
    "x[tensor]": (lambda x, n: x[:n][Tensor([-1, 0], device=x.device), 5], lambda a, n: a[:n][[-1, 0], 5]),
}


@pytest.mark.parametrize("op", AXIS_OPS)
def test_an_op_over_a_symbolic_axis_compiles_once(op: str, device: str, compiles: list[str]) -> None:
    build, ref = AXIS_OPS[op]
    n = uopviz.Variable("n", 3, 40)
    x = Tensor(A, device=device)
    counts = []
    for size in SIZES:
        got, want = build(x, n.bind(size)), np.asarray(ref(A, size))
        assert got.numpy().shape == want.shape
        if want.dtype.kind in "biu":
            assert got.dtype.is_int or got.dtype.is_bool
            np.testing.assert_array_equal(got.numpy(), want)
        else:
            np.testing.assert_allclose(got.numpy(), want, rtol=2e-5, atol=1e-6)
        counts.append(len(compiles))
    assert counts[0] > 0 and counts == [counts[0]] * len(counts), (counts, compiles)


def test_what_a_symbolic_axis_cannot_take_says_why() -> None:
    n = uopviz.Variable("n", 1, 40)
    x = Tensor(A)[:n.bind(6)]
    with pytest.raises(IndexError, match=r"index -2 is out of bounds for axis 0 with size n=6 .*\(1\.\.40\)"):
        x[-2]  # n may be 1
    with pytest.raises(IndexError, match="index 1 is out of bounds"):
        x[[0, 1]]
    with pytest.raises(IndexError, match="index 40 is out of bounds"):
        x[40]
    with pytest.raises(ShapeError, match="with a symbolic bound, start and stop must be ints or symbolic sizes"):
        Tensor.arange(0.5, n.bind(6))
    for step in (0.5, n.bind(2)):
        with pytest.raises(ShapeError, match="and step an int"):
            Tensor.arange(n.bind(6), step=step)
    assert Tensor.arange(n.bind(6), 3).numpy().shape == (0,) and Tensor.arange(3, n.bind(6)).tolist() == [3, 4, 5]


def test_a_symbolic_size_as_data_is_an_int(device: str) -> None:
    """`x + n`, `Tensor(n)`: the size enters as an int32 (the kernels' index type is no buffer's dtype)."""
    n = uopviz.Variable("n", 1, 40).bind(6)
    ints = Tensor(np.arange(3, dtype=np.int32), device=device)
    assert Tensor(n, device=device).dtype == uopviz.dtypes.int32 and Tensor(n, device=device).item() == 6
    np.testing.assert_array_equal((ints + n).numpy(), np.arange(3) + 6)
    np.testing.assert_allclose((Tensor(A[0], device=device) / n).numpy(), A[0] / 6, rtol=1e-6)
