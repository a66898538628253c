"""Random small tensor programs (chains of elementwise ops, broadcasts, reductions and movement ops): every runtime
must agree with NumPy running the same program."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from devices_here import HAS_CL
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from tensor_testing import DEVICES

from uopviz import Tensor

Step = tuple[str, Callable[[Tensor, str], Tensor], Callable[[np.ndarray], np.ndarray]]


@dataclass
class Program:
    """The input and the steps, each a (description, Tensor op, NumPy op) triple."""

    x: np.ndarray
    steps: list[Step] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Program(x={self.x.dtype}{self.x.shape}: " + " -> ".join(s[0] for s in self.steps) + ")"


UNARY: dict[str, tuple[Callable, Callable, bool]] = {  # name: (Tensor op, NumPy op, for ints too)
    "neg": (Tensor.neg, np.negative, True), "abs": (Tensor.abs, np.abs, True),
    "relu": (Tensor.relu, lambda a: np.maximum(a, 0), True), "invert": (Tensor.bitwise_not, np.invert, False),
    "sin": (Tensor.sin, np.sin, False), "tanh": (Tensor.tanh, np.tanh, False),
    "sigmoid": (Tensor.sigmoid, lambda a: (1 / (1 + np.exp(-a))).astype(a.dtype), False),
}
BINARY: dict[str, tuple[Callable, Callable]] = {
    "add": (operator.add, operator.add), "sub": (operator.sub, operator.sub), "mul": (operator.mul, operator.mul),
    "maximum": (Tensor.maximum, np.maximum), "minimum": (Tensor.minimum, np.minimum),
    "where_gt": (lambda a, b: (a > b).where(a, b), lambda a, b: np.where(a > b, a, b)),
}


def _operand(draw: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A second operand whose shape broadcasts against shape (a suffix, some axes squeezed to 1)."""
    k = draw(st.integers(0, len(shape)))
    sub = tuple(d if draw(st.booleans()) else 1 for d in shape[len(shape) - k:])
    return draw(_values(sub, dtype))


def _values(shape: tuple[int, ...], dtype: np.dtype) -> st.SearchStrategy[np.ndarray]:
    elems = st.integers(-4, 4) if dtype.kind == "i" else st.floats(-3, 3, width=32)
    return arrays(dtype, shape, elements=elems)


def _step(draw: Any, cur: np.ndarray) -> Step:
    """One random op applicable to the current value."""
    nd, isint = cur.ndim, cur.dtype.kind == "i"
    kinds = ["unary", "binary"] + (["reduce", "permute", "flip", "reshape", "pad", "slice", "cumsum", "expand",
                                    "matmul", "gather"] if nd else ["expand"])
    kind = draw(st.sampled_from(kinds))
    if kind == "unary":
        name = draw(st.sampled_from([n for n, (_, _, i) in UNARY.items() if i or not isint] if isint else
                                    [n for n in UNARY if n != "invert"]))
        t_op, n_op, _ = UNARY[name]
        return name, lambda t, d: t_op(t), n_op
    if kind == "binary":
        name = draw(st.sampled_from(list(BINARY)))
        other = _operand(draw, cur.shape, cur.dtype)
        t_op, n_op = BINARY[name]
        return (f"{name} {other.shape}", lambda t, d: t_op(t, Tensor(other, device=d)),
                lambda a: n_op(a, other))
    if kind == "reduce":
        op = draw(st.sampled_from(["sum", "max", "min"] + ([] if isint else ["mean"])))
        axis = draw(st.sampled_from([None, *range(-nd, nd)]))
        keep = draw(st.booleans())
        kw = {"dtype": cur.dtype} if op == "sum" else {}
        return (f"{op}({axis}, keepdim={keep})", lambda t, d: getattr(t, op)(axis, keepdim=keep),
                lambda a: getattr(np, op)(a, axis=axis, keepdims=keep, **kw).astype(a.dtype))
    if kind == "permute":
        perm = tuple(draw(st.permutations(range(nd))))
        return f"permute{perm}", lambda t, d: t.permute(perm), lambda a: a.transpose(perm)
    if kind == "flip":
        axes = tuple(draw(st.sets(st.integers(0, nd - 1), min_size=1)))
        return f"flip{axes}", lambda t, d: t.flip(axes), lambda a: np.flip(a, axes)
    if kind == "reshape":
        new = draw(st.sampled_from([(-1,), cur.shape[::-1], (1, *cur.shape), (cur.size, 1)]))
        return f"reshape{new}", lambda t, d: t.reshape(new), lambda a: a.reshape(new)
    if kind == "pad":
        pads = tuple(tuple(draw(st.integers(0, 2)) for _ in range(2)) for _ in range(nd))
        return f"pad{pads}", lambda t, d: t.pad(pads), lambda a: np.pad(a, pads)
    if kind == "slice":
        idx = tuple(slice(draw(st.integers(-n, n)), draw(st.integers(-n, n)), draw(st.sampled_from([1, 2, -1, -2])))
                    for n in cur.shape)
        if any(len(range(*s.indices(n))) == 0 for s, n in zip(idx, cur.shape)):
            idx = tuple(slice(None, None, s.step) for s in idx)
        return f"[{idx}]", lambda t, d: t[idx], lambda a: a[idx]
    if kind == "cumsum":
        axis = draw(st.integers(-nd, nd - 1))
        return f"cumsum({axis})", lambda t, d: t.cumsum(axis), lambda a: np.cumsum(a, axis, dtype=a.dtype)
    if kind == "matmul":
        other = draw(_values((cur.shape[-1], draw(st.integers(1, 3))), cur.dtype))
        return f"@ {other.shape}", lambda t, d: t @ Tensor(other, device=d), lambda a: a @ other
    if kind == "gather":
        axis = draw(st.integers(-nd, nd - 1))
        idx = draw(arrays(np.int32, draw(st.integers(1, 4)), elements=st.integers(-cur.shape[axis],
                                                                                    cur.shape[axis] - 1)))
        return (f"gather({idx.tolist()}, {axis})", lambda t, d: t.gather(Tensor(idx, device=d), axis),
                lambda a: np.take(a, idx, axis))
    new = (draw(st.integers(1, 3)), *(draw(st.integers(1, 3)) if s == 1 else s for s in cur.shape))
    return f"expand{new}", lambda t, d: t.expand(new), lambda a: np.broadcast_to(a, new)


@st.composite
def programs(draw: Any) -> Program:
    dtype = np.dtype(draw(st.sampled_from(["float32", "int32"])))
    shape = tuple(draw(st.lists(st.integers(1, 4), max_size=3)))
    prog = Program(draw(_values(shape, dtype)))
    cur = prog.x
    for _ in range(draw(st.integers(1, 6))):
        step = _step(draw, cur)
        nxt = step[2](cur)
        if nxt.size > 256:
            break
        prog.steps.append(step)
        cur = nxt
    return prog


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_random_programs_agree_with_numpy(prog: Program) -> None:
    want = prog.x
    with np.errstate(all="ignore"):
        for _, _, n_op in prog.steps:
            want = n_op(want)
    for device in [d for d in DEVICES if d != "CL" or HAS_CL]:
        t = Tensor(prog.x, device=device)
        for _, t_op, _ in prog.steps:
            t = t_op(t, device)
        got = t.numpy()
        assert got.shape == want.shape, f"{device}: shape {got.shape} != {want.shape}"
        if want.dtype.kind == "i":
            np.testing.assert_array_equal(got, want, err_msg=device)
        else:
            scale = 1 + float(np.abs(want).max(initial=0))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale, err_msg=device)
