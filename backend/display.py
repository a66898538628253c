"""Text and colour for trace nodes, read from node-table entries (JSON) rather than rebuilt UOps, so that
every trace a reader can load (also one whose args were stored only as text) can be shown."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from uopviz.uop.ops import AxisType, GroupOp, Ops

Entry = dict[str, Any]
Lookup = Callable[[str], Entry]

OTHER_COLOUR = "#9E9E9E"  # source, codegen and symbolic ops: SPEC draws no group colour for them
_ARG_CHARS = 80


def _short(text: str, limit: int = _ARG_CHARS) -> str:
    """One line of at most `limit` characters (a Source arg is a whole kernel's text)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def _value(j: Any) -> str:
    if j is None or isinstance(j, (bool, int, float)):
        return repr(j)
    if isinstance(j, str):
        return j
    if isinstance(j, list):
        return "(" + ", ".join(_value(x) for x in j) + ("," if len(j) == 1 else "") + ")"
    if isinstance(j, dict) and len(j) == 1:
        ((kind, v),) = j.items()
        if kind in ("dtype", "Ops", "AxisType", "AddrSpace", "float", "repr"):
            return str(v)
        if kind == "bytes":
            try:
                return f"<{len(base64.b64decode(v))} bytes>"
            except (ValueError, TypeError):
                return "<bytes>"
        if isinstance(v, dict):
            return _named(kind, v)
    return str(j)


def _named(kind: str, f: dict[str, Any]) -> str:
    """The fields a reader of a graph looks for, in the order they read them."""
    if kind == "ConstArg":
        return _value(f.get("value"))
    if kind == "RangeArg":
        return f"r{f.get('idx')} {_value(f.get('type'))}"
    if kind == "ParamArg":
        space = f.get("addrspace")
        return f"slot {f.get('slot')}" + ("" if space is None else f" {_value(space)}")
    if kind == "BufferArg":
        return f"{_value(f.get('dtype'))}[{f.get('size')}] {_value(f.get('device'))} {_value(f.get('addrspace'))}"
    if kind == "VarArg":
        return f"{f.get('name')} [{f.get('min')}..{f.get('max')}]"
    if kind == "ReduceArg":
        return f"{_value(f.get('op'))} {_value(f.get('axes'))}"
    shown = ", ".join(f"{k}={_value(v)}" for k, v in f.items() if v is not None)
    return f"{kind}({shown})"


def devices(order: list[str], node: Lookup) -> dict[str, str]:
    """The device of each node of a graph (its entries' "device", which recording derives by the dialect's rule),
    spelled for display, where the graph spans several devices (a multi-device tensor's, a copy between devices);
    empty where it spans one, so that a single-device graph reads as before, and for a trace saved before devices
    were stored."""
    out = {nid: _value(d) for nid in order if (d := node(nid).get("device")) is not None}
    return out if len(set(out.values())) > 1 else {}


def arg_text(arg: Any) -> str:
    """Short display text of an encoded arg ("" for none)."""
    return "" if arg is None else _short(_value(arg))


def const_value(e: Entry) -> Any:
    """The value of a Const entry (None for any other node)."""
    arg = e["arg"]
    if e["op"] != Ops.CONST.value or not isinstance(arg, dict) or "ConstArg" not in arg:
        return None
    return arg["ConstArg"].get("value")


def group_of(op: str) -> str | None:
    """SPEC's colour group of an op spelled as in the trace format; None for the ungrouped ops."""
    g = GroupOp.group_of(Ops(op))
    return None if g == "Other" else g


def axis_type_of(e: Entry) -> str | None:
    """The AxisType name of a Range entry (None for other nodes)."""
    arg = e["arg"]
    if e["op"] != Ops.RANGE.value or not isinstance(arg, dict) or "RangeArg" not in arg:
        return None
    t = arg["RangeArg"].get("type")
    return t.get("AxisType") if isinstance(t, dict) else None


def colour_of(e: Entry) -> str:
    """Fill colour: a Range's AxisType colour, else its op group's colour."""
    t = axis_type_of(e)
    if t is not None and t in AxisType.__members__:
        return AxisType[t].colour
    g = group_of(e["op"])
    return OTHER_COLOUR if g is None else GroupOp.Colour[g]


def props(e: Entry) -> str:
    """A node's dtype and shape as a diff shows them: "float32(16,16)"."""
    dims = e.get("shape")
    dtype = e["dtype"] or ""
    return dtype if not dims else f"{dtype}({','.join(str(d) for d in dims)})"


def label(nid: str, node: Lookup) -> str:
    """How a diff names a node: a leaf by op and arg ("Const 16", "Range r0 LOOP"), any other by op and the start
    of its id ("Add#3fa2"), which the UI links to the node."""
    e = node(nid)
    if not e["src"] or e["op"] == Ops.RANGE.value:
        arg = arg_text(e["arg"])
        return f"{e['op']} {arg}" if arg else e["op"]
    return f"{e['op']}#{nid[:4]}"


MANY_SOURCES = 64  # a node with more sources (a Linear program) is named in a diff by its count, not a paragraph


def node_text(nid: str, node: Lookup) -> str:
    """One line for a node in a diff: op, dtype and shape, arg, and its sources in order by label."""
    e = node(nid)
    arg = arg_text(e["arg"])
    srcs = ", ".join(label(s, node) for s in e["src"]) if len(e["src"]) <= MANY_SOURCES else \
        f"{len(e['src'])} sources: the {'listing' if e['op'] == Ops.LINEAR.value else 'inspector'} shows them"
    tag = "" if e.get("tag") is None else f" tag={e['tag']!r}"  # as uop/printer.py shows it (a pass's mark)
    return f"{e['op']}:{props(e)}" + (f" {arg}" if arg else "") + tag + (f" ({srcs})" if srcs else "")


def linear_listing(instructions: list[str], node: Lookup) -> str:
    """One numbered line per instruction of a Linear program; operands are `%n`, the latest instruction n before
    it that computed the operand (an instruction may appear twice, e.g. a register's load after a later store)."""
    number: dict[str, int] = {}
    width = len(str(max(len(instructions) - 1, 0)))
    lines = []
    for i, nid in enumerate(instructions):
        e = node(nid)
        ops = " ".join(f"%{number[s]}" if s in number else node(s)["op"] for s in e["src"])
        lines.append(f"{i:>{width}}  {e['op']:<10} {props(e):<14} {ops:<16} {arg_text(e['arg'])}".rstrip())
        number[nid] = i
    return "\n".join(lines)
