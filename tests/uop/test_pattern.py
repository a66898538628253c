"""UPat matching, PatternMatcher dispatch, graph_rewrite orders, depth, the fixpoint guard and the recorder hook."""

import pytest

from uopviz import Ops, UOp, dtypes
from uopviz.uop.pattern import PatternMatcher, RewriteError, UPat, graph_rewrite, set_recorder

i32, f32 = dtypes.int32, dtypes.float32
x = UOp.variable("x", 0, 9)
y = UOp.variable("y", 0, 9)
c3 = UOp.const(dtypes.index, 3)


def matches(pat: UPat, u: UOp) -> list[dict[str, UOp]]:
    return pat.match(u)


# ---------------------------------------------------------------- UPat
def test_op_sets_and_any_op():
    pat = UPat((Ops.ADD, Ops.MUL))
    assert matches(pat, x + y) and matches(pat, x * y) and not matches(pat, x // y)
    assert matches(UPat(), x // y) == [{}]


def test_dtype_filter():
    a, b = UOp.variable("a", 0, 3).cast(i32), UOp.param(0, (), f32)
    assert matches(UPat(Ops.CAST, dtype=i32), a)
    assert not matches(UPat(dtype=i32), b)
    assert matches(UPat(dtype={i32, f32}), b)


def test_nested_src_tuple_binds_names():
    pat = UPat(Ops.ADD, src=(UPat(Ops.MUL, src=(UPat.var("a"), UPat.cvar("k"))), UPat.var("b")), name="root")
    e = x * 3 + y
    (m,) = matches(pat, e)
    assert m["a"] is x and m["k"].arg.value == 3 and m["b"] is y and m["root"] is e
    assert not matches(pat, y + x * 3)  # a tuple is in order


def test_list_src_tries_every_order():
    pat = UPat(Ops.ADD, src=[UPat.cvar("c"), UPat.var("v")])
    assert matches(pat, x + 3)[0]["v"] is x
    assert matches(pat, UOp(Ops.ADD, (c3, x)))[0]["v"] is x
    both = matches(UPat(Ops.ADD, src=[UPat.var("p"), UPat.var("q")]), x + y)
    assert [(m["p"], m["q"]) for m in both] == [(x, y), (y, x)]


def test_a_repeated_name_must_bind_the_same_node():
    pat = UPat(Ops.ADD, src=(UPat.var("v"), UPat.var("v")))
    assert matches(pat, x + x) and not matches(pat, x + y)


def test_single_upat_src_matches_every_source_any_count():
    pat = UPat(Ops.STACK, src=UPat(Ops.CONST))
    for n in (0, 1, 4):
        assert matches(pat, UOp(Ops.STACK, (c3,) * n))
    assert not matches(pat, UOp(Ops.STACK, (c3, x, c3)))


def test_allow_any_len_matches_a_prefix():
    pat = UPat(Ops.STACK, src=(UPat(Ops.CONST),), allow_any_len=True)
    assert matches(pat, UOp(Ops.STACK, (c3, x, x)))
    assert not matches(pat, UOp(Ops.STACK, (x, c3)))
    assert not matches(UPat(Ops.STACK, src=(UPat(Ops.CONST),)), UOp(Ops.STACK, (c3, x)))


def test_arg_match():
    r = UOp.range(4, 1)
    assert matches(UPat(Ops.RANGE, arg=r.arg), r)
    assert not matches(UPat(Ops.RANGE, arg=UOp.range(4, 2).arg), r)


def test_const_cvar_var():
    assert matches(UPat.const(dtypes.index, 3), c3)
    assert not matches(UPat.const(dtypes.index, 4), c3)
    assert not matches(UPat.const(i32, 3), c3)  # dtype filter
    assert matches(UPat.const(f32, 1), UOp.const(f32, 1.0))  # compared by value
    assert not matches(UPat.const(dtypes.bool, 1), UOp.const(dtypes.bool, True))  # bools only match bools
    assert matches(UPat.cvar("k"), c3)[0]["k"] is c3 and not matches(UPat.cvar(), x)
    assert matches(UPat.var("v", dtypes.index), x)[0]["v"] is x


def test_operator_shorthands_build_commutative_patterns():
    pat = UPat.var("a") + UPat.cvar("k")
    assert matches(pat, x + 3) and matches(pat, UOp(Ops.ADD, (c3, x)))
    assert matches(UPat.var("a") // UPat.cvar("k"), x // 3) and not matches(UPat.var("a") // UPat.cvar("k"), 3 // x)


# ---------------------------------------------------------------- PatternMatcher
def test_dispatch_first_non_none_rule_wins():
    seen: list[str] = []

    def declines(u):
        seen.append("declines")

    pm = PatternMatcher([
        (UPat(Ops.MUL, name="u"), lambda u: c3),
        (UPat(Ops.ADD, name="u"), declines),
        (UPat(name="u"), lambda u: UOp.const(dtypes.index, 7) if u.op is Ops.ADD else None),
        (UPat(Ops.ADD, name="u"), lambda u: c3),
    ])
    assert pm.rewrite(x + y).arg.value == 7 and seen == ["declines"]
    assert pm.rewrite(x // y) is None  # only the any-op rule is tried, and it declines
    assert [r.pat.op for r in pm.pdict[Ops.IDIV]] == [None]


def test_a_result_equal_to_the_input_counts_as_declining():
    pm = PatternMatcher([(UPat(Ops.ADD, name="u"), lambda u: u), (UPat(Ops.ADD), lambda: c3)])
    assert pm.rewrite(x + y) is c3


def test_ctx_is_passed_to_rules_that_ask_for_it():
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda ctx, v: ctx.get(v.arg.name))])
    assert graph_rewrite(x + y, pm, ctx={"x": c3}).render() == "(3+y)"
    with pytest.raises(TypeError, match="`ctx` must be its first parameter"):
        PatternMatcher([(UPat(name="v"), lambda v, ctx: None)])


def test_rules_know_where_they_were_written():
    pm = PatternMatcher([(UPat(Ops.ADD), lambda: c3)])
    assert pm.rules[0].location.startswith("tests/uop/test_pattern.py:")
    assert "lambda: c3" in pm.rules[0].text


def test_matchers_concatenate():
    a = PatternMatcher([(UPat(Ops.ADD), lambda: c3)], name="a")
    b = PatternMatcher([(UPat(Ops.MUL), lambda: c3)])
    assert [r.pat.op for r in (a + b).rules] == [frozenset({Ops.ADD}), frozenset({Ops.MUL})]
    assert (a + b).name == "a"


# ---------------------------------------------------------------- graph_rewrite
def test_default_order_rewrites_sources_first_and_results_again():
    pm = PatternMatcher([
        (UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(None, 0))), lambda a: a),
        (UPat(Ops.MUL, src=(UPat.var("a"), UPat.const(None, 1))), lambda a: a + 0),  # its result is rewritten too
    ])
    assert graph_rewrite((x * 1 + 0) * 1, pm) is x


