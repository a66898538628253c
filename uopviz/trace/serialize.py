"""UOp args and tags to JSON and back.

One canonical encoder serves both the trace document and the content ids, so an arg has exactly one JSON
spelling. JSON scalars and lists stand for themselves (a list is a tuple); everything else is a one-key object
naming its kind: `{"dtype": "int32"}`, `{"Ops": "Add"}`, `{"AxisType": "LOOP"}`, `{"AddrSpace": "GLOBAL"}`,
`{"ConstArg": {"value": 1, "dtype": {"dtype": "int32"}}}` (any class in ARG_TYPES), `{"float": "nan"}`
(non-finite floats, which JSON lacks), `{"bytes": base64}`, and `{"repr": text}` for a type this module does
not know (kept readable, but it cannot be rebuilt).
"""

from __future__ import annotations

import base64
import enum
import math
from typing import Any

from uopviz.dtype import DType, DTypeError, dtypes
from uopviz.trace.errors import TraceFormatError
from uopviz.uop.ops import ARG_TYPES, AddrSpace, AxisType, Ops

_ENUMS: dict[str, type[enum.Enum]] = {c.__name__: c for c in (Ops, AxisType, AddrSpace)}
_ARGS: dict[str, type] = {c.__name__: c for c in ARG_TYPES}
_ARG_CLASSES = frozenset(ARG_TYPES)


def encode(v: Any) -> Any:
    """The canonical JSON value of an arg or tag."""
    if v is None or isinstance(v, (bool, str)):
        return v
    t = type(v)
    if t is int:
        return v
    if t is float:
        return v if math.isfinite(v) else {"float": repr(v)}
    if t is tuple:
        return [encode(x) for x in v]
    if t in _ARG_CLASSES:
        return {t.__name__: {f: encode(x) for f, x in zip(v._fields, v, strict=True)}}
    if t is DType:
        return {"dtype": v.name}
    if isinstance(v, enum.Enum) and _ENUMS.get(t.__name__) is t:
        return {t.__name__: v.value if t is Ops else v.name}
    if isinstance(v, bytes):
        return {"bytes": base64.b64encode(v).decode("ascii")}
    return {"repr": f"{t.__module__}.{t.__qualname__}: {v!r}"}


def decode(j: Any) -> Any:
    """The Python value of an encoded arg or tag; TraceFormatError if it cannot be rebuilt."""
    if j is None or isinstance(j, (bool, int, float, str)):
        return j
    if isinstance(j, list):
        return tuple(decode(x) for x in j)
    if isinstance(j, dict) and len(j) == 1:
        ((kind, v),) = j.items()
        try:
            if kind == "dtype":
                return dtypes.from_name(v)
            if kind == "float" and v in ("nan", "inf", "-inf"):
                return float(v)
            if kind == "bytes":
                return base64.b64decode(v, validate=True)
            if kind == "Ops":
                return Ops(v)
            if kind in _ENUMS:
                return _ENUMS[kind][v]
            if kind in _ARGS and isinstance(v, dict):
                return _ARGS[kind](**{f: decode(x) for f, x in v.items()})
            if kind == "repr":
                raise TraceFormatError(f"an arg stored as text ({v}) cannot be rebuilt")
        except (DTypeError, KeyError, ValueError, TypeError) as e:
            if isinstance(e, TraceFormatError):
                raise
            raise TraceFormatError(f"cannot decode {kind} arg {v!r}: {e}") from None
    raise TraceFormatError(f"cannot decode arg {j!r}")
