"""exec_alu (the meaning of each elementwise op) and evaluate (a whole scalar expression)."""

import math

import pytest

from uopviz import GroupOp, Ops, UOp, dtypes
from uopviz.dtype import DTypeError
from uopviz.uop.alu import evaluate, exec_alu, threefry2x32

i8, u8, i32, idx, f16, f32, f64 = (dtypes.int8, dtypes.uint8, dtypes.int32, dtypes.index, dtypes.float16,
                                   dtypes.float32, dtypes.float64)
B = dtypes.bool
inf, nan = math.inf, math.nan


def same(a: object, b: object) -> bool:
    """Equal, with nan equal to nan and the sign of zero significant."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("op, dt, args, want", [
    (Ops.IDIV, i32, (-7, 2), -4), (Ops.IDIV, i32, (7, -2), -4), (Ops.IDIV, i32, (-7, -2), 3),
    (Ops.MOD, i32, (-7, 2), 1), (Ops.MOD, i32, (7, -2), -1), (Ops.MOD, i32, (-7, -2), -1),
    (Ops.IDIV, i32, (-2**31, -1), -2**31),  # the one overflowing division wraps
    (Ops.ADD, i8, (127, 1), -128), (Ops.MUL, u8, (16, 17), 16), (Ops.ADD, B, (True, True), True),
    (Ops.ADD, f16, (2048.0, 1.0), 2048.0),  # rounds to the dtype
    (Ops.MAX, i32, (-3, 2), 2), (Ops.MAX, f32, (nan, 1.0), nan), (Ops.MAX, f32, (1.0, nan), nan),
    (Ops.CMPLT, B, (1, 2), True), (Ops.CMPNE, B, (nan, nan), True), (Ops.CMPNE, B, (2, 2), False),
    (Ops.XOR, i32, (6, 3), 5), (Ops.OR, i32, (6, 3), 7), (Ops.AND, i32, (6, 3), 2), (Ops.AND, B, (True, False), False),
    (Ops.SHL, i8, (1, 7), -128), (Ops.SHL, i32, (1, 40), 0), (Ops.SHR, i32, (-8, 1), -4), (Ops.SHR, u8, (255, 4), 15),
    (Ops.WHERE, i32, (True, 1, 2), 1), (Ops.WHERE, i32, (0, 1, 2), 2), (Ops.WHERE, f32, (nan, 1.0, 2.0), 1.0),
    (Ops.RECIP, f32, (0.0,), inf), (Ops.RECIP, f32, (-0.0,), -inf), (Ops.RECIP, f32, (4.0,), 0.25),
    (Ops.TRUNC, f32, (-2.5,), -2.0), (Ops.TRUNC, f32, (inf,), inf), (Ops.TRUNC, i32, (7,), 7),
    (Ops.CAST, u8, (300,), 44), (Ops.CAST, i32, (-2.7,), -2), (Ops.CAST, B, (0.0,), False),
    (Ops.CAST, f16, (1e6,), inf),
    (Ops.NEG, i32, (-2**31,), -2**31), (Ops.NEG, B, (True,), False), (Ops.SUB, u8, (0, 1), 255),
    (Ops.DIV, f32, (1.0, 0.0), inf), (Ops.DIV, f32, (-1.0, 0.0), -inf), (Ops.DIV, f32, (0.0, 0.0), nan),
    (Ops.CMPGT, B, (2, 1), True), (Ops.CMPGE, B, (1, 1), True), (Ops.CMPLE, B, (2, 1), False),
    (Ops.CMPEQ, B, (3, 3), True),
    (Ops.NOT, B, (True,), False), (Ops.NOT, B, (2,), True),  # SPEC: Not(A) = CmpNe(A, 1)
    (Ops.EXP2, f32, (3.0,), 8.0), (Ops.EXP2, f32, (1e4,), inf), (Ops.EXP2, f32, (-inf,), 0.0),
    (Ops.LOG2, f32, (8.0,), 3.0), (Ops.LOG2, f32, (0.0,), -inf), (Ops.LOG2, f32, (-1.0,), nan),
    (Ops.LOG2, f32, (inf,), inf),
    (Ops.SIN, f32, (0.0,), 0.0), (Ops.SIN, f32, (inf,), nan),
    (Ops.SQRT, f32, (9.0,), 3.0), (Ops.SQRT, f32, (-1.0,), nan), (Ops.SQRT, f32, (-0.0,), -0.0),
    (Ops.POW, f32, (2.0, 10.0), 1024.0), (Ops.POW, f32, (-8.0, 1 / 3), nan), (Ops.POW, f32, (0.0, -1.0), inf),
    (Ops.POW, f32, (-0.0, -1.0), -inf), (Ops.POW, f64, (10.0, 400.0), inf), (Ops.POW, f64, (-10.0, 401.0), -inf),
    (Ops.POW, i32, (3, 4), 81), (Ops.POW, i8, (2, 7), -128), (Ops.POW, i32, (2, -1), 0), (Ops.POW, i32, (-1, -3), -1),
    (Ops.MULACC, i32, (3, 4, 5), 17),
])
def test_exec_alu(op, dt, args, want):
    assert same(exec_alu(op, dt, args), want)


def test_int_division_by_zero_raises_for_the_caller_to_decide():
    for op in (Ops.IDIV, Ops.MOD):
        with pytest.raises(ZeroDivisionError):
            exec_alu(op, i32, (1, 0))
    assert same(exec_alu(Ops.IDIV, f32, (1.0, 0.0)), inf)
    assert same(exec_alu(Ops.MOD, f32, (1.0, 0.0)), nan)


def test_invalid_operands_raise():
    with pytest.raises(ValueError, match="negative shift"):
        exec_alu(Ops.SHL, i32, (1, -1))
    with pytest.raises(DTypeError):
        exec_alu(Ops.CAST, i32, (nan,))
    with pytest.raises(ValueError, match="not an elementwise op"):
        exec_alu(Ops.RESHAPE, i32, (1,))


def test_every_elementwise_op_has_a_meaning():
    unary = GroupOp.Unary | {Ops.NEG, Ops.NOT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT}
    for op in GroupOp.Elementwise:
        n = 3 if op in (Ops.WHERE, Ops.MULACC) else 1 if op in unary else 2
        dt = B if op in GroupOp.Comparison | {Ops.NOT} else dtypes.uint64 if op is Ops.THREEFRY else i32
        assert exec_alu(op, dt, (1,) * n) is not None


def test_threefry_matches_random123_known_answers():
    assert threefry2x32(0, 0) == 0x99BA4EFE_6B200159
    assert threefry2x32(2**64 - 1, 2**64 - 1) == 0xBB002BE7_1CB996FC
    assert threefry2x32(0x85A308D3_243F6A88, 0x03707344_13198A2E) == 0x483DF7A0_C4923A9C
    assert exec_alu(Ops.THREEFRY, dtypes.uint64, (0, 0)) == 0x99BA4EFE_6B200159


def test_evaluate_looks_leaves_up_by_node_or_by_name():
    x, r = UOp.variable("x", 0, 9), UOp.range(8, 2)
    g = UOp.special(4, "gidx0")
    e = (x * 10 + r) * 10 + g
    assert evaluate(e, {"x": 1, "r2": 2, "gidx0": 3}) == 123
    assert evaluate(e, {x: 1, r: 2, g: 3}) == 123
    assert evaluate(x.bind(4) + 1) == 5
    assert evaluate(UOp.const(i32, 7)) == 7
    with pytest.raises(KeyError, match="'x'"):
        evaluate(e, {"r2": 0, "gidx0": 0})


def test_evaluate_uses_the_node_dtypes():
    x = UOp.variable("x", 0, 300)
    assert evaluate(x.cast(u8) + 1, {"x": 255}) == 0
    assert evaluate((x < 5).where(x.cast(f32) * 0.5, UOp.const(f32, -1.0)), {"x": 3}) == 1.5


def test_evaluate_rejects_non_scalar_nodes():
    with pytest.raises(ValueError, match="cannot evaluate Buffer"):
        evaluate(UOp.buffer(4, i32) + 1)


def test_evaluate_deep_chain():
    e = UOp.variable("x", 0, 9)
    for _ in range(20_000):
        e = e + 1
    assert evaluate(e, {"x": 2}) == 20_002
