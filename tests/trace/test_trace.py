"""The rewrite recorder: structure of a recorded trace, the JSON document, content ids and replay."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import uopviz.trace as trace
from uopviz.dtype import dtypes
from uopviz.trace import Trace, TraceFormatError, context, node_id, node_ids, stage
from uopviz.trace.serialize import decode, encode
from uopviz.uop import pattern
from uopviz.uop.ops import AddrSpace, AxisType, BufferArg, ConstArg, Ops, ReduceArg, UOp, toposort
from uopviz.uop.pattern import PatternMatcher, UPat, graph_rewrite

REPO = Path(__file__).resolve().parents[2]


def idx(v: int) -> UOp:
    return UOp.const(dtypes.index, v)


def fold(a: UOp, b: UOp) -> UOp:
    return UOp.const(a.dtype, a.value + b.value)


# x+0 -> x, x*1 -> x, c1+c2 -> c, x*2 -> x+x: small rules that chain (the real simplifier is uopviz.uop.symbolic)
inner = PatternMatcher([
    (UPat.var("x") + UPat.const(None, 0), lambda x: x),
    (UPat.var("x") * UPat.const(None, 1), lambda x: x),
])
algebra = inner + PatternMatcher([
    (UPat.cvar("a") + UPat.cvar("b"), fold),
    (UPat.var("x") * UPat.const(None, 2), lambda x: x + x),
])
# Contiguous(x) -> x simplified by a nested, separately named pass
outer = PatternMatcher([
    (UPat(Ops.CONTIGUOUS, src=(UPat.var("x"),)), lambda x: graph_rewrite(x, inner, name="inner")),
    (UPat.cvar("a") + UPat.cvar("b"), fold),
])


def record_two_passes() -> Trace:
    a, b = UOp.variable("a", 0, 10), UOp.variable("b", 1, 8)
    g1 = UOp(Ops.CONTIGUOUS, ((a * 1) + 0,)) + (idx(3) + 4)
    g2 = ((b * 2) * 1 + 0) % 5 + (idx(1) + 2) * 2
    with trace() as tr:
        with stage("Simplify"):
            graph_rewrite(g1, outer, name="outer")
        with context("k0"):
            graph_rewrite(g2, algebra, name="algebra", stage="Explicit")
    return tr


def test_passes_nesting_contexts_and_stages() -> None:
    tr = record_two_passes()
    assert [(c.name, c.kind) for c in tr.contexts] == [("main", "main"), ("k0", "kernel")]
    main, k0 = tr.contexts
    assert [(p.name, p.stage, p.depth, p.parent) for p in main.passes] == [
        ("outer", "Simplify", 0, None), ("inner", "Simplify", 1, 0)]
    assert [(p.name, p.stage, p.depth, p.parent) for p in k0.passes] == [("algebra", "Explicit", 0, None)]
    outer_pass, inner_pass = main.passes
    a = UOp.variable("a", 0, 10)
    assert tr.uop(outer_pass.output) is a + 7
    assert tr.uop(inner_pass.input) is (a * 1) + 0 and tr.uop(inner_pass.output) is a
    assert len(inner_pass.steps) == 2 and len(outer_pass.steps) == 2
    assert all(p.error is None and p.time_ns > 0 for p in tr.passes)
    # the step that ran the nested pass is the outer pass's, and points at its rule's source
    contig = next(s for s in outer_pass.steps if tr.node(s.match)["op"] == "Contiguous")
    rule = tr.rules[contig.rule]
    assert rule.location.startswith("tests/trace/test_trace.py:") and "graph_rewrite" in rule.text
    assert tr.uop(contig.replacement) is a
    # every rule is stored once, whichever pass used it
    assert len({(r.location, r.text) for r in tr.rules}) == len(tr.rules)


def test_document_round_trips(tmp_path: Path) -> None:
    tr = record_two_passes()
    doc = tr.to_dict()
    assert doc["format"] == "uopviz-trace" and doc["version"] == 1
    loaded = Trace.from_json(tr.to_json())
    assert loaded.to_dict() == doc
    path = tmp_path / "t.uopviz-trace.json"
    tr.save(path)
    again = trace.load(path)
    assert again.to_dict() == doc
    assert json.loads(path.read_text()) == doc
    # a loaded trace rebuilds the very UOps that were recorded (hash-consing)
    for p_live, p_loaded in zip(tr.passes, again.passes, strict=True):
        assert again.uop(p_loaded.output) is tr.uop(p_live.output)
    assert again.nodes_of(again.passes[0].output) == tr.nodes_of(tr.passes[0].output)


def test_every_node_stored_once_with_sources() -> None:
    tr = record_two_passes()
    nodes = tr.nodes
    for nid, e in nodes.items():
        assert all(s in nodes for s in e["src"])
        assert node_id(tr.uop(nid)) == nid
    added = [a for p in tr.passes for s in p.steps for a in s.added]
    assert len(added) == len(set(added))


GRAPH_CODE = """
from uopviz.dtype import dtypes
from uopviz.uop.ops import UOp, Ops, AxisType, AddrSpace
r = UOp.range(16, 0, AxisType.GLOBAL)
v = UOp.variable("n", 1, 64)
buf = UOp.buffer(64, dtypes.float32, "CPU", AddrSpace.GLOBAL)
p = UOp.param(1, (v, 4), dtypes.float16)
x = (r * 4 + v) % 7 + UOp.const(dtypes.float32, 0.5).cast(dtypes.int32).cast(dtypes.index)
g = UOp.sink(buf.index(x), p, UOp.const(dtypes.float32, float("nan")), UOp(Ops.RESHAPE, (p,), None, "tagged"))
"""


def test_ids_are_equal_across_processes() -> None:
    scope: dict = {}
    exec(GRAPH_CODE, scope)
    here = [node_ids([scope["g"]])[u] for u in toposort([scope["g"]])]
    code = GRAPH_CODE + "from uopviz.uop.ops import toposort\nfrom uopviz.trace import node_ids\n" \
        "m = node_ids([g])\nprint(' '.join(m[u] for u in toposort([g])))"
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == here
    assert len(set(here)) == len(here) and all(len(i) == 16 for i in here)


def balanced_sum(leaves: list[UOp]) -> UOp:
    while len(leaves) > 1:
        leaves = [leaves[i] + leaves[i + 1] if i + 1 < len(leaves) else leaves[i] for i in range(0, len(leaves), 2)]
    return leaves[0]


@pytest.mark.parametrize("n_leaves", [10, 1000])
def test_step_costs_its_change_not_the_graph(n_leaves: int) -> None:
    v = [UOp.variable(f"v{i}", 0, 9) for i in range(n_leaves)]
    g = balanced_sum([v[0] * 2, *v[1:]])
    with trace() as tr:
        graph_rewrite(g, algebra, name="one leaf")
    (p,) = tr.passes
    assert len(tr.nodes_of(p.input)) >= 2 * n_leaves - 1
    (step,) = p.steps
    step_doc = {k: v for k, v in step.to_dict().items() if k != "time_ns"}
    size = len(json.dumps(step_doc)) + sum(len(json.dumps(tr.node(a))) for a in step.added)
    assert len(step.added) == 1 and tr.uop(step.added[0]) is v[0] + v[0]
    assert size == STEP_SIZE.setdefault("size", size)


STEP_SIZE: dict[str, int] = {}


def test_graph_at_replays_to_the_output(tmp_path: Path) -> None:
    a, b = UOp.variable("a", 0, 10), UOp.variable("b", 0, 10)
    g = ((a * 2) * 1 + (idx(2) + 3) * (b + 0)) * 2 + (idx(1) + 1) * 1
    with trace() as tr:
        out = graph_rewrite(g, algebra, name="algebra")
    (p,) = tr.passes
    assert len(p.steps) >= 6
    assert p.graph_at(0) == p.input
    assert p.graph_at(len(p.steps)) == p.output == node_id(out)
    tr.save(tmp_path / "t.json")
    ltr = trace.load(tmp_path / "t.json")
    (loaded,) = ltr.passes
    roots = [loaded.graph_at(k) for k in range(len(loaded.steps) + 1)]
    assert roots[-1] == p.output and len(set(roots)) == len(roots)  # every step changed the graph
    for k, s in enumerate(loaded.steps):  # each match is in the graph it rewrote, its replacement in the next
        assert s.match in ltr.nodes_of(roots[k]) and s.replacement in ltr.nodes_of(roots[k + 1])
    with pytest.raises(IndexError):
        p.graph_at(len(p.steps) + 1)


def test_a_failing_pass_is_recorded_and_recording_stops() -> None:
    def boom(x: UOp) -> UOp:
        raise RuntimeError("rule failed")

    bad = PatternMatcher([(UPat(Ops.DEFINE_VAR, name="x"), boom)])
    with pytest.raises(RuntimeError), trace() as tr:
        graph_rewrite(UOp.variable("a", 0, 3) + 1, bad, name="bad")
    assert pattern._recorder is None
    (p,) = tr.passes
    assert p.output is None and p.error == "RuntimeError: rule failed" and p.steps == []


def test_recording_off_after_the_block_and_nesting_restores() -> None:
    """A trace inside another records into both (a script's own `with uopviz.trace()` under `uopviz serve`, which
    records the script, left the server's trace empty); after the inner block the outer goes on alone."""
    assert pattern._recorder is None
    g = UOp.variable("a", 0, 3) + 0
    with trace() as outer_tr:
        outer_rec = pattern._recorder
        with trace() as inner_tr:
            graph_rewrite(g, algebra, name="in inner")
        assert pattern._recorder is outer_rec
        graph_rewrite(g, algebra, name="in outer")
    assert pattern._recorder is None
    graph_rewrite(g, algebra, name="not recorded")
    assert [p.name for p in inner_tr.passes] == ["in inner"]
    assert [p.name for p in outer_tr.passes] == ["in inner", "in outer"]


def test_trace_is_a_module_and_a_context_manager() -> None:
    import uopviz
    assert isinstance(uopviz.trace, types.ModuleType) and callable(uopviz.trace)
    assert uopviz.trace.load is trace.load
    with uopviz.trace() as tr:
        pass
    assert isinstance(tr, Trace) and tr.contexts == []


ARGS = [
    None, 3, -7, True, "name", (1, 2, (3,)), 0.5, -0.0, math.inf, -math.inf, dtypes.bfloat16, Ops.ADD,
    AxisType.UPCAST, AddrSpace.LOCAL, b"\x00\xffbin", BufferArg(16, dtypes.float32, ("CPU", "CPU:1"), AddrSpace.REG),
    ReduceArg(Ops.MAX, (0, 2)), ConstArg(1.0, dtypes.float32),
]


@pytest.mark.parametrize("arg", ARGS, ids=repr)
def test_args_round_trip_through_json(arg: object) -> None:
    back = decode(json.loads(json.dumps(encode(arg), allow_nan=False)))
    assert back == arg and type(back) is type(arg)


def test_consts_that_differ_only_in_type_get_distinct_ids() -> None:
    f = dtypes.float32
    consts = [UOp(Ops.CONST, (), ConstArg(v, f)) for v in (1, 1.0, True, 0.0, -0.0, math.nan)]
    ids = [node_id(c) for c in consts]
    assert len(set(ids)) == len(ids)
    valid = [c for c in consts if type(c.arg.value) is float]
    with trace() as tr:
        graph_rewrite(UOp.sink(*valid), algebra, name="consts")
    loaded = Trace.from_json(tr.to_json())
    assert [loaded.uop(node_id(c)) for c in valid] == valid


def test_a_trace_with_an_invalid_arg_is_refused_at_load() -> None:
    """A file is data: an arg that breaks the spec's arg rules (here an int in a float32 Const) is named at load,
    not met later by a pass or a renderer."""
    with trace() as tr:
        graph_rewrite(UOp.sink(UOp(Ops.CONST, (), ConstArg(1, dtypes.float32))), algebra, name="consts")
    with pytest.raises(TraceFormatError, match=r"\.arg: not a valid Const arg: value 1 is int, but float32 holds"):
        Trace.from_json(tr.to_json())


def test_symbolic_shape_refers_to_a_node() -> None:
    n = UOp.variable("n", 1, 32)
    p = UOp.param(0, (n, 4))
    bad = p.permute((0,))  # a permutation of the wrong rank: no shape, but still recorded
    with trace() as tr:
        graph_rewrite(UOp.sink(p, bad), algebra, name="shape")
    assert tr.node(node_id(p))["shape"] == [node_id(n), 4]
    assert tr.node(node_id(bad))["shape"] is None


def test_deep_graphs_need_no_recursion() -> None:
    x = UOp.variable("x", 0, 1)
    for i in range(20000):
        x = x + i % 3
    assert len(node_id(x)) == 16
    with trace() as tr:
        graph_rewrite(x, inner, name="deep")
    assert len(Trace.from_json(tr.to_json()).nodes) == len(tr.nodes)


def doc() -> dict:
    return record_two_passes().to_dict()


def inplace(edit: Callable[[dict], Any]) -> Callable[[dict], dict]:
    """A mutation that edits the document in place, as one that returns it."""
    return lambda d: (edit(d), d)[1]


def first_node(d: dict) -> dict:
    return next(e for e in d["nodes"].values() if e["src"])


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: "not json {", "not a uopviz trace: invalid JSON"),
    (lambda d: [1, 2], "not a uopviz trace: expected a JSON object, got array"),
    (lambda d: {**d, "format": "chrome-trace"}, "'format' is 'chrome-trace', expected 'uopviz-trace'"),
    (lambda d: {k: v for k, v in d.items() if k != "format"}, "'format' is missing"),
    (lambda d: {**d, "version": 7}, "trace version 7 is newer than this uopviz supports (1); upgrade uopviz"),
    (lambda d: {**d, "version": "1"}, "trace.version: expected integer, got string"),
    (lambda d: {k: v for k, v in d.items() if k != "nodes"}, "trace: missing field 'nodes'"),
    (inplace(lambda d: first_node(d).update(src=["0123456789abcdef"])), "is not in the node table"),
    (inplace(lambda d: first_node(d).update(op="Frobnicate")), "unknown op 'Frobnicate'"),
    (inplace(lambda d: first_node(d).update(dtype="float7")), "unknown dtype 'float7'"),
    (inplace(lambda d: first_node(d).pop("tag")), "missing field 'tag'"),
    (inplace(lambda d: d["contexts"][0]["passes"][0].pop("steps")), "contexts[0].passes[0]: missing field 'steps'"),
    (inplace(lambda d: d["contexts"][0]["passes"][0]["steps"][0].update(rule=99)), "99 is not an index into 'rules'"),
    (inplace(lambda d: d["contexts"][0]["passes"][0]["steps"][0].update(match="feed")),
     "contexts[0].passes[0].steps[0].match: node id 'feed' is not in the node table"),
    (inplace(lambda d: d["contexts"][0]["passes"][1].update(parent=5)), "parent: 5 is not an earlier pass"),
])
def test_malformed_or_newer_files_are_rejected(tmp_path: Path, mutate: Callable[[dict], Any], message: str) -> None:
    bad = mutate(doc())
    path = tmp_path / "bad.json"
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    with pytest.raises(TraceFormatError) as err:
        trace.load(path)
    assert message in str(err.value)
    assert isinstance(err.value, ValueError)


