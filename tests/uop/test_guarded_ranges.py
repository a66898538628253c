"""A select's interval with each branch taken under what its condition says (props._where_range): the padded
reads of a convolution (`where(r >= 1 & r < 33, r - 1, 0)`) lie in [0, 31], so their `% 32` and `// 32` fold.
Property tests check every interval against brute-force evaluation at every point of small domains."""

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uopviz import UOp, dtypes
from uopviz.uop.alu import exec_alu
from uopviz.uop.ops import GroupOp, toposort
from uopviz.uop.pattern import graph_rewrite
from uopviz.uop.symbolic import symbolic

i8, i32, idx = dtypes.int8, dtypes.int32, dtypes.index
r = UOp.range(17, 4)
q = UOp.range(34, 3)


def simp(u: UOp) -> UOp:
    return graph_rewrite(u, symbolic)


def values(root: UOp, point: dict[UOp, int]) -> dict[UOp, object]:
    """Every node's value at a point of the leaves."""
    vals: dict[UOp, object] = {}
    for u in toposort([root]):
        vals[u] = point[u] if u in point else exec_alu(u.op, u.dtype, [vals[s] for s in u.src]) \
            if u.op in GroupOp.Elementwise else u.arg.value
    return vals


def points(leaves: list[UOp]) -> list[dict[UOp, int]]:
    return [dict(zip(leaves, p)) for p in itertools.product(*(range(v.vmin, v.vmax + 1) for v in leaves))]


def assert_sound(e: UOp, leaves: list[UOp]) -> None:
    """Every node's interval holds its value at every point, and the simplified graph computes the same values."""
    out = simp(e)
    for p in points(leaves):
        want, got = values(e, p), values(out, p)
        assert got[out] == want[e], (e.render(), out.render(), p)
        for vals in (want, got):
            for u, v in vals.items():
                assert u.vmin <= v <= u.vmax, (u.render(), u.min_max, v, p)


# ---------------------------------------------------------------- the padded reads
def test_a_padded_column_is_inside_its_row():
    left = (r < 1).logical_not().where(r * 2 - 1, 0)  # lane 0 of a 2-wide column split over a left pad
    right = (r < 16).where(r * 2, 0)  # lane 1
    assert left.min_max == (0, 31) and right.min_max == (0, 30)
    assert simp(left % 32) is simp(left) and simp(left // 32).render() == "0"
    row = ((q < 1).logical_not() & (q < 33)).where(q - 1, 0)
    assert row.min_max == (0, 31)
    assert simp((left + row * 32) // 1024).render() == "0"
    assert_sound((left + row * 32) % 1024 + (right + row * 32) // 32, [r, q])


def test_the_false_branch_is_taken_under_the_negation():
    assert (r < 4).where(0, r).min_max == (0, 16) and (r < 4).where(0, r - 4).min_max == (0, 12)
    assert (r * 2 + 1 < 9).where(r, 0).min_max == (0, 3)  # 2r + 1 < 9: r < 4
    assert (r.ne(5)).where(0, r).min_max == (0, 5)  # r == 5 where r != 5 is false
    assert ((r < 2) | (r < 16).logical_not()).where(0, r).min_max == (0, 15)  # not (a or b): both false


def test_a_branch_never_taken_leaves_the_interval():
    e = (r < 0).where(r - 100, 5)
    assert e.min_max == (5, 5) and simp(e).render() == "5"
    both = ((r < 3) & (r < 8).logical_not()).where(r * -7, r)
    assert both.min_max == (0, 16)


def test_a_condition_that_may_wrap_bounds_nothing():
    v = UOp.variable("v", 0, 10)
    w = v.cast(i8) * 16  # wraps in int8 past v = 7
    e = (w + 3 < 100).where(v.cast(i8), 0)
    assert e.min_max == (0, 10)
    assert_sound(e, [v])


def test_several_terms_bound_each_other():
    a, b = UOp.variable("a", 0, 9), UOp.variable("b", 0, 9)
    e = (a + b * 2 < 5).where(a * 10 + b, -1)  # b <= 2, a <= 4
    assert e.min_max == (-1, 42)
    assert_sound(e, [a, b])


# ---------------------------------------------------------------- property tests
@st.composite
def linear(draw, leaves: list[UOp], dt) -> UOp:
    e = UOp.const(dt, draw(st.integers(-6, 6)))
    for v in leaves:
        if draw(st.booleans()):
            e = e + v.cast(dt) * draw(st.sampled_from([-3, -2, -1, 1, 2, 3, 16]))
    return e


@st.composite
def condition(draw, leaves: list[UOp], dt, depth: int = 2) -> UOp:
    kind = draw(st.sampled_from(["lt", "gt", "ne", "not", "and", "or"] if depth else ["lt", "gt", "ne"]))
    if kind in ("not", "and", "or"):
        a = draw(condition(leaves, dt, depth - 1))
        if kind == "not":
            return a.logical_not()
        b = draw(condition(leaves, dt, depth - 1))
        return a & b if kind == "and" else a | b
    e, c = draw(linear(leaves, dt)), draw(st.integers(-8, 20))
    return e < c if kind == "lt" else UOp.const(dt, c) < e if kind == "gt" else e.ne(c)


@st.composite
def branch(draw, leaves: list[UOp], dt, depth: int = 2) -> UOp:
    e = draw(linear(leaves, dt))
    kind = draw(st.sampled_from(["lin", "div", "mod", "max", "neg", "where"] if depth else ["lin"]))
    if kind in ("div", "mod"):
        c = draw(st.sampled_from([-4, 2, 3, 8, 16, 32]))
        return e // c if kind == "div" else e % c
    if kind == "max":
        return e.maximum(draw(branch(leaves, dt, depth - 1)))
    if kind == "neg":
        return -e
    if kind == "where":
        return draw(condition(leaves, dt, 1)).where(draw(branch(leaves, dt, depth - 1)),
                                                    draw(branch(leaves, dt, depth - 1)))
    return e


@st.composite
def selects(draw):
    leaves = [UOp.variable(f"v{i}", lo, lo + draw(st.integers(0, 9)))
              for i, lo in enumerate(draw(st.lists(st.integers(-6, 6), min_size=1, max_size=3)))]
    dt = draw(st.sampled_from([idx, i32, i8]))
    sel = draw(condition(leaves, dt)).where(draw(branch(leaves, dt)), draw(branch(leaves, dt)))
    return draw(st.sampled_from([sel, sel % 8, sel // 4, sel + draw(branch(leaves, dt))])), leaves


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(selects())
def test_random_selects_keep_sound_intervals(case):
    assert_sound(*case)


def test_a_large_branch_keeps_its_own_interval():
    e = r
    for k in range(40):
        e = e + (r + k) % 5  # about 200 nodes over r: past MAX_GUARDED_NODES
    assert (r < 1).where(e, 0).min_max == (0, e.vmax) and (r < 1).where(r + 3, 0).min_max == (0, 3)
