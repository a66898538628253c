"""Ranges of bound 0 never run: a reduction over one is its identity and a Store under one writes nothing, on
every runtime, in hand-built kernels whose index arithmetic would otherwise fold the range away."""

from __future__ import annotations

import numpy as np
import pytest

from uopviz.dtype import dtypes
from uopviz.realize import run_kernel
from uopviz.runtime import device as devices
from uopviz.schedule.rangeify import collapse
from uopviz.uop.ops import AxisType, Ops, UOp
from uopviz.uop.pattern import PatternMatcher, graph_rewrite
from uopviz.uop.symbolic import symbolic

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]
simplify = PatternMatcher([*symbolic.rules, *collapse.rules])  # type: ignore[list-item]
N = 5  # output rows; the input has 3 per row


def reduce_kernel(op: Ops, dtype: object, *bounds: int) -> UOp:
    """out[i] = op over ranges of `bounds` of a[i*3 + r0*7 + r1*11 + ...]: every stride is at least one row, so
    a range folded to the point 0 would leave a read of real data behind."""
    out, a = UOp.param(0, (N,), dtype), UOp.param(1, (3 * N,), dtype)
    i = UOp.range(N, 0)
    rs = [UOp.range(b, k + 1, AxisType.REDUCE) for k, b in enumerate(bounds)]
    flat = i * 3
    for r, stride in zip(rs, (7, 11)):
        flat = flat + r * stride
    return UOp.sink(out.index(i).store(a.index(flat).load().reduce(op, *rs)).end(i))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("op", "dtype", "want"), [
    (Ops.ADD, dtypes.float32, 0.0), (Ops.MUL, dtypes.float32, 1.0), (Ops.MAX, dtypes.float32, -np.inf),
    (Ops.MAX, dtypes.int32, np.iinfo(np.int32).min), (Ops.MAX, dtypes.uint8, 0), (Ops.MUL, dtypes.int64, 1),
    (Ops.ADD, dtypes.bool, False), (Ops.MAX, dtypes.bool, False), (Ops.MUL, dtypes.bool, True),
])
@pytest.mark.parametrize("bounds", [(0,), (0, 2), (2, 0)], ids=str)
def test_reduce_over_an_empty_range_is_its_identity(device: str, op: Ops, dtype: object, want: object,
                                                     bounds: tuple[int, ...]) -> None:
    np_dt = dtypes.to_numpy(dtype)  # type: ignore[arg-type]
    a = (np.arange(3 * N) % 2 == 1) if np_dt == np.bool_ else (np.arange(3 * N) + 2).astype(np_dt)
    got = run_kernel(reduce_kernel(op, dtype, *bounds), [np.full(N, 7, np_dt), a], device)[0]
    np.testing.assert_array_equal(got, np.full(N, want, np_dt))


@pytest.mark.parametrize("device", DEVICES)
def test_a_store_under_an_empty_range_writes_nothing(device: str) -> None:
    out, a = UOp.param(0, (N,)), UOp.param(1, (3,))
    i, j = UOp.range(3, 0), UOp.range(0, 1)
    one = UOp.const(dtypes.float32, 1.0)
    k = UOp.sink(UOp(Ops.GROUP, (out.index(j * 2).store(one), out.index(j + 1).store(a.index(j).load()))).end(j),
                 out.index(i + 2).store(a.index(i).load() * 2.0).end(i))  # j*2 folds: the Store would run once
    got = run_kernel(k, [np.full(N, 7, np.float32), np.array([1, 2, 3], np.float32)], device)[0]
    np.testing.assert_array_equal(got, [7, 7, 2, 4, 6])


def test_rules_remove_empty_ranges_whole() -> None:
    out = graph_rewrite(reduce_kernel(Ops.MAX, dtypes.float32, 0, 2), simplify)
    assert not any(u.op is Ops.RANGE and u.arg.type is AxisType.REDUCE for u in out.toposort())
    st = next(u for u in out.toposort() if u.op is Ops.STORE)
    assert st.src[1].op is Ops.CONST and st.src[1].arg.value == -np.inf
    b = UOp.param(0, (4,))
    assert graph_rewrite(UOp.sink(b.index(0).store(b.index(1).load()).end(UOp.range(0, 0))), simplify).src == \
        (UOp(Ops.GROUP, ()),)


def test_an_unused_range_that_may_be_empty_is_kept_by_max() -> None:
    # max over r of v (v free of r) is v only if r runs at least once; a bound that may be 0 keeps the loop
    v = UOp.param(1, (1,)).index(0).load()
    maybe, surely = UOp.range(UOp.variable("n", 0, 8), 1, AxisType.REDUCE), UOp.range(UOp.variable("m", 1, 8), 2)
    assert graph_rewrite(v.reduce(Ops.MAX, maybe), simplify).op is Ops.REDUCE
    assert graph_rewrite(v.reduce(Ops.MAX, surely), simplify) is v
    total = graph_rewrite(v.reduce(Ops.ADD, maybe), simplify)  # a sum is v times the count, 0 for none
    assert total.op is Ops.MUL and total.src[0] is v
