"""What the front-end keeps between eager steps so it builds less each one (int aranges, constants, index constants)
must be invisible: fresh Tensors, the same graphs, and no two values a cache could confuse made into one."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

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


def test_a_dead_nodes_entry_goes_and_a_new_node_of_its_key_keeps_its_own() -> None:
    u = UOp(Ops.CONST, (), ops.ConstArg(54321.5, dtypes.float32))
    key = next(k for k, r in ops._nodes.items() if r() is u)
    assert ops._nodes[key].key == key  # the entry holds its key: one shared callback drops it
    del u
    gc.collect()
    v = UOp(Ops.CONST, (), ops.ConstArg(54321.5, dtypes.float32))
    w = UOp(Ops.CONST, (), ops.ConstArg(54321.5, dtypes.float32))
    assert v is w and ops._nodes[key]() is v


def test_movement_nodes_of_one_shape_share_its_decoded_tuple() -> None:
    x = UOp.buffer(24, dtypes.float32, "CPU")
    a, b = x.reshape((2, 3, 4)), (x + x).reshape((2, 3, 4))
    assert a.shape == (2, 3, 4) and b.shape is a.shape


def test_a_shape_source_that_is_no_index_stack_is_refused_every_time() -> None:
    from uopviz.uop.ops import SpecError
    x = UOp.buffer(4, dtypes.float32, "CPU")
    bad = UOp(Ops.STACK, (UOp.const(dtypes.float32, 4.0),))
    for _ in range(2):
        with pytest.raises(SpecError, match="index scalar"):
            _ = UOp(Ops.RESHAPE, (x, bad)).shape


def test_the_schedule_cache_key_is_one_flat_tuple_and_fills_no_young_generation() -> None:
    """A tuple per node in the key lived through the realize: two objects per node more for every young collection
    meanwhile to scan. Now a handful in all."""
    from uopviz.realize import structure
    x = Tensor(np.ones((4, 8), np.float32)).realize()
    y = x
    for k in range(300):
        y = (y * 1.5 + k).relu()
    found = structure([y.uop])
    assert found.nodes > 600 and sum(type(item) is tuple for item in found.key[0]) < found.nodes // 10
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects(0))
        again = structure([y.uop])
        young = len(gc.get_objects(0)) - before
    finally:
        gc.enable()
    assert again.key == found.key and young < 50


def test_equal_structures_give_equal_keys_and_other_arities_do_not() -> None:
    from uopviz.realize import structure
    a, b = (Tensor(np.ones(8, np.float32)).realize() for _ in range(2))
    assert structure([(a * 2.0 + b).uop]).key == structure([(b * 2.0 + a).uop]).key
    assert structure([(a * 2.0 + b).uop]).key != structure([(a * 2.0 + a).uop]).key
    assert structure([a.where(b, a).uop]).key != structure([(a + b).uop]).key


def test_broadcast_shapes_is_numpys_on_every_small_pair_and_keeps_symbolic_sizes_apart() -> None:
    import itertools

    from uopviz.tensor.util import ShapeError, broadcast_shapes
    shapes = [s for n in range(4) for s in itertools.product((0, 1, 2, 3), repeat=n)]
    for a, b in itertools.product(shapes, repeat=2):
        try:
            want = np.broadcast_shapes(a, b)
        except ValueError:
            with pytest.raises(ShapeError, match="cannot broadcast"):
                broadcast_shapes(a, b)
        else:
            assert broadcast_shapes(a, b) == want
    v, w = UOp.variable("v", 1, 8), UOp.variable("w", 1, 8)
    got = broadcast_shapes((v, 1), (1, 3), (v, 3))
    assert got[0] is v and got[1] == 3
    for bad in ((v,), (w,)), ((v,), (3,)), ((3,), (v,)):
        with pytest.raises(ShapeError, match="axis -1 has sizes"):
            broadcast_shapes(*bad)


def test_a_float_zero_constant_is_kept_apart_from_its_negative() -> None:
    import weakref

    from uopviz.tensor.util import const_uop
    kept = weakref.ref(const_uop(0.0, dtypes.float32, (3, 7)))  # gradient rules' `where(g, 0.0)`, every step
    gc.collect()
    zero, negative = kept(), const_uop(-0.0, dtypes.float32, (3, 7))
    assert zero is not None and zero is const_uop(0.0, dtypes.float32, (3, 7)) and negative is not zero
    values = [u.arg.value for z in (zero, negative) for u in z.toposort() if u.op is Ops.CONST and u.dtype.is_float]
    assert [math.copysign(1.0, v) for v in values] == [1.0, -1.0]


def _gemm_by_tensor_ops(a: Tensor, b: Tensor) -> Tensor:
    """a @ b as Tensor ops would build it (operands of one dtype, at least 2 dims each): what matmul's graph builder
    must give, node for node, so that gradient rules and kernels see one graph whichever way it was built."""
    k, n = b.shape[-2:]
    return a.reshape(*a.shape, 1).mul(b.reshape(*b.shape[:-2], 1, k, n)).sum(-2)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("sa, sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4, 5), (2, 5, 3)),
                                    ((2, 1, 3, 4), (5, 4, 6)), ((1, 4), (4, 1))])
def test_matmuls_graph_of_the_common_case_is_the_tensor_ops(dt: str, sa: tuple[int, ...],
                                                           sb: tuple[int, ...]) -> None:
    from uopviz.tensor.nn import _plain_gemm
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(sa).astype(dt), rng.standard_normal(sb).astype(dt)
    a, b = Tensor(x).realize(), Tensor(w).realize()
    fast = a @ b
    assert _plain_gemm(a.uop, b.uop)  # the common case took the UOp path
    assert _gemm_by_tensor_ops(a, b).uop is fast.uop  # hash-consed: one node only if the graphs are the same
    np.testing.assert_allclose(fast.numpy(), x @ w, rtol=1e-5)


@pytest.mark.parametrize("dt", ["int8", "bool", "float16"])
def test_matmuls_general_path_builds_the_tensor_ops_graph(dt: str) -> None:
    """Ints and bools are summed in int64 (as sum does), halves multiplied and summed in float32, each then cast back
    to the operands' dtype; the general path checks, casts and widens, then builds its gemm where the common case
    does (one builder), and its graph is still the Tensor ops' one."""
    from uopviz.tensor.nn import _plain_gemm
    rng = np.random.default_rng(6)
    x, w = (rng.integers(-3, 4, s).astype(dt) for s in ((2, 3, 4), (4, 5)))
    a, b = Tensor(x).realize(), Tensor(w).realize()
    assert not _plain_gemm(a.uop, b.uop)
    wide = dtypes.float32 if dt == "float16" else a.dtype
    expected = _gemm_by_tensor_ops(a.cast(wide), b.cast(wide)).cast(a.dtype)
    assert (a @ b).uop is expected.uop
    np.testing.assert_array_equal((a @ b).numpy(), (x.astype(np.int64) @ w.astype(np.int64)).astype(dt))