def test_unrebuildable_arg_is_a_clear_error() -> None:
    d = doc()
    first_node(d)["arg"] = {"repr": "some.Type: <opaque>"}
    tr = Trace.from_dict(d)
    nid = next(i for i, e in tr.nodes.items() if e["arg"] == {"repr": "some.Type: <opaque>"})
    with pytest.raises(TraceFormatError, match="cannot be rebuilt"):
        tr.uop(nid)


def test_kernel_contexts_keep_their_opts_and_older_files_have_none() -> None:
    from uopviz.codegen.opt import Opt, OptOps
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.tensor import Tensor
    out = Tensor.empty(6, 8) * 2
    ((ast, _),) = kernels_of(schedule([out.uop]))
    opts = [Opt(OptOps.SPLIT, 1, (4, AxisType.UPCAST, False)), Opt(OptOps.SPLIT, 0, (2, AxisType.UPCAST, False))]
    with trace() as tr:
        compile_kernel(ast, "CPU", opts)
    doc = tr.to_dict()
    (kernel,) = [c for c in doc["contexts"] if c["kind"] == "kernel"]
    assert kernel["opts"] == [o.to_json() for o in opts]
    assert Trace.from_dict(doc).contexts[-1].opts == kernel["opts"]
    del kernel["opts"]  # written before uopviz 0.2
    assert Trace.from_dict(doc).contexts[-1].opts == []
    kernel["opts"] = {"op": "SPLIT"}
    with pytest.raises(TraceFormatError, match=r"contexts\[\d\]\.opts: expected array"):
        Trace.from_dict(doc)


