"""The trace document's identity (format name, version) and its validation.

Readers of a trace (the CLI, the server, the widget) get a document from a file someone else wrote, so every
structural problem is reported as a `TraceFormatError` that names where in the document it is and why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from uopviz.dtype import DTypeError, dtypes
from uopviz.trace.errors import TraceFormatError
from uopviz.trace.nodes import Node
from uopviz.trace.serialize import decode
from uopviz.trace.steps import TraceStep
from uopviz.uop.ops import Ops
from uopviz.uop.spec import ArgError, check_arg

FORMAT = "uopviz-trace"
VERSION = 1

_OP_NAMES = frozenset(o.value for o in Ops)
__all__ = ["FORMAT", "VERSION", "TraceFormatError", "check_document", "check_profile", "check_size", "max_bytes",
           "parse"]


def max_bytes() -> int:
    """The largest trace document read: `UOPVIZ_MAX_TRACE_MB` megabytes (default 256). Reading one takes about
    three times its size in memory and a second per 8 MB, so a larger file is refused before it is read."""
    text = os.environ.get("UOPVIZ_MAX_TRACE_MB", "").strip()
    try:
        mb = float(text) if text else 256.0
    except ValueError:
        raise TraceFormatError(f"UOPVIZ_MAX_TRACE_MB must be a number of megabytes, got {text!r}") from None
    return int(mb * 1e6)


def check_size(size: int, what: str) -> None:
    """TraceFormatError for a document over max_bytes(), saying how to read it anyway."""
    if size > (limit := max_bytes()):
        raise TraceFormatError(f"{what} is {size / 1e6:.1f} MB, over the {limit / 1e6:g} MB uopviz reads as a trace; "
                               "set UOPVIZ_MAX_TRACE_MB to read it anyway")


def parse(text: str | bytes) -> dict[str, Any]:
    """The checked document in `text` (JSON)."""
    check_size(len(text), "the document")
    try:
        doc = json.loads(text, object_hook=_shared_strings())
    except ValueError as e:  # JSONDecodeError, or bytes that are not UTF-8/16/32
        raise TraceFormatError(f"not a uopviz trace: invalid JSON ({e})") from None
    except RecursionError:
        raise TraceFormatError("not a uopviz trace: its JSON is nested too deeply") from None
    check_document(doc)
    return doc


def _shared_strings() -> Callable[[dict[str, Any]], dict[str, Any] | Node | TraceStep]:
    """A json object_hook making equal strings one object, equal node shapes one list, and node entries Nodes.
    JSON parsing makes a new object for each occurrence, and a trace names each node id many times (the node
    table's keys, sources, steps' added lists, passes) and its ~100k nodes have a few hundred shapes, so without it
    a loaded trace took about twice the memory, and as freed fragments its process kept it; an entry's dict is
    likewise freed at once, its Node kept (the parse reuses the dict's memory for the next entry). A loaded
    trace's entries are read, never changed (a replay's rebuilt entry is a new Node), so sharing a shape list is
    safe."""
    seen: dict[str, str] = {}
    shapes: dict[tuple[Any, ...], list[Any]] = {}

    def share(obj: dict[str, Any]) -> dict[str, Any] | Node | TraceStep:
        for k, v in obj.items():
            if type(v) is str:
                obj[k] = seen.setdefault(v, v)
            elif type(v) is list:
                for i, x in enumerate(v):
                    if type(x) is str:
                        v[i] = seen.setdefault(x, x)
        if "op" in obj and "src" in obj:
            if type(shape := obj.get("shape")) is list:
                obj["shape"] = shapes.setdefault(tuple(shape), shape)
            return Node.from_mapping(obj) or obj
        if "replacement" in obj:
            return TraceStep.from_mapping(obj) or obj
        if len(obj) > 64 and type(next(iter(obj.values()))) is Node:  # the node table: its keys are the ids
            return {seen.setdefault(k, k): v for k, v in obj.items()}
        return obj
    return share


def check_document(doc: Any) -> None:
    """Raise TraceFormatError unless `doc` is a well-formed trace of a version this uopviz reads."""
    try:
        _check_document(doc)
    except RecursionError:  # an arg nested deeper than the decoder recurses
        raise TraceFormatError("not a uopviz trace: a value in it is nested too deeply") from None


def _check_document(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise TraceFormatError(f"not a uopviz trace: expected a JSON object, got {_kind(doc)}")
    if doc.get("format") != FORMAT:
        got = "missing" if "format" not in doc else repr(doc["format"])
        raise TraceFormatError(f"not a uopviz trace: 'format' is {got}, expected {FORMAT!r}")
    version = _get(doc, "version", int, "trace")
    if version > VERSION:
        raise TraceFormatError(f"trace version {version} is newer than this uopviz supports ({VERSION}); "
                               "upgrade uopviz")
    if version < 1:
        raise TraceFormatError(f"trace version {version} is invalid (versions start at 1)")
    _get(doc, "uopviz_version", str, "trace")
    nodes = _get(doc, "nodes", dict, "trace")
    for nid, entry in nodes.items():
        _check_node(nodes, nid, entry)
    rules = _get(doc, "rules", list, "trace")
    for i, rule in enumerate(rules):
        where = f"rules[{i}]"
        _get(_obj(rule, where), "location", str, where)
        _get(rule, "text", str, where)
    for c, ctx in enumerate(_get(doc, "contexts", list, "trace")):
        where = f"contexts[{c}]"
        _get(_obj(ctx, where), "name", str, where)
        _get(ctx, "kind", str, where)
        if "opts" in ctx:  # optional: traces saved before uopviz 0.2 have none
            for k, opt in enumerate(_get(ctx, "opts", list, where)):
                _obj(opt, f"{where}.opts[{k}]")
        if "stack" in ctx:  # optional: the frames that made the context (older traces have none)
            for k, frame in enumerate(_get(ctx, "stack", list, where)):
                _check_frame(frame, f"{where}.stack[{k}]")
        for p, pas in enumerate(_get(ctx, "passes", list, where)):
            _check_pass(nodes, len(rules), pas, p, f"{where}.passes[{p}]")
    _check_origins(nodes, doc)
    if "profiles" in doc:  # optional: uopviz.profile() blocks that ended while the trace recorded
        for k, prof in enumerate(_get(doc, "profiles", list, "trace")):
            check_profile(prof, f"profiles[{k}]")


def check_profile(doc: Any, where: str = "profile") -> None:
    """TraceFormatError unless `doc` is a profile's document: `wall_s`, `roofs` (device -> `gflops`, `gbs`) and
    `launches` (each `kernel`, `device`, `ast`, `time_s`, `device_s`, `flops`, `bytes`, `line`), times and counts
    >= 0."""
    _nonnegative(_obj(doc, where), "wall_s", (int, float), where)
    for device, roof in _get(doc, "roofs", dict, where).items():
        at = f"{where}.roofs[{device!r}]"
        for key in ("gflops", "gbs"):
            if _nonnegative(_obj(roof, at), key, (int, float), at) == 0:
                raise TraceFormatError(f"{at}.{key}: a roof must be > 0")
    for i, launch in enumerate(_get(doc, "launches", list, where)):
        at = f"{where}.launches[{i}]"
        _get(_obj(launch, at), "kernel", str, at)
        if _get(launch, "device", str, at) not in doc["roofs"]:
            raise TraceFormatError(f"{at}.device: {launch['device']!r} has no roofs")
        _get(launch, "ast", (str, type(None)), at)
        _nonnegative(launch, "time_s", (int, float), at)
        _nonnegative(launch, "device_s", (int, float), at)
        _nonnegative(launch, "flops", int, at)
        _nonnegative(launch, "bytes", int, at)
        if (line := _get(launch, "line", (dict, type(None)), at)) is not None:
            _check_frame(line, f"{at}.line")
        made = launch.get("origin")  # optional: profiles before origins were noted have none
        while made is not None:
            _check_frame(_obj(made, f"{at}.origin"), f"{at}.origin")
            _get(made, "op", str, f"{at}.origin")
            made = _get(made, "grad_of", (dict, type(None)), f"{at}.origin")


def _check_origins(nodes: dict[str, Any], doc: dict[str, Any]) -> None:
    """The optional `origins` (each a frame with the Tensor `op` and `grad_of`: the index of the origin it is a
    gradient of, or null) and `node_origins` (node id -> origin index)."""
    if "origins" not in doc and "node_origins" not in doc:
        return
    made = _get(doc, "origins", list, "trace")
    for k, o in enumerate(made):
        where = f"origins[{k}]"
        _check_frame(o, where)
        _get(o, "op", str, where)
        g = _get(o, "grad_of", (int, type(None)), where)
        if g is not None and (isinstance(g, bool) or not 0 <= g < len(made)):
            raise TraceFormatError(f"{where}.grad_of: {g!r} is not an index of origins")
    for nid, k in _get(doc, "node_origins", dict, "trace").items():
        if nid not in nodes:
            raise TraceFormatError(f"node_origins: {nid!r} is not a node of the trace")
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(made):
            raise TraceFormatError(f"node_origins[{nid!r}]: {k!r} is not an index of origins")


def _check_frame(frame: Any, where: str) -> None:
    """A frame of the user's code, as recorder.frames() writes it."""
    for key, kind in (("file", str), ("line", int), ("function", str), ("code", str)):
        _get(_obj(frame, where), key, kind, where)


