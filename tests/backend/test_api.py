"""The JSON API over recorded traces, checked against the trace itself (replay, node table, rules), against an
independent lowering of the same kernel, and against SPEC's AxisType and op-group tables."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from devices_here import needs_cl
from fastapi.testclient import TestClient
from uopviz.backend import recording, views
from uopviz.backend import store as store_module
from uopviz.backend.store import TraceStore
from uopviz.kernels import get

import uopviz
from uopviz.codegen.opt import Opt, OptOps
from uopviz.target import Kernel
from uopviz.tensor import Tensor
from uopviz.trace import TracePass
from uopviz.uop.ops import AxisType, GroupOp, Ops

GEMM_KERNEL = "r_t8_L128_L4_R1024_u8_u2_u16"  # the zoo gemm with the heuristic's opts (a tests' cache has no tunings)
PACK_KERNEL = "E_t8_L8_L1024_u16"  # before it, the copy of B into panels (its rows alias: uopviz/schedule/pack.py)


def gemm_context(store: TraceStore) -> int:
    """The index of the zoo gemm's matmul kernel among its trace's contexts, found by its name."""
    return [c.name for c in store.get("gemm").trace.contexts].index(GEMM_KERNEL)


def default_kernels(name: str, device: str = "CPU") -> list[Kernel]:
    """A small zoo program's kernels as realize() compiles them, with their default opts."""
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.search.policy import default_opts
    z = get(name)
    out, _ = z.build(z.sizes(small=True), device)
    return [compile_kernel(ast, device, default_opts(ast, device))[0] for ast, _ in kernels_of(schedule([out.uop]))]


@pytest.fixture(scope="module")
def gemm(store: TraceStore) -> int:
    return gemm_context(store)


def steps_url(tid: str, ci: int, pi: int, k: int) -> str:
    return f"/api/traces/{tid}/contexts/{ci}/passes/{pi}/steps/{k}"


@pytest.fixture
def fresh(missing_dist: Path, tmp_path: Path, make_client: Callable[..., TestClient]) -> TestClient:
    """A client over an empty store, for tests that add traces: files and scripts under tmp_path are allowed."""
    return make_client(TraceStore("CPU"), dist=missing_dist, allow_dirs=[tmp_path.resolve()])


def test_meta_spells_the_axis_types_and_op_groups_of_spec(client: TestClient) -> None:
    m = client.get("/api/meta").json()
    assert [a["letter"] for a in m["axis_types"]] == list("gtlwLGRur")
    assert all(a["color"] == AxisType[a["name"]].colour for a in m["axis_types"])
    assert [g["name"] for g in m["op_groups"]] == list(GroupOp.Colour)
    for g in m["op_groups"]:
        assert g["color"] == GroupOp.Colour[g["name"]]
        assert g["ops"] and all(GroupOp.group_of(Ops(o)) == g["name"] for o in g["ops"])
    assert "Reshape" in next(g["ops"] for g in m["op_groups"] if g["name"] == "Movement")
    assert {"CPU", "PYTHON"} <= set(m["devices"]) and m["default_device"] == "CPU"
    assert m["version"] == uopviz.__version__


def test_meta_describes_the_opts_once_and_which_each_device_takes(client: TestClient) -> None:
    """The UI's opt form is built from these (no OptOp is spelled in the JS): a split per AxisType a split makes,
    then PADTO, SWAP, NOLOCALS; the CPU, which has no work-groups, is offered no LOCAL, GROUP_REDUCE or NOLOCALS."""
    from uopviz.codegen.opt.scheduler import SPLIT_FROM
    m = client.get("/api/meta").json()
    splits = [c for c in m["opts"] if c["op"] == "SPLIT"]
    assert {c["split_to"] for c in splits} == {t.name for t in SPLIT_FROM} and splits[0]["label"] == "UPCAST"
    assert all(c["axis"] and c["amount"] == "factor" and c["top"] for c in splits)
    others = {c["op"]: c for c in m["opts"] if c["op"] != "SPLIT"}
    assert set(others) == {"PADTO", "SWAP", "NOLOCALS"}
    assert others["PADTO"]["amount"] == "multiple" and others["SWAP"]["other_axis"]
    assert not others["NOLOCALS"]["axis"] and others["NOLOCALS"]["amount"] is None
    assert set(m["device_opts"]) == set(m["devices"])
    cpu = m["device_opts"]["CPU"]
    assert "UPCAST" in cpu and "THREAD" in cpu and not {"LOCAL", "GROUP_REDUCE", "NOLOCALS"} & set(cpu)
    assert {"LOCAL", "GROUP_REDUCE"} <= set(m["device_opts"]["PYTHON"])  # the interpreter runs work-groups


