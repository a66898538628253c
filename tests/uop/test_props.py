"""One test per row of SPEC's derived-properties table, the broadcast rule, and each shard-axis rule."""

import math

import pytest

from uopviz import AxisType, Ops, SpecError, UOp, dtypes
from uopviz.uop.ops import AddrSpace, BufferArg, ParamArg

f32, i32, idx = dtypes.float32, dtypes.int32, dtypes.index
D = ("CPU:0", "CPU:1", "CPU:2")  # an n-tuple device, n = 3


def var(lo: int, hi: int, name: str = "v") -> UOp:
    return UOp.variable(name, lo, hi)


def test_buffer_row():
    b = UOp.buffer(12, dtypes.int16, "CL", AddrSpace.LOCAL)
    assert (b.dtype, b.shape, b.device, b.min_max) == (dtypes.int16, (12,), "CL", (-32768, 32767))


def test_const_row():
    c = UOp.const(f32, 2.5)
    assert (c.dtype, c.shape, c.device, c.min_max) == (f32, (), None, (2.5, 2.5))


def test_param_row():
    p = UOp.param(1, (3, 5), dtypes.uint8, "CPU")
    assert (p.dtype, p.shape, p.device, p.min_max) == (dtypes.uint8, (3, 5), "CPU", (0, 255))


@pytest.mark.parametrize("build, shape", [
    (lambda t: t.reshape((4, 3)), (4, 3)),
    (lambda t: t.reshape((3, 4)).permute((1, 0)), (4, 3)),
    (lambda t: t.reshape((1, 12)).expand((5, 12)), (5, 12)),
    (lambda t: t.pad((2,), (15,)), (15,)),
    (lambda t: t.shrink((3,), (4,)), (4,)),
    (lambda t: t.flip((True,)), (12,)),
    (lambda t: t.reshape((3, 4)).index(UOp.const(idx, 1)), (4,)),
    (lambda t: UOp(Ops.STACK, (t, t)), (2, 12)),
    (lambda t: t.reshape((3, 4)).replicated((0,)), (1, 4)),
])
def test_movement_row(build, shape):
    t = UOp.buffer(12, i32, "CL")
    m = build(t)
    assert (m.dtype, m.shape, m.device, m.min_max) == (i32, shape, "CL", t.min_max)


def test_movement_min_max_is_src0():
    r = UOp.range(7, 0)
    m = UOp(Ops.STACK, (r, r)).reshape((2, 1))
    assert m.min_max == (0, 6)


def test_reduce_row():
    t = UOp.buffer(12, f32, "CL").reshape((3, 4))
    r = t.reduce(Ops.ADD, axes=(1,))
    assert (r.dtype, r.shape, r.device, r.min_max) == (f32, (3, 1), "CL", (-math.inf, math.inf))
    assert t.reduce(Ops.MAX, axes=(-2,)).shape == (1, 4)


def test_reduce_over_ranges_keeps_the_scalar_shape():
    k = UOp.range(4, 0, AxisType.REDUCE)
    val = UOp.buffer(4).index(k).load()
    assert val.reduce(Ops.ADD, k).shape == ()


def test_cast_row_clamps_to_dtype():
    x = var(-300, 300)
    c = x.cast(dtypes.int8)
    assert (c.dtype, c.shape, c.device, c.min_max) == (dtypes.int8, (), None, (-128, 127))
    assert var(-3, 5).cast(dtypes.uint8).min_max == (0, 255)  # -3 wraps to 253
    assert var(3, 5).cast(dtypes.uint8).min_max == (3, 5)
    assert var(1, 5).cast(dtypes.bool).min_max == (True, True)
    assert var(0, 5).cast(f32).min_max == (0.0, 5.0)


def test_bitcast_row():
    t = UOp.buffer(6, f32, "CL")
    b = t.bitcast(dtypes.uint16)
    assert (b.dtype, b.shape, b.device, b.min_max) == (dtypes.uint16, (12,), "CL", (0, 65535))
    assert t.bitcast(i32).shape == (6,)


def test_copy_row():
    t = UOp.buffer(5, i32, "CPU").index(UOp.range(5, 0)).load()
    c = UOp.range(5, 0).copy_to("CL")
    assert (c.dtype, c.shape, c.device, c.min_max) == (idx, (), "CL", (0, 4))
    assert t.copy_to("CL").device == "CL"


def test_alu_unary_row():
    t = UOp.buffer(4, f32, "CL").reshape((2, 2))
    r = t.recip()
    assert (r.dtype, r.shape, r.device, r.min_max) == (f32, (2, 2), "CL", (-math.inf, math.inf))
    assert UOp.range(5, 0).alu(Ops.TRUNC).min_max == (idx.min, idx.max)


