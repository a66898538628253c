"""A graph of a trace as Python that rebuilds it: one `UOp(...)` line per node, sources first, args written as
the constructors that make them (`ConstArg(value=16, dtype=dtypes.index)`), so the text pasted into a Python
session builds the very nodes (the same content ids) the trace holds. It is written from the node table's encoded
args, never by evaluating them."""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable
from typing import Any

from uopviz.dtype import DTypeError, dtypes
from uopviz.trace.errors import TraceFormatError
from uopviz.uop.ops import ARG_TYPES, AddrSpace, AxisType, Ops

Entry = dict[str, Any]
_ARGS = {c.__name__ for c in ARG_TYPES}
_ENUMS = {"AxisType": AxisType, "AddrSpace": AddrSpace}


class _Writer:
    """Python expressions for encoded args, noting which names they need imported."""

    def __init__(self) -> None:
        self.ops_names: set[str] = {"Ops", "UOp"}
        self.dtypes = False
        self.base64 = False

    def value(self, j: Any) -> str:
        if j is None or isinstance(j, (bool, int, str)):
            return repr(j)
        if isinstance(j, float):
            return repr(j) if math.isfinite(j) else f'float("{j!r}")'
        if isinstance(j, list):
            return "(" + ", ".join(self.value(x) for x in j) + ("," if len(j) == 1 else "") + ")"
        if isinstance(j, dict) and len(j) == 1:
            ((kind, v),) = j.items()
            if kind == "dtype" and isinstance(v, str):
                return self._dtype(v)
            if kind == "Ops" and isinstance(v, str):
                return f"Ops.{Ops(v).name}"
            if kind in _ENUMS and isinstance(v, str) and v in _ENUMS[kind].__members__:
                self.ops_names.add(kind)
                return f"{kind}.{v}"
            if kind == "float" and v in ("nan", "inf", "-inf"):
                return f'float("{v}")'
            if kind == "bytes" and isinstance(v, str):
                self.base64 = True
                return f'base64.b64decode("{v}")'
            if kind in _ARGS and isinstance(v, dict):
                self.ops_names.add(kind)
                return f"{kind}(" + ", ".join(f"{f}={self.value(x)}" for f, x in v.items()) + ")"
            if kind == "repr":
                raise TraceFormatError(f"an arg stored as text ({v}) cannot be written as Python")
        raise TraceFormatError(f"cannot write arg {j!r} as Python")

    def _dtype(self, name: str) -> str:
        try:
            dt = dtypes.from_name(name)
        except DTypeError as e:
            raise TraceFormatError(f"unknown dtype {name!r}: {e}") from None
        self.dtypes = True
        return f"dtypes.{name}" if name.isidentifier() and getattr(dtypes, name, None) == dt \
            else f'dtypes.from_name("{name}")'

    def imports(self) -> list[str]:
        lines = ["import base64"] if self.base64 else []
        if self.dtypes:
            lines.append("from uopviz.dtype import dtypes")
        lines.append(f"from uopviz.uop.ops import {', '.join(sorted(self.ops_names))}")
        return lines


def python_source(order: list[str], node: Callable[[str], Entry]) -> str:
    """Python rebuilding the graph whose ids are `order` (sources before users; the last is the root, bound to
    `root`). TraceFormatError for an arg that was stored only as text."""
    w = _Writer()
    names: dict[str, str] = {}
    body = []
    for nid in order:
        e = node(nid)
        name = _name(e["op"], len(names))
        names[nid] = name
        src = ", ".join(names[s] for s in e["src"]) + ("," if len(e["src"]) == 1 else "")
        parts = [f"Ops.{Ops(e['op']).name}", f"({src})"]
        if e["arg"] is not None or e["tag"] is not None:
            parts.append(w.value(e["arg"]))
        if e["tag"] is not None:
            parts.append(f"tag={w.value(e['tag'])}")
        body.append(f"{name} = UOp({', '.join(parts)})")
    body.append(f"root = {names[order[-1]]}")
    return "\n".join([*w.imports(), "", *body]) + "\n"


def _name(op: str, n: int) -> str:
    """A variable name for the n-th node: its op in lower case and n (`add12`)."""
    base = "".join(ch for ch in op.lower() if ch.isalnum() or ch == "_") or "node"
    name = f"{base}{n}"
    return f"{name}_" if keyword.iskeyword(name) else name
