"""The Tensor-level graph contract realize relies on, checked on graphs built by every Tensor method (no execution).

Data leaves are Reshape(Buffer, shape); constants are scalar Consts brought to shape by reshape + expand; every
elementwise op sees sources of its own shape and one dtype (except Where's bool condition); only the allowed ops
appear; and every node passes SPEC validation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from uopviz import Tensor, dtypes
from uopviz.uop.ops import Ops, UOp
from uopviz.uop.spec import validate

MOVEMENT = {Ops.RESHAPE, Ops.EXPAND, Ops.PERMUTE, Ops.PAD, Ops.SHRINK, Ops.FLIP}
ELEMENTWISE = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.MOD, Ops.IDIV, Ops.CMPLT, Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND, Ops.SHR,
               Ops.SHL, Ops.WHERE, Ops.RECIP, Ops.TRUNC, Ops.CAST, Ops.BITCAST, Ops.EXP2, Ops.LOG2, Ops.SIN,
               Ops.SQRT, Ops.POW, Ops.THREEFRY}
ALLOWED = MOVEMENT | ELEMENTWISE | {Ops.REDUCE, Ops.CONST, Ops.BUFFER, Ops.CONTIGUOUS, Ops.DETACH}
_SHAPE_SRCS = {Ops.RESHAPE: 1, Ops.EXPAND: 1, Ops.PAD: 1, Ops.SHRINK: 1}


def value_srcs(u: UOp) -> tuple[UOp, ...]:
    """The sources that are tensors (a movement op's shape and offset Stacks are not)."""
    return u.src[:1] if u.op in _SHAPE_SRCS else u.src


def check_contract(root: UOp) -> None:
    validate(root)
    seen: set[UOp] = set()
    stack = [(root, None)]
    while stack:
        u, parent = stack.pop()
        if u.op is Ops.BUFFER:
            assert parent is not None and parent.op is Ops.RESHAPE, "a Buffer must sit under a Reshape"
        if u in seen:
            continue
        seen.add(u)
        assert u.op in ALLOWED, f"{u.op} is not a Tensor-level op"
        if u.op is Ops.CONST:
            assert u.shape == () and u.dtype != dtypes.index
        if u.op is Ops.REDUCE:
            assert len(u.src) == 1 and u.arg.op in (Ops.ADD, Ops.MAX, Ops.MUL)
        if u.op in ELEMENTWISE:
            srcs = value_srcs(u)
            assert all(s.shape == u.shape for s in srcs), f"{u.op}: sources {[s.shape for s in srcs]} vs {u.shape}"
            operands = srcs[1:] if u.op is Ops.WHERE else srcs
            assert len({s.dtype for s in operands}) == 1, f"{u.op}: mixed dtypes {[s.dtype for s in operands]}"
            if u.op is Ops.WHERE:
                assert srcs[0].dtype == dtypes.bool
        stack.extend((s, u) for s in value_srcs(u))


def _x() -> Tensor:
    return Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))


def _i() -> Tensor:
    return Tensor(np.arange(12, dtype=np.int32).reshape(3, 4))


PROGRAMS: dict[str, Callable[[], Tensor]] = {
    "scalar+tensor": lambda: _x() + 1,
    "broadcast": lambda: _x() * Tensor([1.0, 2.0, 3.0, 4.0]) - Tensor(2),
    "promotion": lambda: _i() + _x()[0] / 2,
    "compare": lambda: (_x() <= 3) & (_x() != 5),
    "where": lambda: (_i() > 4).where(_i(), 2.5),
    "math": lambda: _x().exp().log().sin().cos().sqrt().tanh().sigmoid().gelu(),
    "floor ops": lambda: (_x() // 3) + (_x() % 2) + (_i() // 3) + (_i() % 5),
    "pow": lambda: _x() ** _x() + _i() ** 3 + _i() ** _i(),
    "bits": lambda: (~_i() ^ (_i() << 2)) | (_i() >> 1),
    "min/max": lambda: _i().minimum(_i().flip(1)).max(0) + _x().minimum(1.0).min(),
    "reductions": lambda: _x().sum(1) + _x().mean(-1, keepdim=True).var() + _i().prod(0).float().std(),
    "argmax": lambda: _x().argmax(1) + _i().argmin(),
    "softmax": lambda: _x().softmax(1) + _x().log_softmax() + _x().logsumexp(0).unsqueeze(0),
    "cumsum": lambda: _i().cumsum(1) + _x()[0].cumsum(0).int(),
    "movement": lambda: _x().permute(2, 0, 1).reshape(4, -1).pad(((1, 0), (0, 2)), value=7).shrink(((0, 3), None)),
    "indexing": lambda: _x()[1, ::-2, None, 1:] + _x()[..., Tensor([0, 3])].sum(),
    "cat/stack": lambda: Tensor.stack(_x()[0], _x()[1]).cat(_x(), dim=0),
    "gather/scatter": lambda: _i().gather(Tensor([[2, 0]]), 1).sum() + Tensor.zeros(5).scatter_add(Tensor([1, 1]),
                                                                                              Tensor([1.0, 2.0])),
    "matmul": lambda: _x() @ _x().transpose() + Tensor.eye(3),
    "conv": lambda: _x().reshape(1, 2, 3, 4).conv2d(Tensor.ones(3, 2, 2, 2), Tensor.ones(3), padding=1),
    "pools": lambda: _x().max_pool2d(2, 1) + _x().avg_pool2d((1, 2)).mean(),
    "random": lambda: Tensor.rand(3, 4, seed=1) + Tensor.randn(3, 4, seed=2) + Tensor.rand(4, dtype=dtypes.float16),
    "creation": lambda: Tensor.arange(2, 11, 3) + Tensor.linspace(0, 1, 3).mean() + Tensor.full((3,), 2),
    "markers": lambda: _x().contiguous().detach() + _x().bitcast(dtypes.int32).cast(dtypes.float32),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_graph_contract(name: str) -> None:
    check_contract(PROGRAMS[name]().uop)


def test_constants_are_scalars_brought_to_shape() -> None:
    u = Tensor.full((2, 3), 1.5).uop
    assert u.op is Ops.EXPAND and u.src[0].op is Ops.RESHAPE and u.src[0].src[0].op is Ops.CONST
    assert Tensor.full((), 2).uop.op is Ops.CONST


def test_arange_is_specs_prefix_sum_composition() -> None:
    ops = {u.op for u in Tensor.arange(5).uop.toposort()}
    assert {Ops.PAD, Ops.EXPAND, Ops.SHRINK, Ops.REDUCE} <= ops and Ops.BUFFER not in ops


def test_building_a_graph_runs_nothing() -> None:
    t = (_x() * 2).sum()
    assert not t.is_realized and t.uop.op is Ops.RESHAPE and t.uop.src[0].op is Ops.REDUCE