def _nonnegative(obj: dict[str, Any], key: str, types: type | tuple[type, ...], where: str) -> Any:
    v = _get(obj, key, types, where)
    if not 0 <= v < float("inf"):
        raise TraceFormatError(f"{where}.{key}: expected a finite number >= 0, got {v!r}")
    return v


def _check_node(nodes: dict[str, Any], nid: str, entry: Any) -> None:
    where = f"nodes[{nid!r}]"
    node = entry if isinstance(entry, Node) else Node.from_mapping(_obj(entry, where))
    if node is None:
        missing = next(k for k in ("op", "dtype", "shape", "arg", "src", "tag") if k not in entry)
        raise TraceFormatError(f"{where}: missing field {missing!r}")
    op = _typed(node.op, "op", str, where)
    if op not in _OP_NAMES:
        raise TraceFormatError(f"{where}.op: unknown op {op!r}")
    if (dtype := _typed(node.dtype, "dtype", (str, type(None)), where)) is not None:
        try:
            dtypes.from_name(dtype)
        except DTypeError:
            raise TraceFormatError(f"{where}.dtype: unknown dtype {dtype!r}") from None
    for i, d in enumerate(_typed(node.shape, "shape", (list, type(None)), where) or ()):
        if isinstance(d, str):
            _ref(nodes, d, f"{where}.shape[{i}]")
        elif not isinstance(d, int) or isinstance(d, bool):
            raise TraceFormatError(f"{where}.shape[{i}]: expected an int or a node id, got {_kind(d)}")
    device = node.get("device")  # optional: derived, stored since uopviz's multi-device support
    if not (device is None or isinstance(device, str) or (isinstance(device, list) and device
                                                           and all(isinstance(d, str) for d in device))):
        raise TraceFormatError(f"{where}.device: expected a device name or a list of them, got {_kind(device)}")
    _check_arg(Ops(op), node.arg, where)
    for i, s in enumerate(node.src if type(node.src) is tuple else _typed(node.src, "src", list, where)):
        _ref(nodes, s, f"{where}.src[{i}]")