def test_add_row():
    a = UOp.buffer(3, i32, "CL").reshape((3, 1))
    b = UOp.buffer(4, i32, "CL").reshape((1, 4))
    s = a + b
    assert (s.dtype, s.shape, s.device) == (i32, (3, 4), "CL")
    assert (var(-2, 3, "a") + var(10, 20, "b")).min_max == (8, 23)


def test_add_overflow_widens_to_dtype_range():
    big = UOp.const(dtypes.int8, 100)
    assert (UOp(Ops.DEFINE_VAR, (), var(0, 100).arg).cast(dtypes.int8) + big).min_max == (-128, 127)


def test_mul_row():
    assert (var(-2, 3, "a") * var(-5, 4, "b")).min_max == (-15, 12)
    assert (var(2, 3, "a") * UOp.const(idx, -1)).min_max == (-3, -2)


def test_max_row():
    assert var(-2, 3, "a").maximum(var(1, 2, "b")).min_max == (1, 3)


def test_other_binary_row_is_dtype_range():
    x = var(0, 3, "a").cast(i32) ^ UOp.const(i32, 1)
    assert (x.dtype, x.min_max) == (i32, (i32.min, i32.max))
    assert (var(0, 3).cast(i32) << 2).min_max == (i32.min, i32.max)


def test_idiv_mod_refinement():
    x = var(-7, 13)
    assert (x // 4).min_max == (-2, 3)
    assert (x % 4).min_max == (0, 3)
    assert (var(0, 2) % 4).min_max == (0, 2)


@pytest.mark.parametrize("a, b, lt, ne", [
    ((0, 3), (4, 9), (True, True), (True, True)),
    ((5, 9), (0, 5), (False, False), (False, True)),
    ((0, 5), (3, 4), (False, True), (False, True)),
    ((2, 2), (2, 2), (False, False), (False, False)),
])
def test_cmp_rows(a, b, lt, ne):
    x, y = var(*a, "x"), var(*b, "y")
    assert ((x < y).dtype, (x < y).min_max, x.ne(y).min_max) == (dtypes.bool, lt, ne)
    assert (UOp.buffer(3, i32, "CL").reshape((3, 1)) < UOp.buffer(2, i32, "CL").reshape((1, 2))).shape == (3, 2)


def test_where_row():
    c = UOp.buffer(3, dtypes.bool, "CL").reshape((3, 1))
    w = c.where(UOp.buffer(2, f32, "CL").reshape((1, 2)), UOp.const(f32, 0.0))
    assert (w.dtype, w.shape, w.device) == (f32, (3, 2), "CL")
    assert (var(0, 1) < 1).where(var(-3, 2, "a"), var(5, 9, "b")).min_max == (-3, 9)


def test_function_and_call_row():
    n = var(1, 64, "n")
    p0 = UOp.param(0, (n,), f32)
    body = UOp(Ops.TUPLE, (p0 + p0,))
    arg = UOp.buffer(10, f32, "CL")
    fn = UOp(Ops.FUNCTION, (body, arg))
    assert (fn.dtype, fn.shape, fn.device, fn.min_max) == (f32, (10,), "CL", (-math.inf, math.inf))
    call = UOp(Ops.CALL, (body, arg))
    assert (call.shape, call.device) == ((10,), "CL")
    g = UOp(Ops.GETTUPLE, (fn,), 0)
    assert (g.dtype, g.shape) == (f32, (10,))


def test_range_row():
    r = UOp.range(10, 3, AxisType.REDUCE)
    assert (r.dtype, r.shape, r.device, r.min_max) == (idx, (), None, (0, 9))
    assert UOp.range(var(4, 8, "n"), 0).min_max == (0, 7)


def test_range_of_bound_0_is_empty():
    # SPEC's [0, n-1] for n = 0: an empty interval, not the point 0 (which would let r*3 fold to 0)
    assert UOp.range(0, 0).min_max == (0, -1)
    assert UOp.special(0, "gidx0").min_max == (0, -1)
    assert UOp.range(var(0, 0, "n"), 0).min_max == (0, -1)
    assert UOp.range(1, 0).min_max == (0, 0)


def test_index_row():
    t = UOp.buffer(24, f32, "CL").reshape((2, 3, 4))
    assert t.index(UOp.const(idx, 1)).shape == (3, 4)
    assert t.index(UOp.range(2, 0), UOp.shape_src((0, 2))).shape == (2, 4)
    i = t.index(1, 2, 3)
    assert (i.dtype, i.shape, i.device) == (f32, (), "CL")
    assert UOp.buffer(4, i32).reshape((4,)).index(0).min_max == (i32.min, i32.max)


def test_store_row():
    b = UOp.buffer(4, f32, "CL")
    s = b.index(UOp.range(4, 0)).store(UOp.const(f32, 1.0))
    assert (s.dtype, s.shape, s.device) == (dtypes.void, (), "CL")


def test_after_row():
    b = UOp.buffer(4, i32, "CL")
    a = b.after(b.index(0).store(UOp.const(i32, 1)))
    assert (a.dtype, a.shape, a.device, a.min_max) == (i32, (4,), "CL", b.min_max)


def test_broadcast_rule():
    a = UOp.buffer(3, f32).reshape((3, 1))
    assert (a + UOp.buffer(4, f32)).shape == (3, 4)
    assert (a + UOp.const(f32, 1.0)).shape == (3, 1)
    with pytest.raises(SpecError, match=r"cannot broadcast \(3, 1\) with \(2, 4\)"):
        _ = (a + UOp.buffer(8, f32).reshape((2, 4))).shape


def test_symbolic_shapes_flow_through():
    n = var(1, 100, "n")
    p = UOp.param(0, (n, 4), f32)
    assert (p + p).shape == (n, 4)
    assert p.reshape((n, 2, 2)).shape == (n, 2, 2)


# ---------------------------------------------------------------- shard-axis rules
def test_buffer_on_n_tuple_device_has_axis_0_and_n_times_size():
    b = UOp.buffer(6, f32, D)
    assert (b.shape, b.axis, b.device) == ((18,), 0, D)
    assert UOp.buffer(6, f32, "CPU").axis is None


def test_reshape_remaps_the_shard_axis():
    b = UOp.buffer(6, f32, D)
    assert b.reshape((3, 6)).axis == 0
    assert b.reshape((1, 18)).axis == 1
    assert b.reshape((3, 6)).permute((1, 0)).reshape((2, 3, 3)).axis == 2
    # no axis keeps the boundary (after 6 of every 18 elements): the one holding it, axis 0 (its shards move)
    assert b.reshape((3, 6)).permute((1, 0)).reshape((9, 2)).axis == 0
    with pytest.raises(SpecError, match="needs concrete sizes"):
        _ = b.reshape((3, 6)).reshape((var(1, 9, "m"), 2)).axis


def test_permute_follows_the_shard_axis():
    t = UOp.buffer(6, f32, D).reshape((3, 2, 3))
    assert t.permute((1, 2, 0)).axis == 2


def test_reduce_on_shard_axis_is_null_else_kept():
    t = UOp.buffer(6, f32, D).reshape((3, 6))
    assert t.reduce(Ops.ADD, axes=(0,)).axis is None
    assert t.reduce(Ops.ADD, axes=(1,)).axis == 0


def test_replicated_on_shard_axis_is_null():
    t = UOp.buffer(6, f32, D).reshape((3, 6))
    assert t.replicated((0,)).axis is None
    assert t.replicated((1,)).axis == 0


def test_copy_axis():
    t = UOp.buffer(6, f32, D)
    assert t.copy_to("CPU").axis is None
    assert UOp.buffer(6, f32, "CPU").copy_to(D).axis == 0


def test_alu_inherits_axis_and_default_is_null():
    t = UOp.buffer(6, f32, D)
    assert (UOp.const(f32, 1.0) + t).axis == 0
    assert UOp.range(4, 0).axis is None


def test_spec_collectives_axes():
    n, s = len(D), 6
    T = UOp.buffer(s, f32, "CPU")
    assert T.reshape((1, s)).expand((n, s)).copy_to(D).replicated((0,)).axis is None  # broadcast
    assert T.copy_to(D).axis == 0  # scatter
    T2 = UOp.buffer(s, f32, D)
    gathered = T2.copy_to(D[0])
    assert (gathered.axis, gathered.shape, gathered.device) == (None, (n * s,), D[0])
    assert gathered.reshape((n, s)).reduce(Ops.ADD, axes=(0,)).axis is None  # reduce
    allgather = T2.reshape((1, n * s)).expand((n, n * s)).copy_to(D).replicated((0,))
    assert allgather.axis is None
    rs = T2.reshape((n, n, s // n)).permute((1, 0, 2)).copy_to(D).reduce(Ops.ADD, axes=(1,)).reshape((s,))
    assert (rs.axis, rs.shape, rs.device) == (0, (s,), D)  # reduce_scatter
    assert rs.reshape((1, s)).expand((n, s)).copy_to(D).replicated((0,)).axis is None  # allreduce


def test_param_arg_and_buffer_arg_defaults():
    assert UOp.buffer(3).arg == BufferArg(3, f32, "CPU", AddrSpace.GLOBAL)
    assert UOp.param(0, (3,)).arg == ParamArg(0, f32, None, None)


def test_properties_of_a_deep_new_graph_are_derived_without_recursion():
    """A chain of views and adds built with no property read on the way (each level a Reshape of an Add): reading
    the top's shape derives every node's below it iteratively, as the first read of any new graph does."""
    x = UOp.buffer(6).reshape((2, 3))
    for _ in range(5000):
        x = (x + x).reshape((3, 2)).reshape((2, 3))
    assert x.shape == (2, 3) and x.dtype == dtypes.float32
    assert all("shape" in u.__dict__ for u in x.toposort() if u.op is not Ops.STACK)