def test_trace_list_and_detail_follow_the_recorded_trace(client: TestClient, store: TraceStore, gemm: int) -> None:
    listed = {t["id"]: t for t in client.get("/api/traces").json()}
    assert listed["gemm"] == {"id": "gemm", "name": "gemm", "source": "zoo", "contexts": 3, "origin": None}
    assert listed["softmax-small"]["contexts"] == len(store.get("softmax-small").trace.contexts)
    assert listed["broken"]["source"] == "file"

    d = client.get("/api/traces/gemm").json()
    tr = store.get("gemm").trace
    assert d["device"] == "CPU" and [c["name"] for c in d["contexts"]] == ["schedule", PACK_KERNEL, GEMM_KERNEL]
    assert d["contexts"][0]["axes"] == []
    kinds = [(AxisType.THREAD, "t", 8), (AxisType.LOOP, "L", 128), (AxisType.LOOP, "L", 4),
             (AxisType.REDUCE, "R", 1024), (AxisType.UPCAST, "u", 8), (AxisType.UPCAST, "u", 2),
             (AxisType.UPCAST, "u", 16)]
    assert d["contexts"][gemm]["axes"] == [{"letter": letter, "size": n, "type": t.name, "color": t.colour}
                                        for t, letter, n in kinds]
    for c, tc in zip(d["contexts"], tr.contexts, strict=True):
        assert [(p["name"], p["stage"], p["steps"], p["parent"], p["time_ns"]) for p in c["passes"]] == \
            [(p.name, p.stage, len(p.steps), p.parent, p.time_ns) for p in tc.passes]
        assert c["label"] == c["name"] and c["time_ns"] == sum(p.time_ns for p in tc.passes if p.depth == 0)
        for p, tp in zip(c["passes"], tc.passes, strict=True):
            assert sum(r["matches"] for r in p["rules"]) == len(tp.steps)
            assert sum(r["time_ns"] for r in p["rules"]) == sum(s.time_ns for s in tp.steps)
            assert "folded" not in p  # the outline replays no pass: a step says its pass's folded steps
    assert d["origin"] is None and d["output"] is None