def test_bottom_up_matches_a_node_before_its_sources():
    one_to_two = (UPat.const(dtypes.index, 1), lambda: UOp.const(dtypes.index, 2))
    sees_one = (UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(dtypes.index, 1))), lambda a: a * 10)
    pm = PatternMatcher([one_to_two, sees_one])
    e = x + 1
    assert graph_rewrite(e, pm).render() == "(x+2)"  # the 1 became 2 before the Add was looked at
    assert graph_rewrite(e, pm, bottom_up=True).render() == "(x*10)"  # the Add saw the original 1


def test_bottom_up_still_reaches_a_fixpoint():
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(None, 0))), lambda a: a)])
    e = (x + 0) + 0
    assert graph_rewrite(e, pm, bottom_up=True) is x


def test_unchanged_graph_is_returned_as_is():
    e = x * 3 + y
    assert graph_rewrite(e, PatternMatcher([(UPat(Ops.CAST), lambda: c3)])) is e


def test_shared_nodes_are_rewritten_once():
    calls: list[UOp] = []

    def count(a):
        calls.append(a)
        return a * 2

    shared = x + 1
    e = UOp.sink(shared * 3, shared * 4, shared)
    out = graph_rewrite(e, PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(None, 1))), count)]))
    assert calls == [x] and out.src[2] is out.src[0].src[0]


@pytest.mark.parametrize("bottom_up", [False, True])
def test_deep_chain_does_not_recurse(bottom_up):
    e = x
    for _ in range(20_000):
        e = e + 1
    pm = PatternMatcher([(UPat(Ops.ADD, name="u"), lambda u: u.replace(op=Ops.XOR))])
    out = graph_rewrite(e, pm, bottom_up=bottom_up)
    n = 0
    while out.op is Ops.XOR:
        out, n = out.src[0], n + 1
    assert out is x and n == 20_000


def test_a_looping_rule_set_raises_naming_the_pass_and_the_rules():
    a, b = UOp.const(dtypes.index, 1), UOp.const(dtypes.index, 2)
    pm = PatternMatcher([(UPat.const(dtypes.index, 1), lambda: b), (UPat.const(dtypes.index, 2), lambda: a)])
    with pytest.raises(RewriteError, match="pass 'ping_pong' did not reach a fixpoint") as e:
        graph_rewrite(x + a, pm, name="ping_pong")
    msg = str(e.value)
    assert "contains it again" in msg
    assert "tests/uop/test_pattern.py:" in msg and "lambda: b" in msg and "lambda: a" in msg


def test_a_growing_rule_set_raises():
    pm = PatternMatcher([(UPat(Ops.CONST, name="c"), lambda c: c.const_like(c.arg.value + 1))], name="grow")
    with pytest.raises(RewriteError, match=r"pass 'grow' .*rewritten 50 times in a row.*c\.arg\.value \+ 1"):
        graph_rewrite(x + 0, pm, max_chain=50)
    with pytest.raises(RewriteError, match="rewritten 1000 times"):
        graph_rewrite(x + 0, pm)


def test_a_rule_that_wraps_its_own_match_raises():
    pm = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: v + 1)])
    with pytest.raises(RewriteError, match="contains it again"):
        graph_rewrite(x * 2, pm)


# ---------------------------------------------------------------- recorder hook
class ListRecorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def begin_pass(self, name, stage, root):
        self.events.append(("begin", name, stage, root))

    def on_match(self, rule, matched, replacement, time_ns):
        assert time_ns >= 0
        self.events.append(("match", rule.location.split(":")[0], matched, replacement))

    def end_pass(self, output, error):
        self.events.append(("end", output, type(error).__name__ if error else None))


def test_recorder_sees_passes_and_matches():
    rec = ListRecorder()
    pm = PatternMatcher([(UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(None, 0))), lambda a: a)], name="drop_zero")
    prev = set_recorder(rec)
    try:
        e = x + 0
        graph_rewrite(e, pm, stage="Test")
        with pytest.raises(RewriteError):
            graph_rewrite(x, PatternMatcher([(UPat(Ops.DEFINE_VAR, name="v"), lambda v: v * 1)]), name="bad")
    finally:
        assert set_recorder(prev) is rec
    assert rec.events[:3] == [("begin", "drop_zero", "Test", e), ("match", "tests/uop/test_pattern.py", e, x),
                              ("end", x, None)]
    assert rec.events[3][:2] == ("begin", "bad") and rec.events[-1] == ("end", None, "RewriteError")