def test_replay_rewrites_a_node_an_earlier_step_rewrote_when_a_result_brings_it_back() -> None:
    """The rewriter maps a node it has rewritten to its rewrite wherever a later rule's result holds it again, with
    no step of its own; replay does the same, so each step's match is in the graph it replays and the last graph is
    the pass's output."""
    a = UOp.variable("a", 0, 10)
    m = a * 1
    pm = PatternMatcher([(UPat.var("x") * UPat.const(None, 1), lambda x: x),
                         (UPat(Ops.MAX, src=(UPat.var("x"), UPat.cvar("c"))), lambda x, c: (x * 1) + c)])
    with trace() as tr:
        out = graph_rewrite(UOp(Ops.SINK, (m, a.maximum(idx(3)))), pm, name="memo")
    (p,) = tr.passes
    assert [tr.node(s.match)["op"] for s in p.steps] == ["Mul", "Max"]
    assert p.graph_at(2) == p.output == node_id(out) == node_id(UOp(Ops.SINK, (a, a + 3)))
    assert p.renamed(2) == {p.steps[1].match: node_id(a + 3), p.graph_at(1): p.graph_at(2)}


def test_replay_of_the_zoo_ends_at_every_recorded_output() -> None:
    from uopviz.backend.recording import record_zoo
    tr = record_zoo("conv2d", small=True)
    for p in tr.passes:
        if p.output is not None:
            assert p.graph_at(len(p.steps)) == p.output, p.name


def test_a_context_keeps_the_frames_of_the_code_that_made_it() -> None:
    with trace() as tr, context("k1"):
        graph_rewrite(idx(1) + 0, inner, name="simplify")  # the frame of this line is kept
    (c,) = tr.contexts
    assert Path(c.stack[-1]["file"]).resolve() == Path(__file__).resolve()
    assert c.stack[-1]["function"] == "test_a_context_keeps_the_frames_of_the_code_that_made_it"
    assert c.stack[-1]["code"].startswith("with trace() as tr, context(")
    assert not any(Path(f["file"]).resolve().is_relative_to(REPO / "uopviz") for f in c.stack)  # uopviz's own
    doc = tr.to_dict()
    assert Trace.from_dict(doc).contexts[0].stack == c.stack
    doc["contexts"][0]["stack"][0]["line"] = "7"
    with pytest.raises(TraceFormatError, match=r"contexts\[0\]\.stack\[0\]\.line: expected integer"):
        Trace.from_dict(doc)
    del doc["contexts"][0]["stack"]  # older traces have none
    assert Trace.from_dict(doc).contexts[0].stack == []