def _check_arg(op: Ops, arg: Any, where: str) -> None:
    """The arg must be one this op can have (spec.check_arg): a file is data, so a name, size or value in it that
    could reach generated source is refused here. Args kept only as text (types uopviz could not encode) cannot
    be rebuilt into nodes, so they are left for display."""
    if isinstance(arg, dict) and list(arg) == ["repr"]:
        return
    try:
        check_arg(op, decode(arg))
    except TraceFormatError as e:
        raise TraceFormatError(f"{where}.arg: {e}") from None
    except ArgError as e:
        raise TraceFormatError(f"{where}.arg: not a valid {op.value} arg: {e}") from None


def _check_pass(nodes: dict[str, Any], n_rules: int, pas: Any, index: int, where: str) -> None:
    _get(_obj(pas, where), "name", str, where)
    _get(pas, "stage", (str, type(None)), where)
    if _get(pas, "depth", int, where) < 0:
        raise TraceFormatError(f"{where}.depth: must be >= 0")
    parent = _get(pas, "parent", (int, type(None)), where)
    if parent is not None and not 0 <= parent < index:
        raise TraceFormatError(f"{where}.parent: {parent} is not an earlier pass of this context")
    _ref(nodes, _get(pas, "input", str, where), f"{where}.input")
    if (out := _get(pas, "output", (str, type(None)), where)) is not None:
        _ref(nodes, out, f"{where}.output")
    _get(pas, "error", (str, type(None)), where)
    _get(pas, "time_ns", int, where)
    for s, entry in enumerate(_get(pas, "steps", list, where)):
        at = f"{where}.steps[{s}]"
        step = entry if isinstance(entry, TraceStep) else TraceStep.from_mapping(_obj(entry, at))
        if step is None:  # a field missing, or an `added` that is not a list
            missing = next((k for k in ("rule", "match", "replacement", "time_ns", "added") if k not in entry), None)
            raise TraceFormatError(f"{at}: missing field {missing!r}" if missing is not None else
                                   f"{at}.added: expected array, got {_kind(entry['added'])}")
        rule = _typed(step.rule, "rule", int, at)
        if not 0 <= rule < n_rules:
            raise TraceFormatError(f"{at}.rule: {rule} is not an index into 'rules' ({n_rules} rules)")
        _ref(nodes, _typed(step.match, "match", str, at), f"{at}.match")
        _ref(nodes, _typed(step.replacement, "replacement", str, at), f"{at}.replacement")
        _typed(step.time_ns, "time_ns", int, at)
        for i, a in enumerate(step.added):
            _ref(nodes, a, f"{at}.added[{i}]")


