"""Vector code: the lane axis Expand makes a vector, and Instruction Selection keeps as the target's vector type
(C vector extensions, OpenCL floatN with vloadN/vstoreN) or splits into scalar lanes. Every case runs on every
runtime against NumPy; the source checks say which form each target got."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from uopviz import Tensor
from uopviz.codegen.opt import Opt, OptOps
from uopviz.compiler import compile_kernel
from uopviz.dtype import dtypes
from uopviz.pipeline import kernels_of, schedule
from uopviz.renderer.cstyle import _strip
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.uop.ops import AxisType, Ops

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]
U, UNROLL = AxisType.UPCAST, AxisType.UNROLL


def run(fn: Callable[..., Tensor], arrays: list[np.ndarray], device: str, opts: list[Opt]) -> tuple[np.ndarray, str]:
    """fn of the arrays as one kernel lowered with opts: (its output, its source; '' on PYTHON)."""
    out = fn(*(Tensor(a, device=device) for a in arrays))
    ((ast, bufs),) = kernels_of(schedule([out.uop]))
    kernel, prog = compile_kernel(ast, device, opts)
    prog([buffers.handle(b) for b in bufs], wait=True)
    got = buffers.to_numpy(bufs[0])[: out.uop.size].reshape(out.shape)
    return got, kernel.source or ""


def upcast(axis: int, k: int) -> list[Opt]:
    return [Opt(OptOps.SPLIT, axis, (k, U, False))]


@pytest.mark.parametrize("device", DEVICES)
def test_gemm_tile_is_vector_loads_and_accumulators(device: str) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((6, 7), np.float32), rng.standard_normal((7, 24), np.float32)
    opts = [Opt(OptOps.SPLIT, 1, (8, U, False)), Opt(OptOps.SPLIT, 0, (3, U, False))]
    got, src = run(lambda x, y: x @ y, [a, b], device, opts)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    if device == "CPU":
        assert "typedef float float8 __attribute__((vector_size(32)));" in src
        assert src.count("*(float8_u*)(data2+") == 1  # one vector load of B feeds the three rows of the tile
    if device == "CL":
        assert "vload8(0,data2+" in src and "vstore8(" in src


@pytest.mark.parametrize("device", DEVICES)
def test_padded_tile_loads_whole_vectors_and_gathers_only_the_last(device: str) -> None:
    # 37 columns padded to 48 for 16-wide vectors, 11 rows to 12 for 2-row tiles, 13 (a prime) reduced: a column
    # block inside the matrix is one vector load; the last block, past the edge, gathers its clamped lanes
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((11, 13), np.float32), rng.standard_normal((13, 37), np.float32)
    opts = [Opt(OptOps.PADTO, 1, 16), Opt(OptOps.PADTO, 0, 2), Opt(OptOps.SPLIT, 1, (16, U, False)),
            Opt(OptOps.SPLIT, 0, (2, U, False))]
    got, src = run(lambda x, y: x @ y, [a, b], device, opts)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)
    got, _ = run(lambda x: x[:, :37] * 2 + 1, [b[:, :37] + 0], device, [Opt(OptOps.PADTO, 1, 8), *upcast(1, 8)])
    np.testing.assert_array_equal(got, b * 2 + 1)
    if device == "CPU":
        assert src.count("*(float16_u*)(data2+") == 1  # the whole vector, under the condition that it is whole
        assert "?*(float16_u*)(data2+" in src
    if device == "CL":
        assert "?vload16(0,data2+" in src


def _concatenated(device: str, seed: int, cols: int) -> str:
    """The source of a (5, 32) block concatenated with a (5, cols) one along columns in 16-wide vectors, its values
    checked against NumPy."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((5, 32), np.float32), rng.standard_normal((5, cols), np.float32)
    got, src = run(lambda x, y: x.cat(y, dim=1), [a, b], device, upcast(1, 16))
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1))
    return src


@pytest.mark.parametrize("device", DEVICES)
def test_a_concatenations_lanes_share_one_guard(device: str) -> None:
    # the gradient of a split: pieces of 32 and 16 columns padded out to 48 and added; 16-wide vectors never
    # straddle a piece, so every lane of one is guarded by the same `ridx < 2` (simplified as addresses are),
    # not by sixteen comparisons `ridx*16 + k < 32`
    src = _concatenated(device, 5, 16)
    if device != "PYTHON":
        assert "+1)<" not in src and "+15)<" not in src