def test_matmuls_symbolic_and_one_dim_cases_build_the_tensor_ops_graph() -> None:
    import uopviz
    n = uopviz.Variable("n", 1, 8)
    rng = np.random.default_rng(7)
    x, w, v = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32), \
        rng.standard_normal(4).astype(np.float32)
    a = Tensor(x).realize()[:n.bind(5)]
    b, c = Tensor(w).realize(), Tensor(v).realize()
    assert (a @ b).uop is _gemm_by_tensor_ops(a, b).uop
    np.testing.assert_allclose((a @ b).numpy(), x[:5] @ w, rtol=1e-5)
    assert (c @ b).uop is _gemm_by_tensor_ops(c.unsqueeze(0), b).squeeze(-2).uop
    assert (b.T @ c).uop is _gemm_by_tensor_ops(b.T, c.unsqueeze(-1)).squeeze(-1).uop
    np.testing.assert_allclose((b.T @ c).numpy(), w.T @ v, rtol=1e-5)


def test_matmul_leaves_other_cases_and_errors_to_the_general_path() -> None:
    from uopviz.tensor.nn import _plain_gemm
    from uopviz.tensor.util import ShapeError
    f32, f16 = Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((3, 2), np.float16))
    assert not _plain_gemm(f32.uop, f16.uop) and not _plain_gemm(f32.uop, f32.uop)  # dtypes; k differs
    assert not _plain_gemm(f32.uop, Tensor(np.ones(3, np.float32)).uop)  # a 1-D operand
    assert (f32 @ f16).dtype == dtypes.float32
    with pytest.raises(ShapeError, match="contracted dims differ"):
        f32 @ f32