def _obj(x: Any, where: str) -> dict[str, Any]:
    if not isinstance(x, dict):
        raise TraceFormatError(f"{where}: expected an object, got {_kind(x)}")
    return x


def _get(obj: dict[str, Any], key: str, types: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise TraceFormatError(f"{where}: missing field {key!r}")
    return _typed(obj[key], key, types, where)


def _typed(v: Any, key: str, types: type | tuple[type, ...], where: str) -> Any:
    """v, the value of field `key`, if it is of one of `types` (a bool is not an int here)."""
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(v, allowed) or (isinstance(v, bool) and bool not in allowed):
        names = " or ".join("null" if t is type(None) else _JSON_NAME.get(t, t.__name__) for t in allowed)
        raise TraceFormatError(f"{where}.{key}: expected {names}, got {_kind(v)}")
    return v


def _ref(nodes: dict[str, Any], nid: Any, where: str) -> None:
    if not isinstance(nid, str):
        raise TraceFormatError(f"{where}: expected a node id (string), got {_kind(nid)}")
    if nid not in nodes:
        raise TraceFormatError(f"{where}: node id {nid!r} is not in the node table")


_JSON_NAME = {dict: "object", list: "array", str: "string", int: "integer", float: "number", bool: "boolean"}


def _kind(x: Any) -> str:
    return "null" if x is None else _JSON_NAME.get(type(x), type(x).__name__)
