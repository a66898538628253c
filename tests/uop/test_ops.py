"""The UOp node: hash-consing, immutability, groups, AxisTypes, printing and graph walking."""

import copy
import pickle
import subprocess
import sys

import pytest

import uopviz
from uopviz import AxisType, GroupOp, Ops, UOp, dtypes
from uopviz.uop.ops import toposort


def test_public_api_imports():
    from uopviz import AxisType, Ops, UOp, dtypes, trace  # noqa: F401
    assert callable(uopviz.trace)


def test_import_is_light():
    code = "import sys, uopviz; bad = {'numpy', 'fastapi', 'pydantic'} & set(sys.modules); print(sorted(bad))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_hash_consing():
    a = UOp(Ops.ADD, (UOp.const(dtypes.int32, 1), UOp.const(dtypes.int32, 2)))
    b = UOp(Ops.ADD, (UOp.const(dtypes.int32, 1), UOp.const(dtypes.int32, 2)))
    assert a is b
    assert UOp.range(4, 0) is UOp.range(4, 0) and UOp.range(4, 0) is not UOp.range(4, 1)
    assert UOp.range(4, 0) is not UOp.range(4, 0, AxisType.REDUCE)
    assert a.replace(tag="x") is not a and a.replace(tag="x") is a.replace(tag="x")


def test_consts_of_equal_value_but_different_kind_stay_distinct():
    assert UOp.const(dtypes.float32, 0.0) is not UOp.const(dtypes.float32, -0.0)
    assert UOp.const(dtypes.int32, 1) is not UOp.const(dtypes.float32, 1.0)
    assert UOp.const(dtypes.float32, 1) is UOp.const(dtypes.float32, 1.0)
    nan = UOp.const(dtypes.float32, float("nan"))
    assert nan is UOp.const(dtypes.float32, float("nan"))


def test_immutable_copy_and_pickle():
    u = UOp.range(4, 0) + 1
    with pytest.raises(AttributeError, match="immutable"):
        u.op = Ops.MUL  # type: ignore[misc]
    assert copy.copy(u) is u and copy.deepcopy(u) is u
    assert pickle.loads(pickle.dumps(u)) is u


def test_no_truth_value():
    with pytest.raises(TypeError, match="no truth value"):
        bool(UOp.range(4, 0) < 3)
    assert (UOp.range(4, 0) < 4).resolve() is True
    assert (UOp.range(4, 0) < 2).resolve(default=False) is False


def test_groups_cover_every_op():
    covered = set().union(GroupOp.Source, GroupOp.Movement, GroupOp.Reduce, GroupOp.Call, GroupOp.Load,
                          GroupOp.Store, GroupOp.Ordering, GroupOp.Elementwise, GroupOp.Marker, GroupOp.Codegen,
                          GroupOp.Symbolic)
    assert covered == set(Ops)
    assert GroupOp.group_of(Ops.RESHAPE) == "Movement" and GroupOp.Colour["Movement"] == "#2E7D32"
    assert GroupOp.group_of(Ops.SUB) == "Elementwise" and GroupOp.group_of(Ops.BUFFER) == "Other"


@pytest.mark.parametrize("t, letter, colour", [
    (AxisType.GLOBAL, "g", "#1565C0"), (AxisType.LOCAL, "l", "#00838F"), (AxisType.WARP, "w", "#00ACC1"),
    (AxisType.THREAD, "t", "#42A5F5"), (AxisType.LOOP, "L", "#616161"), (AxisType.REDUCE, "R", "#C62828"),
    (AxisType.GROUP_REDUCE, "G", "#E53935"), (AxisType.UPCAST, "u", "#F9A825"), (AxisType.UNROLL, "r", "#7B1FA2"),
])
def test_axistype_letters_and_colours(t, letter, colour):
    assert (t.letter, t.colour) == (letter, colour) and AxisType.from_letter(letter) is t


def test_axistype_priority_orders_parallel_before_serial():
    order = sorted(AxisType, key=lambda t: t.priority)
    assert order[0] is AxisType.GLOBAL and order[-1] is AxisType.UNROLL
    assert AxisType.LOOP.priority < AxisType.REDUCE.priority < AxisType.UPCAST.priority


def test_operators_build_spec_primitives():
    r = UOp.range(8, 0)
    assert (r - 1).op is Ops.ADD and (r - 1).src[1].op is Ops.MUL
    assert (r <= 3).op is Ops.CMPNE and (r >= 3).src[0].op is Ops.CMPLT
    assert r.eq(3).render() == "!(r0!=3)"
    assert (2 * r + 1).render() == "((2*r0)+1)"
    assert (r - 1).render() == "(r0-1)"


def test_one_line_and_tree_printing():
    b = UOp.buffer(12, dtypes.float32)
    k = b.reshape((3, 4)).index(UOp.range(3, 0), UOp.range(4, 1))
    assert repr(UOp.range(3, 0) * 4) == "Mul:index (r0*4)"
    assert repr(b.reshape((3, 4))) == "Reshape:float32(3,4) [2 src]"
    t = k.tree().splitlines()
    assert t[0].startswith("0 Index:float32")
    assert any(line.strip().startswith("^") for line in t)  # the Const 3 bound is shared by the shape and r0
    shared = UOp.range(3, 0) + UOp.range(3, 0)
    assert "^1 Range" in shared.tree()


def test_toposort_and_substitute_on_deep_graphs():
    x = UOp.range(10, 0)
    for i in range(20000):
        x = x + i
    order = x.toposort()
    assert order[-1] is x and order.index(x.src[0]) < order.index(x)
    y = x.substitute({UOp.range(10, 0): UOp.range(10, 1)})
    assert UOp.range(10, 1) in set(y.toposort()) and UOp.range(10, 0) not in set(y.toposort())
    assert len(order) == 40001  # 20000 Adds, 20000 Consts, r0 and its bound
    assert len(toposort([x, y])) == 40001 + 20001  # y shares the Consts, adds r1 and new Adds
    assert "<Add graph of 40001 nodes>" in repr(x)


def test_hand_built_kernel_reads_like_the_seed_example():
    """A gemm kernel written by hand with builders, as seed 002 users expect to build a graph."""
    M, N, K = 5, 7, 3
    a, b, c = UOp.param(0, (M * K,)), UOp.param(1, (K * N,)), UOp.param(2, (M * N,))
    i, j = UOp.range(M, 0, AxisType.GLOBAL), UOp.range(N, 1, AxisType.GLOBAL)
    k = UOp.range(K, 2, AxisType.REDUCE)
    acc = (a.index(i * K + k).load() * b.index(k * N + j).load()).reduce(Ops.ADD, k)
    kernel = UOp.sink(c.index(i * N + j).store(acc).end(i, j))
    assert kernel.dtype == dtypes.void and kernel.src[0].op is Ops.END and kernel.src[0].src[1] is i
    assert {u.op for u in kernel.toposort()} >= {Ops.PARAM, Ops.RANGE, Ops.INDEX, Ops.LOAD, Ops.REDUCE, Ops.STORE}
