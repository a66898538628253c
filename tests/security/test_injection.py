"""Data never becomes code: a trace file is data, and nothing in it may reach a renderer as text.

The attack this guards against: a DefineVar name in a crafted trace was pasted into the generated C, so opening
a shared link to the trace in `uopviz serve` (whose page posts to the opts route by itself) compiled and ran
the attacker's code in the server. Names are now identifiers, checked by the spec's arg rules when a trace is
read and again by the renderer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from uopviz.backend.recording import RecordError
from uopviz.backend.store import TraceStore

import uopviz
from uopviz.dtype import dtypes
from uopviz.pipeline import lower
from uopviz.renderer.cstyle import RenderError, render
from uopviz.renderer.dialect import OPENCL, C, Dialect
from uopviz.runtime import device as devices
from uopviz.trace import Trace, TraceFormatError
from uopviz.trace.serialize import encode
from uopviz.uop.ops import ConstArg, Ops, RangeArg, UOp, VarArg
from uopviz.uop.spec import SpecError, validate

f32 = dtypes.float32
PAYLOAD = 'n) { system("touch /tmp/uopviz-pwned"); } void x(int n'


def symbolic_kernel(name: str = "n") -> UOp:
    """data0[i] = data1[i] * n + 1.5 for i < n: a kernel whose DefineVar name is written into its source."""
    n = UOp.variable(name, 1, 16)
    a, out = UOp.param(1, (n,), f32), UOp.param(0, (n,), f32)
    r = UOp.range(n, 0)
    return UOp.sink(out.index(r).store(a.index(r).load() * n.cast(f32) + 1.5).end(r))


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    """The document of a recorded lowering of the symbolic kernel on the CPU."""
    with uopviz.trace() as tr, uopviz.trace.context("r_Lv", kind="kernel"):
        lower(symbolic_kernel(), devices.get("CPU").target, [])
    return json.loads(tr.to_json())


def tampered(doc: dict[str, Any], op: str, change: Callable[[Any], Any]) -> str:
    """The document with every node of `op` given a new arg (its id kept, as an attacker would leave it)."""
    doc = json.loads(json.dumps(doc))
    hits = [e for e in doc["nodes"].values() if e["op"] == op]
    assert hits, f"the recorded trace has no {op} node"
    for e in hits:
        e["arg"] = change(e["arg"])
    return json.dumps(doc)


def test_the_recorded_trace_loads_and_names_its_variable(recorded: dict[str, Any]) -> None:
    tr = Trace.from_dict(recorded)
    assert any(e["op"] == "DefineVar" for e in tr.nodes.values())
    assert "int n)" in next(e["arg"] for e in tr.nodes.values() if e["op"] == "Source")


def test_a_define_var_name_carrying_code_is_refused_at_load(recorded: dict[str, Any], tmp_path: Path) -> None:
    text = tampered(recorded, "DefineVar", lambda a: {"VarArg": {**a["VarArg"], "name": PAYLOAD}})
    with pytest.raises(TraceFormatError, match=r"\.arg: not a valid DefineVar arg: name must be an identifier"):
        Trace.from_json(text)
    path = tmp_path / "crafted.uopviz-trace.json"
    path.write_text(text)
    with pytest.raises(RecordError, match="name must be an identifier"):  # what `uopviz serve FILE` and the API do
        TraceStore("CPU").load_file(path)
    assert not Path("/tmp/uopviz-pwned").exists()


@pytest.mark.parametrize(("op", "change", "why"), [
    ("Range", lambda a: {"RangeArg": {**a["RangeArg"], "idx": "0; system(0)"}}, "RangeArg needs an int idx"),
    ("Range", lambda a: {"RangeArg": {**a["RangeArg"], "idx": -1}}, "RangeArg needs an int idx >= 0"),
    ("Param", lambda a: {"ParamArg": {**a["ParamArg"], "slot": "0]; system(0); //"}}, "slot must be a non-negative"),
    ("Const", lambda a: encode(ConstArg("1); system(0); //", f32)), "holds"),
    ("DefineVar", lambda a: {"VarArg": {**a["VarArg"], "max": "16); system(0"}}, "must be ints"),
    ("Program", lambda a: "k(); system(0); void k", "the kernel's name"),
    ("Source", lambda a: ["not", "text"], "arg must be a str"),
])
def test_every_arg_field_that_reaches_source_is_checked(recorded: dict[str, Any], op: str,
                                                        change: Callable[[Any], Any], why: str) -> None:
    with pytest.raises(TraceFormatError, match=f"not a valid {op} arg: .*{why}"):
        Trace.from_json(tampered(recorded, op, change))


def test_an_unknown_arg_kind_is_refused_at_load(recorded: dict[str, Any]) -> None:
    with pytest.raises(TraceFormatError, match="cannot decode arg"):
        Trace.from_json(tampered(recorded, "DefineVar", lambda a: {"Eval": PAYLOAD}))


@pytest.mark.parametrize("name", [PAYLOAD, "", "9lives", "a-b", "x" * 65, "名前"])
def test_spec_validation_refuses_a_define_var_that_is_not_an_identifier(name: str) -> None:
    with pytest.raises(SpecError, match="name must be an identifier"):
        validate(UOp(Ops.DEFINE_VAR, (), VarArg(name, 0, 4)))


@pytest.mark.parametrize("name", ["gidx0; system(0)", "warp0", "gidx10", "lidx"])
def test_spec_validation_refuses_a_special_with_a_made_up_name(name: str) -> None:
    with pytest.raises(SpecError, match="name must be gidxN, lidxN or tidxN"):
        validate(UOp.special(4, name))


def _linear_with(var: UOp) -> UOp:
    """A Linear program using `var`, built without validation (as a buggy pass or a rebuilt graph might)."""
    out = UOp.param(0, (16,), f32)
    r = UOp(Ops.RANGE, (var,), RangeArg(0))
    st = out.index(r).store(var.cast(f32))
    return UOp(Ops.LINEAR, (var, out, r, st, UOp(Ops.END, (st, r))))


@pytest.mark.parametrize(("name", "why"), [(PAYLOAD, "is not an identifier"), ("alu0", "rename the variable"),
                                           ("ridx3", "rename the variable")])
@pytest.mark.parametrize("dialect", [C, OPENCL], ids=["c", "opencl"])
def test_the_renderer_refuses_names_it_did_not_build_or_check(name: str, why: str, dialect: Dialect) -> None:
    """The renderer's own check, for graphs that never went through spec validation."""
    var = UOp(Ops.DEFINE_VAR, (), VarArg(name, 1, 16))
    with pytest.raises(RenderError, match=why):
        render(_linear_with(var), "k", dialect)


def test_the_renderer_refuses_a_kernel_name_or_hardware_id_that_is_not_one() -> None:
    var = UOp.variable("n", 1, 16)
    with pytest.raises(RenderError, match=r"kernel name .* is not an identifier"):
        render(_linear_with(var), "k(){} void j", C)
    g = UOp(Ops.SPECIAL, (UOp.const(dtypes.index, 4),), "gidx0 = 0; system(0); int q")
    with pytest.raises(RenderError, match="is not gidxN, lidxN or tidxN"):
        render(UOp(Ops.LINEAR, (g,)), "k", OPENCL)
    assert "int n)" in render(_linear_with(var), "k", C)