def test_the_outline_replays_no_pass(client: TestClient, store: TraceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: a trace's outline answers from stored nodes alone; replaying every pass for its folded steps made a
    GPT step's trace take 6-33 s to open. A step answers its pass's folded steps instead."""
    def refuse(self: TracePass, k: int) -> str:
        raise AssertionError(f"the outline replayed pass {self.name}")

    with monkeypatch.context() as m:
        m.setattr(TracePass, "graph_at", refuse)
        assert client.get("/api/traces/softmax-small").status_code == 200
    ci, pi, p = next((ci, pi, p) for ci, c in enumerate(store.get("gemm").trace.contexts)
                     for pi, p in enumerate(c.passes) if p.folded())
    assert client.get(steps_url("gemm", ci, pi, 0)).json()["folded"] == p.folded()


def test_opt_passes_say_which_opt_they_applied_and_how_the_axes_changed(client: TestClient, gemm: int) -> None:
    """Issue 17: an opt step shows the opt and the axes before and after it, not the apply_opt source."""
    kernel = client.get("/api/traces/gemm").json()["contexts"][gemm]
    steps = [p["opt"] for p in kernel["passes"] if p["opt"] is not None]
    assert [s["opt"] for s in steps] == kernel["opts"] and len(steps) == 6
    assert [s["text"] for s in steps] == [
        "SPLIT a1 (L1024) → L64 × u16", "SPLIT a1 (L64) → L32 × u2", "SPLIT a0 (L1024) → L128 × u8",
        "SWAP a0 ↔ a1: L128 L32 R1024 u8 u2 u16 → L32 L128 R1024 u8 u2 u16", "SPLIT a0 (L32) → t8 × L4",
        "SWAP a1 ↔ a2: t8 L4 L128 R1024 u8 u2 u16 → t8 L128 L4 R1024 u8 u2 u16"]  # B packed: rows back outside
    assert ["".join(f"{a['letter']}{a['size']}" for a in s["after"]) for s in steps][-1] == "t8L128L4R1024u8u2u16"
    assert steps[1]["before"] == steps[0]["after"]


def test_opt_text_names_what_padto_and_swap_did() -> None:
    from uopviz.backend.models import OptSpec
    ax = views.kernel_axes
    assert views.opt_text(OptSpec(op="PADTO", axis=0, arg=16), ax("r_L15_R4"), ax("r_L16_R4")) == \
        "PADTO a0 to 16 (L15) → L16"
    assert views.opt_text(OptSpec(op="SWAP", axis=0, arg=1), ax("r_L4_L8"), ax("r_L8_L4")) == \
        "SWAP a0 ↔ a1: L4 L8 → L8 L4"
    assert views.opt_text(OptSpec(op="NOLOCALS"), ax("r_L4"), ax("r_L4")) == "NOLOCALS: the axes are unchanged"


def test_kernels_of_one_name_get_a_distinguishing_label(tmp_path: Path) -> None:
    x = Tensor(np.arange(6 * 33, dtype=np.float32).reshape(6, 33))
    with uopviz.trace() as tr:
        x.sum(1).realize(x.max(1))  # two reductions of one shape: two kernels of one name
    tr.save(tmp_path / "twins.uopviz-trace.json")
    st = TraceStore("CPU").load_file(tmp_path / "twins.uopviz-trace.json")
    labels = [c.label for c in views.detail(st).contexts]
    twice = [lb for lb in labels if lb.endswith((" #1", " #2"))]
    assert len(twice) == 2 and twice[0].removesuffix(" #1") == twice[1].removesuffix(" #2")
    assert len(set(labels)) == len(labels)


def test_kernel_names_parse_into_coloured_axes() -> None:
    axes = views.kernel_axes("r_g5_t3_l2_w4_L7_G2_R9_u4_r2_Lv")
    assert "".join(a.letter for a in axes) == "gtlwLGRurL"
    assert [a.size for a in axes] == [5, 3, 2, 4, 7, 2, 9, 4, 2, "v"]
    assert all(a.color == AxisType[a.type].colour for a in axes)
    assert views.kernel_axes("E_L3_L4")[1].size == 4
    assert views.kernel_axes("schedule") == views.kernel_axes("r_X3") == views.kernel_axes("r_L") == []
    assert views.kernel_axes("r_L²") == views.kernel_axes("r_L-1") == []


def test_every_step_is_the_replayed_graph_and_its_difference(client: TestClient, store: TraceStore) -> None:
    tr = store.get("softmax-small").trace
    for ci, c in enumerate(tr.contexts):
        for pi, p in enumerate(c.passes):
            prev: set[str] = set()
            for k in range(len(p.steps) + 1):
                v = client.get(steps_url("softmax-small", ci, pi, k)).json()
                ids = [n["id"] for n in v["nodes"]]
                assert v["root"] == p.graph_at(k) and v["steps"] == len(p.steps)
                assert v["folded"] == [j for j in range(1, len(p.steps) + 1) if p.graph_at(j) == p.graph_at(j - 1)]
                assert set(ids) == tr.nodes_of(v["root"]) and len(ids) == len(set(ids))
                pos = {nid: i for i, nid in enumerate(ids)}
                assert all(pos[s] < pos[n["id"]] for n in v["nodes"] for s in n["src"])  # sources first
                if k == 0:
                    assert (v["added"], v["removed"], v["rebuilt"], v["rule"], v["match"], v["changes"]) == \
                        ([], [], [], None, None, [])
                else:
                    step = p.steps[k - 1]
                    old, new = {o for o, _ in v["rebuilt"]}, {n for _, n in v["rebuilt"]}
                    # every node that came is added or a rebuilt ancestor; every node that left removed or rebuilt
                    assert set(v["added"]) | new == set(ids) - prev and not set(v["added"]) & new
                    assert set(v["removed"]) | old == prev - set(ids) and not set(v["removed"]) & old
                    assert all(tr.node(o)["op"] == tr.node(n)["op"] for o, n in v["rebuilt"])
                    assert v["rule"] == {"location": tr.rules[step.rule].location, "text": tr.rules[step.rule].text,
                                         "time_ns": step.time_ns}
                    assert (v["match"], v["replacement"]) == (step.match, step.replacement)
                    assert (v["changes"] == []) == (v["root"] == p.graph_at(k - 1))  # a folded step changes nothing
                prev = set(ids)
            if p.output is not None:
                assert v["root"] == p.output


def test_nodes_carry_display_fields_and_range_nodes_their_axis_type_colour(client: TestClient, store: TraceStore,
                                                                          gemm: int) -> None:
    tr = store.get("gemm").trace
    pi = next(i for i, p in enumerate(tr.contexts[gemm].passes) if p.name == "rangeify")
    nodes = client.get(steps_url("gemm", gemm, pi, len(tr.contexts[gemm].passes[pi].steps))).json()["nodes"]
    ranges = [n for n in nodes if n["op"] == "Range"]
    assert {n["axis_type"] for n in ranges} == {"LOOP", "REDUCE"}
    assert all(n["color"] == AxisType[n["axis_type"]].colour for n in ranges)
    for n in nodes:
        e = tr.node(n["id"])
        assert (n["op"], n["dtype"], n["src"], n["shape"]) == (e["op"], e["dtype"], e["src"], e["shape"])
        if n["op"] != "Range":
            assert n["axis_type"] is None
            assert n["group"] == (None if GroupOp.group_of(Ops(n["op"])) == "Other" else GroupOp.group_of(Ops(n["op"])))
            assert n["color"] == (GroupOp.Colour[n["group"]] if n["group"] else "#9E9E9E")
    consts = {n["arg"] for n in nodes if n["op"] == "Const"}
    assert "1024" in consts
    assert {n["arg"] for n in ranges} == {"r0 LOOP", "r1 LOOP", "r2 REDUCE"}


def test_a_step_diff_is_keyed_by_node_identity(client: TestClient, store: TraceStore, gemm: int) -> None:
    """Issue 17: an operand swap in one Add is one changed node, its rebuilt ancestors marked as rebuilt (not the
    whole kernel removed and added again)."""
    tr = store.get("gemm").trace
    c = tr.contexts[gemm]
    swaps = [(pi, k) for pi, p in enumerate(c.passes) for k, s in enumerate(p.steps, 1)
             if tr.node(s.match)["op"] == "Add" and tr.node(s.match)["src"] == tr.node(s.replacement)["src"][::-1]]
    assert swaps
    for pi, k in swaps:
        v = client.get(steps_url("gemm", gemm, pi, k)).json()
        (swap,) = [ch for ch in v["changes"] if ch["kind"] != "rebuilt"]
        assert (swap["kind"], swap["before"], swap["id"]) == ("changed", v["match"], v["replacement"])
        before, after = (text.partition(" (")[2].rstrip(")").split(", ") for text in (swap["before_text"],
                                                                                        swap["text"]))
        assert before == after[::-1]
        assert v["added"] == [v["replacement"]] and v["removed"] == [v["match"]]
        rebuilt = [ch for ch in v["changes"] if ch["kind"] == "rebuilt"]
        assert len(rebuilt) == len(v["rebuilt"]) > 0 and v["changed"] == 1 + len(rebuilt)


def test_a_rule_that_removes_a_node_lists_it_and_nothing_added(client: TestClient, store: TraceStore) -> None:
    tr = store.get("softmax-small").trace
    for ci, c in enumerate(tr.contexts):
        for pi, p in enumerate(c.passes):
            for k, s in enumerate(p.steps, 1):
                if s.replacement in tr.nodes_of(s.match) and p.graph_at(k) != p.graph_at(k - 1):  # x + 0 -> x
                    v = client.get(steps_url("softmax-small", ci, pi, k)).json()
                    kinds = {ch["kind"] for ch in v["changes"]}
                    assert "removed" in kinds and "added" not in kinds and "changed" not in kinds, v["changes"]
                    assert v["match"] in v["removed"]
                    return
    raise AssertionError("no step of softmax replaces a node by one of its sources")


def test_every_step_of_the_zoo_gemm_fits_the_transfer_budget(client: TestClient, store: TraceStore) -> None:
    """Issue 5: opening any step of the zoo's gemm kernel transfers at most 200 KB (measured uncompressed)."""
    tr, sizes = store.get("gemm").trace, []
    for ci, c in enumerate(tr.contexts):
        for pi, p in enumerate(c.passes):
            for k in range(len(p.steps) + 1):
                r = client.get(steps_url("gemm", ci, pi, k))
                assert r.status_code == 200
                sizes.append(len(r.content))
    assert max(sizes) <= 200_000, max(sizes)
    r = client.get(steps_url("gemm", 1, 0, 0), headers={"Accept-Encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip"


def test_kernel_view_is_the_kernel_the_pipeline_renders(client: TestClient, store: TraceStore) -> None:
    expected = default_kernels("softmax")
    d = client.get("/api/traces/softmax-small").json()
    kernel_ctx = [c["index"] for c in d["contexts"] if c["kind"] == "kernel"]
    assert len(kernel_ctx) == len(expected) >= 1  # one since rows fuse: max, sum and divide in one kernel
    for ci, kern in zip(kernel_ctx, expected, strict=True):
        v = client.get(f"/api/traces/softmax-small/contexts/{ci}/kernel").json()
        opts = [o.to_json() for o in kern.meta["opts"]]  # the zoo is lowered with realize()'s default opts
        assert (v["name"], v["device"], v["source"], v["opts"]) == (kern.name, "CPU", kern.source, opts)
        assert v["axes"] == d["contexts"][ci]["axes"] and v["axes"]
        lines = v["linear"].splitlines()
        assert len(lines) == len(kern.linear.src)
        latest: dict[Any, int] = {}  # an instruction listed twice: its operands name the latest before them
        for i, (line, ins) in enumerate(zip(lines, kern.linear.src, strict=True)):
            assert line.split()[:2] == [str(i), ins.op.value]
            operands = [f"%{latest[s]}" for s in ins.src if s in latest]
            assert all(o in line.split() for o in operands)
            latest[ins] = i


def test_kernel_route_refuses_contexts_that_are_not_rendered_kernels(client: TestClient) -> None:
    r = client.get("/api/traces/gemm/contexts/0/kernel")
    assert r.status_code == 404 and r.json()["detail"] == "context 0 (schedule) is a schedule, not a kernel"
    r = client.get("/api/traces/broken/contexts/0/kernel")
    assert r.status_code == 404 and "r_L3_R5 has no rendered program" in r.json()["detail"]
    assert "ValueError: no rule for this" in r.json()["detail"]
    d = client.get("/api/traces/broken").json()
    assert d["contexts"][0]["passes"][0]["error"] == "ValueError: no rule for this"
    assert client.get("/api/traces/gemm/contexts/3/kernel").status_code == 404


@pytest.mark.parametrize("url", ["/api/traces/nope", "/api/traces/nope/contexts/0/kernel", steps_url("nope", 0, 0, 0),
                                 steps_url("gemm", 3, 0, 0), steps_url("gemm", 1, 99, 0), steps_url("gemm", 1, 0, 99),
                                 "/api/nothing", "/no-such-file.js"])
def test_unknown_ids_are_404_json(client: TestClient, url: str) -> None:
    r = client.get(url)
    assert r.status_code == 404 and isinstance(r.json()["detail"], str) and r.json()["detail"]


@pytest.mark.parametrize("url", [steps_url("gemm", -1, 0, 0), steps_url("gemm", 1, 0, -1), steps_url("gemm", 1, "x", 0),
                                 "/api/traces/gemm/contexts/-1/kernel"])
def test_bad_params_are_422_json(client: TestClient, url: str) -> None:
    r = client.get(url)
    assert r.status_code == 422 and r.json()["detail"].startswith("path.") and r.json()["errors"]


def test_recording_a_zoo_kernel(fresh: TestClient) -> None:
    r = fresh.post("/api/traces", json={"zoo": "gemm", "small": True, "device": "python"})
    assert r.status_code == 201 and r.json() == {"id": "gemm-small-python", "name": "gemm", "source": "zoo",
                                                 "contexts": 2, "origin": None}
    assert fresh.post("/api/traces", json={"zoo": "gemm", "small": True, "device": "PYTHON"}).json()["id"] == \
        "gemm-small-python"  # the same recording replaces the last one
    d = fresh.get("/api/traces/gemm-small-python").json()
    (kern,) = default_kernels("gemm", "PYTHON")
    assert d["device"] == "PYTHON" and d["contexts"][1]["name"] == kern.name
    v = fresh.get("/api/traces/gemm-small-python/contexts/1/kernel").json()
    assert v["source"] == "" and v["linear"]  # the PYTHON target interprets the Linear program
    assert fresh.post("/api/traces", json={"zoo": "sum", "small": True}).json()["id"] == "sum-small"
    assert [t["id"] for t in fresh.get("/api/traces").json()] == ["gemm-small-python", "sum-small"]


def test_a_zoo_recording_never_replaces_a_file_of_the_same_name(missing_dist: Path, tmp_path: Path) -> None:
    s = TraceStore("CPU")
    recording.record_zoo("max", small=True).save(tmp_path / "max.uopviz-trace.json")
    assert s.load_file(tmp_path / "max.uopviz-trace.json").id == "max"
    assert s.record_zoo("max").id == "max-2"
    assert s.record_zoo("max").id == "max-2"  # replaced: the same recording again
    assert [(t.id, t.source) for t in s.all()] == [("max", "file"), ("max-2", "zoo")]


def test_a_store_records_the_zoo_for_its_own_device() -> None:
    s = TraceStore("PYTHON")
    assert (s.record_zoo("max", small=True).device, s.record_zoo("max", small=True, device="CPU").id) == \
        ("PYTHON", "max-small-cpu")


@pytest.mark.parametrize(("body", "words"), [
    ({"zoo": "nope"}, "no zoo kernel 'nope'"),
    ({"zoo": "gemm", "device": "TPU"}, "unknown device 'TPU'"),
    ({}, "give exactly one of 'zoo', 'path' or 'script' (got none)"),
    ({"zoo": "gemm", "path": "x"}, "(got zoo, path)"),
    ({"path": "x.json", "small": True}, "'device' and 'small' go with 'zoo'"),
    ({"zoo": "gemm", "extra": 1}, "body.extra: Extra inputs are not permitted"),
    ({"zoo": 3}, "body.zoo: Input should be a valid string"),
])
def test_bad_new_trace_bodies_are_422(fresh: TestClient, body: dict[str, object], words: str) -> None:
    r = fresh.post("/api/traces", json=body)
    assert r.status_code == 422 and words in r.json()["detail"], r.json()


def test_opening_trace_files(fresh: TestClient, tmp_path: Path) -> None:
    good = tmp_path / "run.uopviz-trace.json"
    recording.record_zoo("sum", small=True).save(good)
    r = fresh.post("/api/traces", json={"path": str(good)})
    assert r.status_code == 201 and r.json() == {"id": "run", "name": "run", "source": "file", "contexts": 2,
                                                 "origin": None}
    assert fresh.post("/api/traces", json={"path": str(good)}).json()["id"] == "run-2"
    (kern,) = default_kernels("sum")
    assert fresh.get("/api/traces/run-2").json()["contexts"][1]["name"] == kern.name
    assert fresh.get("/api/traces/run-2/contexts/1/kernel").json()["opts"] == [o.to_json() for o in kern.meta["opts"]]
    assert kern.meta["opts"]  # a saved trace keeps the opts its kernels were lowered with

    r = fresh.post("/api/traces", json={"path": str(tmp_path / "missing.json")})
    assert r.status_code == 404 and "missing.json: no such trace file" in r.json()["detail"]
    bad = tmp_path / "bad.uopviz-trace.json"
    bad.write_text('{"format": "uopviz-trace", "version": 99}')
    r = fresh.post("/api/traces", json={"path": str(bad)})
    assert r.status_code == 422 and str(bad) in r.json()["detail"] and "newer than this uopviz" in r.json()["detail"]
    bad.write_bytes(gzip.compress(b"{}"))
    assert fresh.post("/api/traces", json={"path": str(bad)}).status_code == 422


def test_running_scripts_under_the_recorder(fresh: TestClient, tmp_path: Path) -> None:
    script = tmp_path / "double.py"
    script.write_text("import sys\nimport numpy as np\nfrom helper import K\nfrom uopviz import Tensor\n"
                      "assert sys.argv == [__file__] and __name__ == '__main__'\n"
                      "print((Tensor(np.arange(6, dtype=np.float32), device='PYTHON') * K).sum().numpy())\n")
    (tmp_path / "helper.py").write_text("K = 2\n")  # the script's directory is importable, as with `python x.py`
    r = fresh.post("/api/traces", json={"script": str(script)})
    assert r.status_code == 201, r.json()
    assert r.json()["id"] == "double" and r.json()["source"] == "script"
    d = fresh.get("/api/traces/double").json()
    assert [c["kind"] for c in d["contexts"]] == ["schedule", "kernel"] and d["contexts"][1]["name"].startswith("r_")
    assert d["output"] == {"stdout": "30.0\n", "stderr": "", "truncated": False}  # what the script printed
    # the kernel links to the script line that realized it (the innermost frame outside uopviz)
    line = "print((Tensor(np.arange(6, dtype=np.float32), device='PYTHON') * K).sum().numpy())"
    assert d["contexts"][1]["stack"][-1] == {"file": str(script.resolve()), "line": 6, "function": "<module>",
                                             "code": line}

    own = tmp_path / "own.py"  # a script that records a trace of its own (README's first program does)
    own.write_text("import uopviz\nfrom uopviz import Tensor\nwith uopviz.trace() as tr:\n"
                   "    print((Tensor([1.0, 2.0], device='PYTHON') * 3).sum().numpy())\nassert len(tr.contexts) == 2\n")
    assert fresh.post("/api/traces", json={"script": str(own)}).status_code == 201
    assert [c["kind"] for c in fresh.get("/api/traces/own").json()["contexts"]] == ["schedule", "kernel"]

    failing = tmp_path / "failing.py"
    failing.write_text("x = 1\nraise RuntimeError('the script broke')\n")
    r = fresh.post("/api/traces", json={"script": str(failing)})
    assert r.status_code == 422
    assert r.json()["detail"] == f"{failing}: the script failed: RuntimeError: the script broke (line 2)"
    assert fresh.post("/api/traces", json={"script": str(tmp_path / "none.py")}).status_code == 404


def test_a_script_that_hangs_is_stopped(tmp_path: Path) -> None:
    script = tmp_path / "spin.py"
    script.write_text("while True:\n    pass\n")
    with pytest.raises(recording.RecordError, match=r"did not finish within 0\.5 s"):
        recording.run_script(script, timeout=0.5)


def _gemm_kernel(opts: list[Opt]) -> Kernel:
    """The zoo gemm's kernel lowered with opts, independently of the server."""
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.tensor import Tensor
    z = get("gemm")
    s = z.sizes()
    out = z.program(*[Tensor.empty(*i.shape(s), device="CPU") for i in z.inputs])
    (ast,) = [ast for ast, _ in kernels_of(schedule([out.uop])) if any(u.op is Ops.REDUCE for u in ast.toposort())]
    return compile_kernel(ast, "CPU", opts)[0]


def test_applying_opts_gives_the_kernel_the_pipeline_makes_with_them(missing_dist: Path,
                                                                      make_client: Callable[..., TestClient]) -> None:
    s = TraceStore("CPU")
    s.record_zoo("gemm")
    c, ci = make_client(s, dist=missing_dist), gemm_context(s)
    upcast = {"op": "SPLIT", "axis": 0, "arg": [4, "UPCAST", False]}
    r = c.post(f"/api/traces/gemm/contexts/{ci}/opts", json={"opts": [upcast]})
    assert r.status_code == 200, r.json()
    want = _gemm_kernel([Opt(OptOps.SPLIT, 0, (4, AxisType.UPCAST, False))])
    v = r.json()
    assert (v["name"], v["source"], v["opts"]) == (want.name, want.source, [upcast])
    before = c.get(f"/api/traces/gemm/contexts/{ci}/kernel").json()["source"]
    assert v["name"] == "r_L256_L1024_R1024_u4" and v["source"] != before
    assert [(a["letter"], a["size"]) for a in v["axes"]] == [("L", 256), ("L", 1024), ("R", 1024), ("u", 4)]

    d = c.get(f"/api/traces/{v['trace_id']}").json()
    assert d["source"] == "opts" and [x["name"] for x in d["contexts"]] == [want.name]
    assert "split axis 0 by 4 → UPCAST" in [p["name"] for p in d["contexts"][0]["passes"]]
    k = c.get(f"/api/traces/{v['trace_id']}/contexts/0/kernel").json()
    assert (k["source"], k["opts"]) == (want.source, [upcast])
    unroll = {"op": "SPLIT", "axis": 2, "arg": [8, "UNROLL", False]}
    again = c.post(f"/api/traces/{v['trace_id']}/contexts/0/opts", json={"opts": [upcast, unroll]}).json()
    assert again["name"] == "r_L256_L1024_R128_u4_r8" and again["trace_id"] != v["trace_id"]


def _split(axis: int, factor: int, kind: str) -> dict[str, object]:
    return {"op": "SPLIT", "axis": axis, "arg": [factor, kind, False]}


@pytest.fixture
def small_max(missing_dist: Path, make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
              ) -> tuple[TestClient, list[int]]:
    """A client over the small zoo max (kernel r_L6_R33), and a list that counts the kernels lowered with opts."""
    s = TraceStore("CPU")
    s.record_zoo("max", small=True)
    lowered: list[int] = []
    real = recording.record_opts

    def counting(*args: Any) -> Any:
        lowered.append(1)
        return real(*args)

    monkeypatch.setattr(recording, "record_opts", counting)
    return make_client(s, dist=missing_dist), lowered


MAX_OPTS = "/api/traces/max-small/contexts/1/opts"


def test_the_same_opts_again_answer_the_same_trace_without_lowering_again(small_max: tuple[TestClient, list[int]]
                                                                         ) -> None:
    c, lowered = small_max
    first = c.post(MAX_OPTS, json={"opts": [_split(0, 2, "UPCAST")]}).json()
    assert c.post(MAX_OPTS, json={"opts": [_split(0, 2, "UPCAST")]}).json() == first and len(lowered) == 1
    other = c.post(MAX_OPTS, json={"opts": [_split(0, 3, "UPCAST")]}).json()
    assert other["trace_id"] != first["trace_id"] and other["name"] != first["name"] and len(lowered) == 2
    assert c.post(MAX_OPTS, json={"opts": []}).json()["trace_id"] not in (first["trace_id"], other["trace_id"])
    assert len([t for t in c.get("/api/traces").json() if t["source"] == "opts"]) == 3


def test_opts_traces_are_bounded_and_a_dropped_one_says_to_apply_the_opts_again(
        small_max: tuple[TestClient, list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "OPTS_KEEP", 3)
    c, lowered = small_max
    variants = [[_split(0, 2, "UPCAST")], [_split(0, 3, "UPCAST")], [_split(1, 3, "UNROLL")], []]
    ids = [c.post(MAX_OPTS, json={"opts": v}).json()["trace_id"] for v in variants[:3]]
    assert c.post(MAX_OPTS, json={"opts": variants[0]}).json()["trace_id"] == ids[0]  # now the most recent
    ids.append(c.post(MAX_OPTS, json={"opts": variants[3]}).json()["trace_id"])  # drops the least recent: ids[1]
    kept = [t["id"] for t in c.get("/api/traces").json() if t["source"] == "opts"]
    assert sorted(kept) == sorted([ids[0], ids[2], ids[3]]) and len(lowered) == 4
    r = c.get(f"/api/traces/{ids[1]}/contexts/0/kernel")
    assert r.status_code == 404 and "was dropped" in r.json()["detail"] and "apply the opts again" in r.json()["detail"]
    again = c.post(MAX_OPTS, json={"opts": variants[1]}).json()["trace_id"]
    assert again not in ids and len(lowered) == 5  # a new id: an old one never names another kernel
    assert c.get(f"/api/traces/{again}/contexts/0/kernel").status_code == 200


@pytest.mark.parametrize(("opts", "words"), [
    ([{"op": "SPLIT", "axis": 0, "arg": [3, "UPCAST", False]}], "1024 is not divisible by 3"),
    ([{"op": "SPLIT", "axis": 7, "arg": [4, "UPCAST"]}], "the kernel has 3 axes (0..2)"),
    ([{"op": "SPLIT", "axis": 2, "arg": [4, "UPCAST", False]}], "UPCAST axis splits from"),
    ([{"op": "TWIST", "axis": 0}], "unknown OptOp 'TWIST'"),
    ([{"op": "SPLIT", "axis": 0, "arg": 4}], "SPLIT's arg is [factor, axis type, top]"),
    ([{"op": "SPLIT", "axis": 0, "arg": [4, "SIDEWAYS"]}], "unknown AxisType 'SIDEWAYS'"),
])
def test_illegal_opts_are_422_saying_why(client: TestClient, gemm: int, opts: list[dict[str, object]],
                                        words: str) -> None:
    r = client.post(f"/api/traces/gemm/contexts/{gemm}/opts", json={"opts": opts})
    assert r.status_code == 422 and words in r.json()["detail"], r.json()


def test_opts_need_a_kernel_and_a_well_formed_body(client: TestClient) -> None:
    assert client.post("/api/traces/gemm/contexts/0/opts", json={"opts": []}).status_code == 404
    assert client.post("/api/traces/nope/contexts/1/opts", json={"opts": []}).status_code == 404
    assert client.post("/api/traces/gemm/contexts/1/opts", json={}).status_code == 422
    assert client.post("/api/traces/gemm/contexts/1/opts", json={"opts": [{"axis": 0}]}).status_code == 422
    assert client.post("/api/traces/gemm/contexts/1/opts", content=b"{oops",
                       headers={"content-type": "application/json"}).status_code in (400, 422)


def test_the_ui_bundle_is_served_and_its_absence_explained(store: TraceStore, tmp_path: Path,
                                                           make_client: Callable[..., TestClient]) -> None:
    dist = tmp_path / "dist"
    c = make_client(store, dist=dist)
    r = c.get("/")
    assert r.status_code == 200 and "npm run build" in r.text and "/api/traces" in r.text
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<!doctype html><title>uopviz</title>")
    (dist / "assets" / "app.js").write_text("console.log(1)")
    (tmp_path / "secret.txt").write_text("not for the web")
    assert c.get("/").text == "<!doctype html><title>uopviz</title>"
    r = c.get("/assets/app.js")
    assert r.status_code == 200 and r.text == "console.log(1)" and "javascript" in r.headers["content-type"]
    assert c.get("/../secret.txt").status_code == 404
    assert c.get("/%2e%2e/secret.txt").status_code == 404
    assert c.get("/api/traces").status_code == 200  # the API wins over the bundle


def test_unexpected_errors_come_back_as_json(store: TraceStore, missing_dist: Path, monkeypatch: pytest.MonkeyPatch,
                                             make_client: Callable[..., TestClient]) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(views, "detail_json", broken)  # what the route answers with (views.detail in a widget)
    c = make_client(store, dist=missing_dist, raise_server_exceptions=False)
    r = c.get("/api/traces/gemm")
    assert r.status_code == 500 and r.json() == {"detail": "internal error: RuntimeError: a bug"}


def test_openapi_documents_every_route(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert set(doc["paths"]) == {"/api/meta", "/api/traces", "/api/traces/{trace_id}",
                                 "/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}",
                                 "/api/traces/{trace_id}/contexts/{ci}/kernel",
                                 "/api/traces/{trace_id}/contexts/{ci}/opts",
                                 "/api/traces/{trace_id}/contexts/{ci}/beam", "/api/beam/{job}/events",
                                 "/api/beam/{job}",
                                 "/api/tuning/searches", "/api/tuning/searches/{sid}", "/api/tuning/results",
                                 "/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}/python",
                                 "/api/traces/{trace_id}/contexts/{ci}/time",
                                 "/api/traces/{trace_id}/contexts/{ci}/machine-code"}
    step = doc["paths"]["/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}"]["get"]
    assert set(step["responses"]) == {"200", "400", "401", "404", "422"}
    assert json.dumps(doc).count("ErrorBody") >= 2
    assert doc["components"]["securitySchemes"]["token"] == {
        "type": "http", "scheme": "bearer", "description": doc["components"]["securitySchemes"]["token"]["description"]}
    assert all(op["security"] == [{"token": []}] for ops in doc["paths"].values() for op in ops.values())


def test_a_graph_as_python_rebuilds_the_same_nodes(client: TestClient, store: TraceStore, gemm: int) -> None:
    """Issue 17: the graph as pasteable Python; running it builds nodes with the very content ids of the trace."""
    from uopviz.trace import node_id
    tr = store.get("gemm").trace
    c = tr.contexts[gemm]
    for pi in (0, len(c.passes) - 1):
        k = len(c.passes[pi].steps)
        v = client.get(f"{steps_url('gemm', gemm, pi, k)}/python").json()
        assert v["root"] == c.passes[pi].graph_at(k) and "from uopviz.uop.ops import" in v["text"]
        scope: dict[str, Any] = {}
        exec(compile(v["text"], "<pasted>", "exec"), scope)  # what a person pasting it would run
        assert node_id(scope["root"]) == v["root"]
    some = tr.nodes_of(c.passes[0].input)
    part = next(n for n in some if tr.node(n)["op"] == "Reduce")
    v = client.get(f"{steps_url('gemm', gemm, 0, 0)}/python", params={"node": part}).json()
    assert v["root"] == part and v["text"].rstrip().splitlines()[-1].startswith("root = reduce")
    r = client.get(f"{steps_url('gemm', gemm, 0, 0)}/python", params={"node": "0" * 16})
    assert r.status_code == 404 and "is not in the graph" in r.json()["detail"]
    assert client.get(f"{steps_url('gemm', gemm, 0, 0)}/python", params={"node": "x"}).status_code == 422


def test_time_it_runs_the_kernel_on_its_device(client: TestClient) -> None:
    """Issue 17: a kernel runs on its device as BEAM times it, with GFLOP/s and GB/s from its work."""
    v = client.get("/api/traces/softmax-small").json()
    ci = next(c["index"] for c in v["contexts"] if c["kind"] == "kernel")
    kernel = client.get(f"/api/traces/softmax-small/contexts/{ci}/kernel").json()
    assert kernel["work"]["bytes"] > 0 and kernel["work"]["flops"] > 0
    r = client.post(f"/api/traces/softmax-small/contexts/{ci}/time", json={})
    assert r.status_code == 200, r.json()
    t = r.json()
    assert t["device"] == "CPU" and t["opts"] == kernel["opts"] and t["time_s"] > 0 and t["samples"]
    assert t["gflops"] == pytest.approx(kernel["work"]["flops"] / t["time_s"] / 1e9)
    assert t["gbs"] == pytest.approx(kernel["work"]["bytes"] / t["time_s"] / 1e9)
    assert client.post("/api/traces/gemm/contexts/0/time", json={}).status_code == 404  # the schedule
    assert client.post(f"/api/traces/softmax-small/contexts/{ci}/time", json={"x": 1}).status_code == 422


def test_the_gemm_kernels_work_is_two_flops_per_multiply_add(client: TestClient, gemm: int) -> None:
    work = client.get(f"/api/traces/gemm/contexts/{gemm}/kernel").json()["work"]
    assert work == {"flops": 2 * 1024**3, "bytes": 3 * 1024 * 1024 * 4}


def test_machine_code_is_the_disassembly_of_the_cpu_library(client: TestClient, gemm: int) -> None:
    import shutil
    v = client.get(f"/api/traces/gemm/contexts/{gemm}/machine-code").json()
    if shutil.which("objdump") is None:
        assert v["kind"] == "none" and "objdump is not installed" in v["note"]
        return
    assert v["kind"] == "disassembly" and v["device"] == "CPU" and v["note"].startswith("objdump -d of ")
    assert f"<{GEMM_KERNEL}>:" in v["text"].splitlines()[0]
    assert client.get("/api/traces/gemm/contexts/0/machine-code").status_code == 404


def test_machine_code_of_an_indexed_cpu_device_is_its_library() -> None:
    """The runtime decides what machine code a device has, so CPU:1 (a shard's device) shows it as CPU does."""
    import shutil

    from uopviz.backend import machine
    (k,) = default_kernels("sum", "CPU:1")
    v = machine.machine_code(k.source or "", k.name, "CPU:1")
    assert v.device == "CPU:1" and v.kind == ("disassembly" if shutil.which("objdump") else "none")


@needs_cl
def test_machine_code_of_a_cl_kernel_is_the_driver_s_binary(missing_dist: Path,
                                                             make_client: Callable[..., TestClient]) -> None:
    import shutil
    s = TraceStore("CL")
    s.record_zoo("sum", "CL", small=True)
    with make_client(s, dist=missing_dist) as c:
        kernel = c.get("/api/traces/sum-small/contexts/1/kernel").json()
        v = c.get("/api/traces/sum-small/contexts/1/machine-code").json()
    shown = ("listing", "disassembly") if shutil.which("objdump") else ("listing", "disassembly", "none")
    assert v["device"] == "CL" and v["kind"] in shown and v["note"], v  # PoCL with objdump: never "none"
    if v["kind"] == "disassembly":  # PoCL: an ELF inside the program binary, disassembled for this kernel
        assert v["note"].startswith("objdump -d of the ELF inside ") and kernel["name"] in v["text"]
    elif v["kind"] == "listing":  # a driver whose binary is text (PTX, AMD IL)
        assert v["text"].strip()


def test_an_opts_trace_names_the_kernel_it_came_from(missing_dist: Path,
                                                     make_client: Callable[..., TestClient]) -> None:
    s = TraceStore("CPU")
    s.record_zoo("sum", small=True)
    c = make_client(s, dist=missing_dist)
    opts = [{"op": "SPLIT", "axis": 0, "arg": [5, "UNROLL", False]}]
    tid = c.post("/api/traces/sum-small/contexts/1/opts", json={"opts": opts}).json()["trace_id"]
    origin = {"trace_id": "sum-small", "context": 1, "opts": opts}
    assert next(t for t in c.get("/api/traces").json() if t["id"] == tid)["origin"] == origin
    assert c.get(f"/api/traces/{tid}").json()["origin"] == origin


def test_a_linear_program_in_a_diff_is_named_by_its_length(client: TestClient, store: TraceStore, gemm: int) -> None:
    """Issue 31: linearize's diff named its Linear node with every one of its ~360 operands, a paragraph; the
    listing shows the program, so the diff says how long it is."""
    pi = next(i for i, p in enumerate(store.get("gemm").trace.contexts[gemm].passes) if p.name == "linearize")
    v = client.get(steps_url("gemm", gemm, pi, 1)).json()
    linear = next(c for c in v["changes"] if c["text"].startswith("Linear"))
    n = len(store.get("gemm").trace.node(linear["id"])["src"])
    assert n > 64 and linear["text"] == f"Linear:void ({n} sources: the listing shows them)"
