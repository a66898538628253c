"""A Function built by hand, `GetTuple(Function(Tuple(outputs), *args), i)` as docs/dialect.md gives it: the body
reads argument k as Param(k), as it is or through a Reshape, and runs on every device, checked against NumPy; a
malformed one is a SpecError naming the rule it breaks."""

from __future__ import annotations

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz.dtype import dtypes
from uopviz.uop.ops import Ops, SpecError, UOp

A = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
B = np.array([0.5, -1.0, 2.0], np.float32)
F32 = dtypes.float32


def _call(body: tuple[UOp, ...], args: tuple[UOp, ...], i: int, device: str) -> Tensor:
    return Tensor(UOp(Ops.GETTUPLE, (UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, body), *args), "f"),), i), device=device)


def test_a_body_that_reads_its_params_as_they_are(device: str, compiles: list[str]) -> None:
    x, y = UOp.param(0, (2, 3), F32, device), UOp.param(1, (3,), F32, device)
    body = (x * y.reshape((1, 3)).expand((2, 3)), x.reduce(Ops.MAX, axes=(0,)), y.reshape((3, 1)) + 1.0)
    counts = []
    for an, bn in ((A, B), (A * 2, B + 1)):  # new data of the same signature compiles nothing more
        a, b = Tensor(an, device=device), Tensor(bn, device=device)
        outs = [_call(body, (a.uop, b.uop), i, device) for i in range(3)]
        np.testing.assert_array_equal(outs[0].numpy(), an * bn)
        np.testing.assert_array_equal(outs[1].numpy(), an.max(0, keepdims=True))
        np.testing.assert_array_equal(outs[2].numpy(), bn.reshape(3, 1) + 1)
        counts.append(len(compiles))
    assert counts[0] > 0 and counts[1] == counts[0]


def test_a_body_with_symbolic_params(device: str) -> None:
    n = uopviz.Variable("n", 1, 8)
    data = np.arange(24, dtype=np.float32).reshape(8, 3)
    x = UOp.param(0, (n, 3), F32, device)
    for size in (2, 5):
        arg = Tensor(data, device=device)[:n.bind(size)]
        got = _call((x * 3.0,), (arg.uop,), 0, device)
        np.testing.assert_array_equal(got.numpy(), data[:size] * 3)


def test_a_malformed_function_names_the_rule() -> None:
    a, b = Tensor(A), Tensor(B)
    x, y = UOp.param(0, (2, 3), F32, "CPU"), UOp.param(1, (3,), F32, "CPU")
    with pytest.raises(SpecError, match="argument 1 is read by no Param of the body"):
        _call((x * 2.0,), (a.uop, b.uop), 0, "CPU").numpy()
    with pytest.raises(SpecError, match=r"argument 1 is float32\(2, 3\), but Param 1 is float32\(3,\)"):
        _call((y * 2.0, x), (a.uop, a.uop), 0, "CPU").numpy()
    with pytest.raises(SpecError, match="Param slot 1 has no argument"):
        _call((y * 2.0, x), (a.uop,), 0, "CPU").numpy()
    with pytest.raises(SpecError, match="index 2 out of range for a Tuple of 1"):
        _call((x * 2.0,), (a.uop,), 2, "CPU")
