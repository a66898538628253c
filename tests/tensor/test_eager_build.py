"""What the front-end keeps between eager steps so it builds less each one (int aranges, constants, index constants)
must be invisible: fresh Tensors, the same graphs, and no two values a cache could confuse made into one."""

from __future__ import annotations

import gc
import math

import numpy as np

from uopviz import Tensor
from uopviz.dtype import dtypes
from uopviz.uop import ops
from uopviz.uop.ops import Ops, UOp


def test_a_kept_arange_is_a_fresh_tensor_each_time() -> None:
    a, b = Tensor.arange(5, device="CPU"), Tensor.arange(5, device="CPU")
    assert a is not b and a.uop is b.uop
    a.realize()
    assert a.is_realized and not b.is_realized
    assert b.tolist() == [0, 1, 2, 3, 4]


def test_kept_aranges_differ_by_dtype_step_and_device_default() -> None:
    assert Tensor.arange(4, dtype="int64").dtype == dtypes.int64
    assert Tensor.arange(4).dtype == dtypes.int32
    assert Tensor.arange(1, 9, 3).tolist() == [1, 4, 7]
    assert Tensor.arange(0.5, 3).tolist() == [0.5, 1.5, 2.5]  # a float bound: built, not kept
    assert Tensor.arange(2**31, 2**31 + 2).dtype == dtypes.int64


def test_kept_constants_keep_zero_signs_nan_and_python_kinds_apart() -> None:
    x = Tensor(np.ones(3, np.float32))
    assert np.signbit((x * -0.0).numpy()).all() and not np.signbit((x * 0.0).numpy()).any()
    assert np.isnan((x * math.nan).numpy()).all() and np.isnan((x * math.nan).numpy()).all()
    i = Tensor(np.ones(3, np.int32))
    assert (i + 1).dtype == dtypes.int32 and (i + 1.0).dtype == dtypes.float32 and (i + True).dtype == dtypes.int32
    b = Tensor(np.array([True, False]))
    assert (b + True).dtype == dtypes.bool and (b + 1).dtype == dtypes.int32


def test_a_scalar_operand_builds_the_broadcast_graph_of_a_tensor_operand() -> None:
    x = Tensor(np.ones((2, 3), np.float32))
    assert (x * 2.0).uop is x.mul(Tensor(2.0)).uop  # a 0-d constant tensor is coerced and broadcast the general way
    assert (2.0 - x).uop is Tensor(2.0).sub(x).uop


def test_the_node_table_forgets_dead_nodes_and_keeps_live_ones() -> None:
    u = UOp(Ops.CONST, (), ops.ConstArg(12345.5, dtypes.float32))
    key = next(k for k, r in ops._nodes.items() if r() is u)
    assert UOp(Ops.CONST, (), ops.ConstArg(12345.5, dtypes.float32)) is u
    del u
    gc.collect()
    assert key not in ops._nodes
    v = UOp(Ops.CONST, (), ops.ConstArg(12345.5, dtypes.float32))
    assert ops._nodes[key]() is v


def test_the_multi_device_check_sees_every_node_naming_several_devices() -> None:
    from uopviz.tensor.multi import needs_lowering
    from uopviz.uop.ops import Built
    one = UOp.buffer(4, dtypes.float32, "CPU").reshape((4,))
    assert not needs_lowering([one + one])
    several = UOp.buffer(4, dtypes.float32, ("CPU", "CPU")).reshape((8,))
    assert Built.several_devices and needs_lowering([several + several]) and not needs_lowering([one + one])
