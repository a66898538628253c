"""Display text and colours of trace nodes, from args encoded exactly as traces store them."""

from __future__ import annotations

from typing import Any

import pytest
from uopviz.backend import display

from uopviz.dtype import dtypes
from uopviz.trace.serialize import encode
from uopviz.uop.ops import AddrSpace, AxisType, BufferArg, ConstArg, GroupOp, Ops, ParamArg, RangeArg, ReduceArg, VarArg


@pytest.mark.parametrize(("arg", "text"), [
    (None, ""),
    (ConstArg(1.5, dtypes.float32), "1.5"),
    (ConstArg(True, dtypes.bool), "True"),
    (ConstArg(float("nan"), dtypes.float32), "nan"),
    (RangeArg(3, AxisType.UPCAST), "r3 UPCAST"),
    (ParamArg(0, dtypes.float32, "CPU"), "slot 0"),
    (ParamArg(1, dtypes.float32, "CPU", AddrSpace.LOCAL), "slot 1 LOCAL"),
    (BufferArg(16, dtypes.int32, "CPU", AddrSpace.REG, 7), "int32[16] CPU REG"),
    (VarArg("n", 1, 8), "n [1..8]"),
    (ReduceArg(Ops.ADD, (0, 2)), "Add (0, 2)"),
    ((4, 2), "(4, 2)"),
    ((4,), "(4,)"),
    (dtypes.float16, "float16"),
    (b"\x00\x01\x02", "<3 bytes>"),
    ("gidx0", "gidx0"),
])
def test_arg_text(arg: Any, text: str) -> None:
    assert display.arg_text(encode(arg)) == text


def test_long_args_are_one_short_line() -> None:
    source = "void k(float* a) {\n" + "  a[0] = 1.0f;\n" * 50 + "}"
    text = display.arg_text(source)
    assert len(text) == 80 and text.endswith("…") and "\n" not in text and text.startswith("void k(float* a) { a[0]")
    assert display.arg_text({"repr": "mod.Thing: Thing(1)"}) == "mod.Thing: Thing(1)"


def test_colours_are_axis_types_for_ranges_and_groups_otherwise() -> None:
    def entry(op: Ops, arg: Any = None) -> display.Entry:
        return {"op": op.value, "dtype": "index", "shape": [], "arg": encode(arg), "src": [], "tag": None}

    assert display.colour_of(entry(Ops.RANGE, RangeArg(0, AxisType.REDUCE))) == AxisType.REDUCE.colour
    assert display.axis_type_of(entry(Ops.RANGE, RangeArg(0, AxisType.GLOBAL))) == "GLOBAL"
    assert display.axis_type_of(entry(Ops.ADD)) is None
    assert display.colour_of(entry(Ops.RESHAPE)) == GroupOp.Colour["Movement"]
    assert display.colour_of(entry(Ops.CONST, ConstArg(0, dtypes.index))) == display.OTHER_COLOUR
    assert display.group_of("Const") is None and display.group_of("Store") == "Store"


def test_diff_lines_name_leaves_by_arg_and_other_nodes_by_id() -> None:
    table = {"a": {"op": "Const", "dtype": "index", "shape": [], "arg": encode(ConstArg(2, dtypes.index)), "src": []},
             "b0123456": {"op": "Add", "dtype": "index", "shape": [3], "arg": None, "src": ["a", "a"]},
             "c": {"op": "Mul", "dtype": "index", "shape": [], "arg": None, "src": ["b0123456", "a"]}}
    assert display.node_text("b0123456", table.__getitem__) == "Add:index(3) (Const 2, Const 2)"
    assert display.node_text("c", table.__getitem__) == "Mul:index (Add#b012, Const 2)"
    assert display.label("a", table.__getitem__) == "Const 2"
    assert display.const_value(table["a"]) == 2 and display.const_value(table["c"]) is None