@pytest.mark.parametrize("device", DEVICES)
def test_a_concatenations_pieces_are_gated_vector_loads(device: str) -> None:
    # each piece of 32 columns is a vector load gated on its guard, zero elsewhere: the Pad's select of the load
    # takes the load's place, where the load's fallback gather (of the clamped lanes) was loaded and thrown away
    src = _concatenated(device, 6, 32)
    if device == "CPU":
        assert src.count("?*(float16_u*)(data1+") == src.count("?*(float16_u*)(data2+") == 1
    if device == "CL":
        assert src.count("?vload16(0,data1+") == src.count("?vload16(0,data2+") == 1
    if device != "PYTHON":
        assert "data1[" not in src and "data2[" not in src  # no scalar load: no gather


@pytest.mark.parametrize("device", DEVICES)
def test_a_transposed_pieces_lanes_select_whole_addresses(device: str) -> None:
    # a piece read transposed gathers its lanes, each clamped by the Pad's select inside its address (`c ? i : 0`
    # under the product by the row stride, and under % and // where rows split): the select goes outside, between
    # the address with every select's first choice and with every second, and each is the lanes' one base plus a
    # constant, where every lane computed its own clamped arithmetic
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((6, 32), np.float32), rng.standard_normal((2, 16, 6), np.float32)
    got, src = run(lambda x, y: x.cat(y.reshape(32, 6).T, dim=1), [a, b], device, upcast(1, 16))
    np.testing.assert_array_equal(got, np.concatenate([a, b.reshape(32, 6).T], axis=1))
    if device != "PYTHON":
        lanes = re.findall(r"data2\[(.*?)\];", src)
        assert len(lanes) == 16 and all(re.fullmatch(r"alu\d+\?.*:.*", x) and "%" not in x for x in lanes), lanes


@pytest.mark.parametrize("device", DEVICES)
def test_lane_counts_without_a_vector_type_are_scalar_code(device: str) -> None:
    a = np.arange(30, dtype=np.float32).reshape(3, 10) - 7.5
    got, src = run(lambda x: x * 2 + 1, [a], device, upcast(1, 5))
    np.testing.assert_array_equal(got, a * 2 + 1)
    assert "float5" not in src and "vector_size" not in src


@pytest.mark.parametrize("device", DEVICES)
def test_unrolled_reduction_keeps_partials_per_lane(device: str) -> None:
    x = np.random.default_rng(1).standard_normal((5, 48)).astype(np.float32)
    x[2, 17] = np.nan
    got, src = run(lambda t: t.max(1), [x], device, [Opt(OptOps.SPLIT, 1, (8, UNROLL, False))])
    np.testing.assert_array_equal(got, x.max(1))
    got, _ = run(lambda t: t.sum(1), [x[[0, 1, 3, 4]]], device, [Opt(OptOps.SPLIT, 1, (4, UNROLL, False))])
    np.testing.assert_allclose(got, x[[0, 1, 3, 4]].sum(1), rtol=1e-5)
    if device == "CPU":
        # one partial per lane, combined after the loop (its upper half taken by a shuffle)
        assert "float acc0[8];" in src and "__builtin_shufflevector(val2,val2,4,5,6,7)" in src


