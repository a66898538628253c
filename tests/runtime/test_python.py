"""The PYTHON runtime against NumPy, on Linear programs written by hand (instruction order chosen explicitly)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from uopviz.codegen.tc import MMA_SYNC
from uopviz.dtype import DType, dtypes
from uopviz.runtime import device as devices
from uopviz.runtime.device import CompileError
from uopviz.runtime.python import ExecutionError, PythonRuntime
from uopviz.target import Kernel
from uopviz.uop.ops import AddrSpace, GroupOp, Ops, UOp

RT = PythonRuntime()
f32, i32 = dtypes.float32, dtypes.int32


def linear(*nodes: UOp) -> UOp:
    """A Linear program: each node preceded by those of its sources not yet emitted (sources first)."""
    out: dict[UOp, None] = {}
    for n in nodes:
        out.update(dict.fromkeys(u for u in n.toposort() if u not in out))
    return UOp(Ops.LINEAR, tuple(out))


def run(name: str, lin: UOp, params: Sequence[DType], inputs: dict[int, np.ndarray], sizes: dict[int, int],
        vars: tuple[str, ...] = (), vals: tuple[int, ...] = ()) -> list[np.ndarray]:
    """Run on fresh buffers: inputs by slot, outputs (zero-filled) of the given sizes by slot; returns every buffer."""
    prog = RT.compile(Kernel(name, lin, None, tuple(params), vars=vars))
    handles = []
    for slot, dt in enumerate(params):
        data = inputs.get(slot)
        h = RT.alloc(len(data) if data is not None else sizes[slot], dt)
        if data is not None:
            RT.copyin(h, data)
        handles.append(h)
    assert prog(handles, vals) is None
    return [RT.copyout(h, len(h), dt) for h, dt in zip(handles, params)]


def vadd(n: int = 7, shift: int = 0) -> tuple[UOp, UOp]:
    """out[i] = a[i + shift] + b[i] for i < n; returns (program, the Add)."""
    a, b, out = (UOp.param(k, (n,), f32) for k in (1, 2, 0))
    r = UOp.range(n, 0)
    s = a.index(r + shift).load() + b.index(r).load()
    return linear(out, a, b, r, out.index(r).store(s).end(r)), s


def test_runtime_memory_and_registry() -> None:
    assert isinstance(devices.get("python"), PythonRuntime)
    assert RT.target.dialect is None and RT.target.global_dims == 0 and RT.target.native == GroupOp.Decomposed
    h = RT.alloc(5, dtypes.int16)
    RT.copyin(h, np.arange(5, dtype=np.int16))
    out = RT.copyout(h, 5, dtypes.int16)
    assert out.dtype == np.int16 and out.tolist() == [0, 1, 2, 3, 4] and out is not h
    assert RT.alloc(0, f32).size == 0
    assert RT.describe()["device"] == "PYTHON"


def test_vector_add_and_timing() -> None:
    a, b = np.linspace(-1, 1, 7, dtype=np.float32), np.arange(7, dtype=np.float32)
    lin, _ = vadd()
    out = run("vadd", lin, (f32, f32, f32), {1: a, 2: b}, {0: 7})[0]
    np.testing.assert_array_equal(out, a + b)
    prog = RT.compile(Kernel("vadd", lin, None, (f32, f32, f32)))
    t = prog([RT.alloc(7, f32), RT.alloc(7, f32), RT.alloc(7, f32)], wait=True)
    assert isinstance(t, float) and t >= 0


def test_elementwise_float() -> None:
    x, y = np.array([0.5, 2.0, -3.0, 4.0], np.float32), np.array([1.5, -1.0, 0.25, 8.0], np.float32)
    a, b, out = (UOp.param(k, (4,), f32) for k in (1, 2, 0))
    r = UOp.range(4, 0)
    la, lb = a.index(r).load(), b.index(r).load()
    e = (la * lb + la).maximum(lb).alu(Ops.SQRT) + (la < lb).where(la.alu(Ops.EXP2), lb.recip())
    out_ = run("ew", linear(out, a, b, r, out.index(r).store(e).end(r)), (f32,) * 3, {1: x, 2: y}, {0: 4})[0]
    expect = np.sqrt(np.maximum(x * y + x, y)) + np.where(x < y, np.exp2(x), 1 / y)
    np.testing.assert_allclose(out_, expect, rtol=1e-6)


def test_elementwise_int_wraps_like_int32() -> None:
    x = np.array([2**30, -7, 123456, -(2**31)], np.int32)
    y = np.array([4, 3, 100000, 1], np.int32)
    a, b, out = (UOp.param(k, (4,), i32) for k in (1, 2, 0))
    r = UOp.range(4, 0)
    la, lb = a.index(r).load(), b.index(r).load()
    e = (la * lb) ^ (la >> 1) | (lb << 3)
    got = run("int", linear(out, a, b, r, out.index(r).store(e).end(r)), (i32,) * 3, {1: x, 2: y}, {0: 4})[0]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, (x * y) ^ (x >> 1) | (y << 3))


def test_floor_division_matches_numpy() -> None:
    x = np.array([7, -7, 7, -7, 0, 5], np.int32)
    y = np.array([2, 2, -2, -2, 3, -1], np.int32)
    q, m, a, b = (UOp.param(k, (6,), i32) for k in (0, 1, 2, 3))
    r = UOp.range(6, 0)
    la, lb = a.index(r).load(), b.index(r).load()
    body = UOp(Ops.GROUP, (q.index(r).store(la // lb), m.index(r).store(la % lb)))
    got = run("divmod", linear(q, m, a, b, r, body.end(r)), (i32,) * 4, {2: x, 3: y}, {0: 6, 1: 6})
    np.testing.assert_array_equal(got[0], np.floor_divide(x, y))
    np.testing.assert_array_equal(got[1], np.mod(x, y))


def test_integer_division_by_zero_names_the_kernel() -> None:
    a, out = UOp.param(1, (3,), i32), UOp.param(0, (3,), i32)
    r = UOp.range(3, 0)
    lin = linear(out, a, r, out.index(r).store(UOp.const(i32, 10) // a.index(r).load()).end(r))
    with pytest.raises(ExecutionError, match=r"kernel div0, instruction \d+ \(Idiv.*ZeroDivisionError"):
        run("div0", lin, (i32, i32), {1: np.array([1, 0, 2], np.int32)}, {0: 3})


def test_reduction_with_reg_accumulator() -> None:
    x = np.arange(1, 8, dtype=np.float32) / 4
    a, out = UOp.param(1, (7,), f32), UOp.param(0, (1,), f32)
    acc = UOp.buffer(1, f32, device="PYTHON", addrspace=AddrSpace.REG, uid=1)
    init = acc.index(0).store(UOp.const(f32, 0.0))
    r = UOp.range(7, 0)
    upd = acc.index(0).store(acc.after(init).index(0).load() + a.index(r).load())
    loop = upd.end(r)
    lin = linear(out, a, acc, init, r, upd, loop, out.index(0).store(acc.after(loop).index(0).load()))
    assert run("sum", lin, (f32, f32), {1: x}, {0: 1})[0][0] == pytest.approx(float(x.sum()))


def test_gemm_nested_ranges() -> None:
    M, K, N = 5, 7, 3
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c, a, b = UOp.param(0, (M, N), f32), UOp.param(1, (M, K), f32), UOp.param(2, (K, N), f32)
    i, j, k = UOp.range(M, 0), UOp.range(N, 1), UOp.range(K, 2)
    acc = UOp.buffer(1, f32, device="PYTHON", addrspace=AddrSpace.REG, uid=1)
    init = acc.index(0).store(UOp.const(f32, 0.0))
    prod_ = a.index(i * K + k).load() * b.index(k * N + j).load()
    upd = acc.index(0).store(acc.after(init).index(0).load() + prod_)
    end_k = upd.end(k)
    st = c.index(i * N + j).store(acc.after(end_k).index(0).load())
    lin = linear(c, a, b, i, j, acc, init, k, upd, end_k, st, st.end(i, j))
    assert [u.op for u in lin.src[-2:]] == [Ops.END, Ops.END]
    got = run("gemm", lin, (f32,) * 3, {1: A.reshape(-1), 2: B.reshape(-1)}, {0: M * N})[0]
    np.testing.assert_allclose(got.reshape(M, N), A @ B, rtol=1e-5, atol=1e-6)


def test_gated_load_skips_memory_and_gated_store() -> None:
    # out[i] = a[i-2] if 2 <= i < 9 else -1 (the index is out of range where the gate is false); then
    # neg[i] = out[i] only where out[i] < 0
    x = np.arange(7, dtype=np.float32) + 1
    out, a, neg = UOp.param(0, (10,), f32), UOp.param(1, (7,), f32), UOp.param(2, (10,), f32)
    r = UOp.range(10, 0)
    gate = (r >= 2) & (r < 9)
    v = a.index(r - 2).load(UOp.const(f32, -1.0), gate)
    st = out.index(r).store(v)
    st2 = neg.index(r).store(v, v < 0.0)
    lin = linear(out, a, neg, r, st, st2, UOp(Ops.GROUP, (st, st2)).end(r))
    got = run("gated", lin, (f32,) * 3, {1: x, 2: np.full(10, 5, np.float32)}, {0: 10})
    expect = np.concatenate([[-1, -1], x, [-1]]).astype(np.float32)
    np.testing.assert_array_equal(got[0], expect)
    np.testing.assert_array_equal(got[2], np.where(expect < 0, expect, 5))


def test_zero_trip_loop_skips_its_body() -> None:
    a, out = UOp.param(1, (0,), f32), UOp.param(0, (1,), f32)
    r = UOp.range(0, 0)
    loop = out.index(r).store(a.index(r).load()).end(r)
    after = out.index(0).store(UOp.const(f32, 3.0))
    assert run("empty", linear(out, a, r, loop, after), (f32, f32), {1: np.zeros(1, np.float32)}, {0: 1})[0][0] == 3


def test_bitcast() -> None:
    x = np.array([1.0, -2.5, 0.0, np.inf], np.float32)
    a, out = UOp.param(1, (4,), f32), UOp.param(0, (4,), i32)
    r = UOp.range(4, 0)
    lin = linear(out, a, r, out.index(r).store(a.index(r).load().bitcast(i32)).end(r))
    np.testing.assert_array_equal(run("bc", lin, (i32, f32), {1: x}, {0: 4})[0], x.view(np.int32))


def test_define_var_sizes_loop_and_params() -> None:
    n = UOp.variable("n", 0, 16)
    a, out = UOp.param(1, (n,), f32), UOp.param(0, (n,), f32)
    r = UOp.range(n, 0)
    lin = linear(n, out, a, r, out.index(r).store(a.index(r).load() * n.cast(f32)).end(r))
    x = np.arange(10, dtype=np.float32)
    got = run("scale", lin, (f32, f32), {1: x}, {0: 10}, vars=("n",), vals=(6,))[0]
    np.testing.assert_array_equal(got, np.concatenate([x[:6] * 6, np.zeros(4, np.float32)]))
    got = run("scale", lin, (f32, f32), {1: x}, {0: 10}, vars=("n",), vals=(0,))[0]
    assert not got.any()
    with pytest.raises(ValueError, match="outside"):
        run("scale", lin, (f32, f32), {1: x}, {0: 10}, vars=("n",), vals=(17,))


def test_specials_cover_the_grid() -> None:
    g0, g1 = UOp.special(4, "gidx0"), UOp.special(3, "gidx1")
    a, out = UOp.param(1, (12,), i32), UOp.param(0, (12,), i32)
    idx = g1 * 4 + g0
    lin = linear(out, a, g0, g1, out.index(idx).store(a.index(idx).load() * 2 + g0))
    x = np.arange(12, dtype=np.int32)
    np.testing.assert_array_equal(run("grid", lin, (i32, i32), {1: x}, {0: 12})[0], x * 2 + x % 4)


def test_local_memory_is_shared_by_a_work_group_across_a_barrier() -> None:
    # 3 groups of 4 lanes: each lane puts a[g*4+l] in local memory; after the barrier lane 0 sums them
    g, lane = UOp.special(3, "gidx0"), UOp.special(4, "lidx0")
    a, out = UOp.param(1, (12,), f32), UOp.param(0, (3,), f32)
    lds = UOp.buffer(4, f32, device="PYTHON", addrspace=AddrSpace.LOCAL, uid=2)
    put = lds.index(lane).store(a.index(g * 4 + lane).load())
    bar = UOp(Ops.BARRIER, (put,))
    iff = UOp(Ops.IF, (lane.eq(0),), None)
    acc = UOp.buffer(1, f32, device="PYTHON", addrspace=AddrSpace.REG, uid=1)
    init = acc.index(0).store(UOp.const(f32, 0.0))
    r = UOp.range(4, 0)
    upd = acc.index(0).store(acc.after(init).index(0).load() + lds.after(bar).index(r).load())
    loop = upd.end(r)
    st = out.index(g).store(acc.after(loop).index(0).load())
    lin = linear(out, a, g, lane, lds, put, bar, iff, acc, init, r, upd, loop, st, UOp(Ops.ENDIF, (iff,)))
    x = np.arange(12, dtype=np.float32)
    np.testing.assert_array_equal(run("lds", lin, (f32, f32), {1: x}, {0: 3})[0], x.reshape(3, 4).sum(1))


def test_out_of_range_index_names_kernel_buffer_and_index() -> None:
    lin, _ = vadd(shift=1)
    x = np.zeros(7, np.float32)
    with pytest.raises(ExecutionError, match=r"kernel vadd_oob, instruction \d+ \(Load\) reads Param 1 at index 7"):
        run("vadd_oob", lin, (f32,) * 3, {1: x, 2: x}, {0: 7})


def test_param_shorter_than_declared_is_rejected() -> None:
    lin, _ = vadd()
    prog = RT.compile(Kernel("vadd", lin, None, (f32,) * 3))
    with pytest.raises(ValueError, match="Param 1 needs a 1-D float32 array of at least 7"):
        prog([RT.alloc(7, f32), RT.alloc(5, f32), RT.alloc(7, f32)])


def test_malformed_programs_are_compile_errors() -> None:
    r = UOp.range(3, 0)
    out = UOp.param(0, (3,), f32)
    no_end = linear(out, r, out.index(r).store(UOp.const(f32, 1.0)))
    with pytest.raises(CompileError, match="Range has no End"):
        RT.compile(Kernel("noend", no_end, None, (f32,)))
    st = out.index(0).store(UOp.const(f32, 1.0))
    for instrs, what in (((out.src[0], st.src[0], st), "Index uses Param"), ((st,), "Store uses Index")):
        with pytest.raises(CompileError, match=f"{what}.*no value before it"):
            RT.compile(Kernel("late", UOp(Ops.LINEAR, instrs), None, (f32,)))
    wmma = linear(UOp(Ops.WMMA, (UOp.const(f32, 1.0),) * 3, MMA_SYNC[0]))
    with pytest.raises(CompileError, match="Wmma m16n8k16 needs work-groups"):
        RT.compile(Kernel("wmma", wmma, None, ()))