@pytest.mark.parametrize("device", DEVICES)
def test_lane_partials_combine_in_halves(device: str) -> None:
    """16 partials are combined low half with high half, one vector op a step (16 -> 8 -> 4 -> 2 -> 1), not in a
    chain of 15 scalar ops; a NaN or a -inf in any lane still decides a max, and sums keep their value."""
    x = np.random.default_rng(4).standard_normal((6, 64)).astype(np.float32)
    x[1, 40], x[2, 3] = np.nan, np.inf
    x[4] = -np.inf
    got, src = run(lambda t: t.max(1), [x], device, [Opt(OptOps.SPLIT, 1, (16, UNROLL, False))])
    np.testing.assert_array_equal(got, x.max(1))
    y = np.random.default_rng(5).standard_normal((6, 64)).astype(np.float32)
    got, _ = run(lambda t: t.sum(1), [y], device, [Opt(OptOps.SPLIT, 1, (16, UNROLL, False))])
    np.testing.assert_allclose(got, y.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    if device == "CPU":
        assert all(f"float{n} alu" in src for n in (8, 4, 2)), src


@pytest.mark.parametrize("device", DEVICES)
def test_vector_trunc_floor_and_masks_at_the_edges(device: str) -> None:
    x = np.array([-0.0, 0.0, -0.5, 0.5, -1.5, 2.5, -2.0**23 - 1, 2.0**23 + 1, 1e10, -1e10, 3e38, np.inf, -np.inf,
                  np.nan, -7.99, 7.99], np.float32)
    got, src = run(lambda t: t.trunc(), [x], device, upcast(0, 8))
    np.testing.assert_array_equal(got, np.trunc(x))
    assert np.array_equal(np.signbit(got), np.signbit(np.trunc(x)))  # -0.0 and -0.5 truncate to -0.0
    got, _ = run(lambda t: t.floor(), [x], device, upcast(0, 4))
    np.testing.assert_array_equal(got, np.floor(x))
    got, _ = run(lambda t, u: t.maximum(u), [x, x[::-1].copy()], device, upcast(0, 16))
    np.testing.assert_array_equal(got, np.maximum(x, x[::-1]))
    if device == "CPU":
        assert "truncf" not in src and "__builtin_convertvector" in src


@pytest.mark.parametrize("device", DEVICES)
def test_integer_floor_division_and_modulo_by_powers_of_two(device: str) -> None:
    a = np.arange(-20, 20, dtype=np.int32)
    got, src = run(lambda t: t // 4, [a], device, upcast(0, 8))
    np.testing.assert_array_equal(got, a // 4)
    got, _ = run(lambda t: t % 8, [a], device, upcast(0, 8))
    np.testing.assert_array_equal(got, a % 8)
    got, _ = run(lambda t: t // 3, [a], device, upcast(0, 4))  # not a power of two: lane by lane
    np.testing.assert_array_equal(got, a // 3)
    if device == "CPU":
        assert ">>2" in src


@pytest.mark.parametrize("device", DEVICES)
def test_casts_bitcasts_and_selects(device: str) -> None:
    a = np.array([-3.7, -0.2, 0.0, 1.5, 2.5, 1e3, -1e3, 7.0, 8.25, -9.5, 11.0, 0.75], np.float32)
    got, src = run(lambda t: (t.cast("int32") * 3).cast("float32"), [a], device, upcast(0, 4))
    np.testing.assert_array_equal(got, (a.astype(np.int32) * 3).astype(np.float32))
    got, _ = run(lambda t: t.bitcast("int32") >> 3, [a], device, upcast(0, 4))
    np.testing.assert_array_equal(got, a.view(np.int32) >> 3)
    got, _ = run(lambda t: (t > 1).where(t, -t), [a], device, upcast(0, 4))
    np.testing.assert_array_equal(got, np.where(a > 1, a, -a))
    got, _ = run(lambda t: ((t > 1) & (t < 9)).where(1.0, 0.0), [a], device, upcast(0, 4))
    np.testing.assert_array_equal(got, ((a > 1) & (a < 9)).astype(np.float32))
    if device == "CPU":
        assert "__builtin_convertvector" in src


BOOL_SELECTS: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "c ? true : false": lambda c, a, b: c.where(True, False),
    "c ? false : true": lambda c, a, b: c.where(False, True),
    "c ? true : b": lambda c, a, b: c.where(True, b),
    "c ? false : b": lambda c, a, b: c.where(False, b),
    "c ? a : true": lambda c, a, b: c.where(a, True),
    "c ? a : false": lambda c, a, b: c.where(a, False),
    "c ? a : b": lambda c, a, b: c.where(a, b),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", BOOL_SELECTS)
def test_bool_selects_keep_the_comparisons_masks(device: str, form: str) -> None:
    """A select of bools is logic on the masks of the comparisons it selects between, so the float select it feeds
    stays a vector select (a causal mask's tril is c ? true : false: it split each attention row into lanes)."""
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(16, np.float32), rng.standard_normal(16, np.float32)

    def fn(t: Tensor, u: Tensor) -> Tensor:
        return BOOL_SELECTS[form](t > 0, u > 0, t < u).where(t, -u)
    expected = {"c ? true : false": x > 0, "c ? false : true": ~(x > 0), "c ? true : b": (x > 0) | (x < y),
                "c ? false : b": ~(x > 0) & (x < y), "c ? a : true": ~(x > 0) | (y > 0),
                "c ? a : false": (x > 0) & (y > 0), "c ? a : b": np.where(x > 0, y > 0, x < y)}[form]
    got, src = run(fn, [x, y], device, upcast(0, 16))
    np.testing.assert_array_equal(got, np.where(expected, x, -y))
    if device == "CPU":
        assert "?" not in src  # no lane selected alone


@pytest.mark.parametrize("device", DEVICES)
def test_strided_lanes_gather_and_scatter(device: str) -> None:
    a = np.arange(36, dtype=np.float32).reshape(6, 6)
    got, src = run(lambda t: t.T + 1, [a], device, upcast(1, 2))
    np.testing.assert_array_equal(got, a.T + 1)
    if device == "CPU":
        assert "(float2){" in src  # the lanes of a strided read are gathered into one vector
    got, src = run(lambda t: t.T + 1, [a], device, upcast(0, 2) + upcast(1, 2))
    np.testing.assert_array_equal(got, a.T + 1)
    if device == "CPU":  # the lane axis is the read's: both copies load whole vectors (their sums' terms in other
        assert src.count("*(float2_u*)(data1+") == 2 and "(float2){" not in src  # orders), the writes scatter
        assert "data0[(ridx1*2)+(ridx0*12)] = alu0[0];" in src


@pytest.mark.parametrize("device", DEVICES)
def test_every_other_element_is_two_vector_loads_and_a_shuffle(device: str) -> None:
    # rows of 39: the last vector of the last row ends on the buffer's last element (the loads stay inside the
    # gather's span); a reduction's update by such a vector is still one fused multiply-add (a shuffle is no
    # vector assembled lane by lane)
    a = np.arange(5 * 39, dtype=np.float32).reshape(5, 39)
    got, src = run(lambda t: t[:, ::2] + 1, [a], device, upcast(1, 4))
    np.testing.assert_array_equal(got, a[:, ::2] + 1)
    if device == "CPU":
        assert src.count("*(float4_u*)(data1+") == 2
        assert "float4 shuf0 = __builtin_shufflevector(val0,val1,0,2,5,7);" in src  # one shuffle of the two
    got, src = run(lambda t: (t[:, ::2] * 3).sum(0), [a], device, upcast(0, 4))
    np.testing.assert_array_equal(got, (a[:, ::2] * 3).sum(0))
    if device == "CPU":
        assert "fmaf_float4(shuf0," in src


def test_python_target_gets_scalar_code_only() -> None:
    a = np.arange(16, dtype=np.float32)
    out = Tensor(a, device="PYTHON") * 3
    ((ast, _),) = kernels_of(schedule([out.uop]))
    kernel, _ = compile_kernel(ast, "PYTHON", upcast(0, 8))
    vectors = [u for u in kernel.linear.src
               if u.shape and u.op not in (Ops.PARAM, Ops.BUFFER) and u.dtype != dtypes.index]
    assert not vectors and [u.op for u in kernel.linear.src].count(Ops.STORE) == 8


def test_lane_addresses_are_one_simplified_base_plus_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    # an address affine in the lane (rows, columns and the lane's own offset) is simplified once, as its base,
    # and its 16 lanes are the base plus 0..15: no lane is simplified on its own (each lane's copy of the
    # address's terms had been, 16 times over), and the program still reads every element it should
    from uopviz.codegen import devectorize
    simplified: list[Ops] = []
    real = devectorize._simplified

    def spy(x, memo=None):  # type: ignore[no-untyped-def]
        simplified.append(x.op)
        return real(x, memo)
    monkeypatch.setattr(devectorize, "_simplified", spy)
    a = np.arange(4 * 6 * 32, dtype=np.float32).reshape(4, 6, 32)
    got, src = run(lambda t: t[:, 1:5, :] * 2 + 1, [a], "CPU", upcast(2, 16))
    np.testing.assert_array_equal(got, a[:, 1:5, :] * 2 + 1)
    assert simplified and Ops.STACK not in simplified
    assert "*(float16_u*)(data1+" in src  # the lanes are consecutive: one vector load


@pytest.mark.parametrize(("expr", "operand_of", "rendered"), [
    ("(c?(i+-4):0)", "+", "(c?(i+-4):0)"),  # p+c?i:0 tests the pointer, then yields an integer read as an address
    ("((i<4)!=1)", "+", "((i<4)!=1)"),
    ("(a&b)", "+", "(a&b)"),
    ("(i<<2)", "+", "(i<<2)"),
    ("(i*16)", "+", "i*16"),
    ("(i+(j?1:2))", "+", "i+(j?1:2)"),  # the select inside parentheses of its own
    ("(a?b:c)", "?", "(a?b:c)"),
    ("(a<b)", "?", "a<b"),
    ("(a?b:c)", None, "a?b:c"),  # alone (an index in brackets, a condition in if (...))
])
def test_a_vector_address_keeps_the_parentheses_its_meaning_needs(expr: str, operand_of: str | None,
                                                                     rendered: str) -> None:
    # a stride-2 read under a padding's select rendered `data1+alu1?(ridx0+-4):0`: a kernel that segfaulted
    # (tests/tensor/test_fuzz.py::test_budget crashed its worker)
    assert _strip(expr, operand_of) == rendered
