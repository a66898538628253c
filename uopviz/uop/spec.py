"""Validation of UOp graphs against SPEC.md: every op's sources, args, dtypes and shapes.

Passes build nodes without checking them (building must stay cheap); tests and debug runs call `validate` on
each pass's output so a malformed node is caught where it was made, not where it later breaks codegen.
`check(u)` validates one node assuming its sources are valid; `validate(root)` checks every node under root,
sources first, so the error names the deepest offending node. The checks run in a fixed order: arity,
arg types, op-specific rules, then the derived properties. Shape rules live only in props.py (a shape that
cannot be derived raises SpecError there); `check` asks for the shape so those errors surface here too.
Most rules are tables keyed by op; the few that need code are small functions registered per op.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import (
    AddrSpace,
    AxisType,
    BufferArg,
    ConstArg,
    GroupOp,
    LoadArg,
    Ops,
    ParamArg,
    RangeArg,
    ReduceArg,
    SliceArg,
    SpecError,
    TensorCore,
    UOp,
    VarArg,
    prod,
)
from uopviz.uop.props import fmt_shape

__all__ = ["ARGS", "ARITY", "SPECIAL_NAME", "ArgError", "SpecError", "check", "check_arg", "is_identifier",
           "load_slots", "validate"]

# ---------------------------------------------------------------- arity: (min, max) sources; None = unbounded
_O = Ops
ARITY: dict[Ops, tuple[int, int | None]] = {
    **dict.fromkeys((_O.BUFFER, _O.CONST, _O.BINARY, _O.SOURCE, _O.DEFINE_VAR), (0, 0)),
    **dict.fromkeys((_O.PARAM, _O.PERMUTE, _O.FLIP, _O.REPLICATED, _O.BITCAST, _O.GETTUPLE, _O.COPY, _O.RANGE,
                     _O.SPECIAL, _O.IF, _O.ENDIF, _O.PREFETCH, _O.RECIP, _O.TRUNC, _O.CAST, _O.NEG, _O.NOT, _O.EXP2,
                     _O.LOG2, _O.SIN, _O.SQRT, *GroupOp.Marker), (1, 1)),
    **dict.fromkeys((_O.RESHAPE, _O.EXPAND, _O.SLICE, _O.END, _O.BIND, _O.ATOMIC_ADD, *GroupOp.Binary, _O.SUB,
                     _O.DIV, _O.CMPGT, _O.CMPGE, _O.CMPLE, _O.CMPEQ, _O.POW, _O.THREEFRY), (2, 2)),
    **dict.fromkeys((_O.PAD, _O.SHRINK, _O.WHERE, _O.MULACC, _O.WMMA), (3, 3)),
    _O.PROGRAM: (2, 3),  # (linear, source) as rendered, then the binary once compiled
    **dict.fromkeys((_O.REDUCE, _O.FUNCTION, _O.CALL, _O.AFTER), (1, None)),
    **dict.fromkeys((_O.STACK, _O.TUPLE, _O.GROUP, _O.SINK, _O.LINEAR, _O.BARRIER, _O.INS, _O.CUSTOM,
                     _O.CUSTOM_FUNCTION), (0, None)),
    _O.INDEX: (2, None), _O.LOAD: (1, 3), _O.STORE: (2, 3),
}


def _arity_text(lo: int, hi: int | None) -> str:
    def n(k: int) -> str:
        return "no sources" if k == 0 else f"{k} source" + ("s" if k > 1 else "")
    if hi is None:
        return f"at least {n(lo)}"
    return n(lo) if lo == hi else f"{lo} to {n(hi)}"


# ---------------------------------------------------------------- arg types
def _is_device(d: Any) -> bool:
    return (isinstance(d, str) and d != "") or (isinstance(d, tuple) and len(d) > 0
                                                and all(isinstance(x, str) and x != "" for x in d))


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _ints(x: Any) -> bool:
    return isinstance(x, tuple) and all(map(_is_int, x))


def _typed(a: Any) -> bool:
    return isinstance(a, tuple) and len(a) >= 2 and isinstance(a[0], str) and isinstance(a[1], DType)


_ANY = ("anything", lambda a: True)
# op -> (what the arg must be, predicate). Ops absent from this table take no arg (arg is None).
# Function/Call/Sink may carry pass metadata (a name, kernel info), so their arg is not constrained; Ins's operands
# are target-specific.
ARGS: dict[Ops, tuple[str, Callable[[Any], bool]]] = {
    _O.BUFFER: ("a BufferArg", lambda a: isinstance(a, BufferArg)),
    _O.PARAM: ("a ParamArg", lambda a: isinstance(a, ParamArg)),
    _O.CONST: ("a ConstArg", lambda a: isinstance(a, ConstArg)),
    _O.BINARY: ("bytes", lambda a: isinstance(a, bytes)),
    _O.SOURCE: ("a str", lambda a: isinstance(a, str)),
    _O.PERMUTE: ("a tuple of ints", _ints),
    _O.FLIP: ("a tuple of bools", lambda a: isinstance(a, tuple) and all(isinstance(x, bool) for x in a)),
    _O.REPLICATED: ("a tuple of ints", _ints),
    _O.SLICE: ("a SliceArg", lambda a: isinstance(a, SliceArg)),
    _O.BITCAST: ("a DType", lambda a: isinstance(a, DType)),
    _O.CAST: ("a DType", lambda a: isinstance(a, DType)),
    _O.REDUCE: ("a ReduceArg", lambda a: isinstance(a, ReduceArg)),
    _O.GETTUPLE: ("an int", _is_int),
    _O.LOAD: ("a LoadArg or None", lambda a: a is None or isinstance(a, LoadArg)),
    _O.COPY: ("a device: a str or a tuple of str", _is_device),
    _O.RANGE: ("a RangeArg", lambda a: isinstance(a, RangeArg)),
    _O.SPECIAL: ("a str", lambda a: isinstance(a, str) and a != ""),
    _O.WMMA: ("a TensorCore", lambda a: isinstance(a, TensorCore)),
    # props.py reads a Custom/Ins dtype from arg[1] when the arg is a tuple
    _O.CUSTOM: ("a format str or a (fmt, dtype, ...) tuple", lambda a: isinstance(a, str) or _typed(a)),
    _O.INS: ("a non-tuple or a (name, dtype, ...) tuple", lambda a: not isinstance(a, tuple) or _typed(a)),
    _O.CUSTOM_FUNCTION: ("a str", lambda a: isinstance(a, str)),
    _O.DEFINE_VAR: ("a VarArg", lambda a: isinstance(a, VarArg)),
    _O.PROGRAM: ("the kernel's name (an identifier)", lambda a: is_identifier(a)),
    **dict.fromkeys((_O.FUNCTION, _O.CALL, _O.SINK), _ANY),
}

# ---------------------------------------------------------------- operand tables
_FLOATS = ("floats", lambda d: d.is_float)
_INTS = ("integers", lambda d: d.is_int)
_INTS_BOOL = ("integers or bool", lambda d: d.is_int or d.is_bool)
_NUMBERS = ("numbers (integers or floats)", lambda d: d.is_int or d.is_float)
# op -> the dtypes its value operands may have
OPERAND_DTYPES: dict[Ops, tuple[str, Callable[[DType], bool]]] = {
    **dict.fromkeys((_O.RECIP, _O.EXP2, _O.LOG2, _O.SIN, _O.SQRT, _O.DIV, _O.POW), _FLOATS),
    **dict.fromkeys((_O.MOD, _O.IDIV, _O.SHL, _O.SHR, _O.THREEFRY), _INTS),
    **dict.fromkeys((_O.XOR, _O.OR, _O.AND), _INTS_BOOL),
    **dict.fromkeys((_O.TRUNC, _O.NEG), _NUMBERS),
}
_ALL = None  # every source
# op -> the sources that must share one dtype
SAME_DTYPE: dict[Ops, tuple[int, ...] | None] = {
    **dict.fromkeys(GroupOp.Binary | {_O.SUB, _O.DIV, _O.CMPGT, _O.CMPGE, _O.CMPLE, _O.CMPEQ, _O.POW,
                                      _O.THREEFRY, _O.WMMA, _O.ATOMIC_ADD, _O.STORE}, (0, 1)),
    _O.WHERE: (1, 2), _O.MULACC: (0, 1, 2), _O.STACK: _ALL,
}
# op -> the sources that must be values (not void)
VALUE_SRCS: dict[Ops, tuple[int, ...] | None] = {
    **dict.fromkeys(GroupOp.Elementwise | {_O.STACK, _O.WMMA, _O.ATOMIC_ADD}, _ALL),
    **dict.fromkeys(GroupOp.Movement - {_O.STACK} | GroupOp.Marker | {_O.REDUCE, _O.LOAD, _O.COPY, _O.AFTER},
                    (0,)),
    _O.STORE: (0, 1),
}
# op -> sources that must be bool
BOOL_SRCS: dict[Ops, tuple[int, ...]] = {_O.WHERE: (0,), _O.IF: (0,), _O.STORE: (2,)}
# op -> sources that must be index scalars (loop bounds and offsets)
INDEX_SRCS: dict[Ops, tuple[int, ...]] = {_O.RANGE: (0,), _O.SPECIAL: (0,), _O.SLICE: (1,)}
# op -> (source, ops it must be one of)
SRC_OPS: dict[Ops, tuple[tuple[int, frozenset[Ops]], ...]] = {
    _O.END: ((1, frozenset({_O.RANGE})),),
    _O.ENDIF: ((0, frozenset({_O.IF})),),
    _O.BIND: ((0, frozenset({_O.DEFINE_VAR})), (1, frozenset({_O.CONST}))),
    _O.FUNCTION: ((0, frozenset({_O.TUPLE})),),
    _O.ATOMIC_ADD: ((0, frozenset({_O.INDEX})),),
    _O.PREFETCH: ((0, frozenset({_O.INDEX})),),
    _O.PROGRAM: ((0, frozenset({_O.LINEAR})), (1, frozenset({_O.SOURCE})), (2, frozenset({_O.BINARY}))),
}
_REDUCE_OPS = frozenset({_O.ADD, _O.MAX, _O.MUL})
# a Store writes into a buffer, seen through views: these ops pass through to src[0]...
_VIEWS = (GroupOp.Movement - {_O.STACK}) | {_O.AFTER}
# ...and the chain must end at one of these (Load and Contiguous make a new buffer)
_STORABLE = frozenset({_O.BUFFER, _O.PARAM, _O.LOAD, _O.CONTIGUOUS})


def _sel(u: UOp, idx: tuple[int, ...] | None) -> list[int]:
    return list(range(len(u.src))) if idx is None else [i for i in idx if i < len(u.src)]


# ---------------------------------------------------------------- arg rules (no sources needed)
class ArgError(ValueError):
    """An op's arg breaks a rule; `rule` names it. check() reports it as a SpecError naming the node; a trace
    reader, which has no node yet, reports it as it is."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
SPECIAL_NAME = re.compile(r"[glt]idx[0-9]")
"""How a hardware id (Special) is named: grid, local or CPU-thread index, and the dimension."""


def is_identifier(name: Any) -> bool:
    """A C identifier of at most 64 characters: the only kind of name an arg may carry into generated source."""
    return isinstance(name, str) and _IDENTIFIER.fullmatch(name) is not None


def _shown(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


ArgRule = Callable[[Any], None]
_ARG_RULES: dict[Ops, list[ArgRule]] = {}


def _arg_rule(*ops: Ops) -> Callable[[ArgRule], ArgRule]:
    def deco(fn: ArgRule) -> ArgRule:
        for op in ops:
            _ARG_RULES.setdefault(op, []).append(fn)
        return fn
    return deco


def _need_dtype(what: str, dt: Any, rule: str) -> None:
    if not isinstance(dt, DType) or dt == dtypes.void:
        raise ArgError(f"{what} must be a non-void DType, got {dt.name if isinstance(dt, DType) else _shown(dt)}",
                       rule)


def _need_addrspace(a: Any, optional: bool) -> None:
    if not (isinstance(a, AddrSpace) or (optional and a is None)):
        raise ArgError(f"addrspace must be an AddrSpace{' or None' if optional else ''}, got {_shown(a)}",
                       "addrspace")


def _need_device(d: Any, optional: bool) -> None:
    if not (_is_device(d) or (optional and d is None)):
        raise ArgError(f"device must be a str or a non-empty tuple of str{' or None' if optional else ''}, "
                       f"got {_shown(d)}", "device")


@_arg_rule(_O.BUFFER)
def _buffer(a: BufferArg) -> None:
    if not _is_int(a.size) or a.size <= 0:
        raise ArgError(f"size must be a positive int, got {_shown(a.size)}", "buffer-size")
    _need_dtype("dtype", a.dtype, "buffer-dtype")
    _need_device(a.device, optional=False)
    _need_addrspace(a.addrspace, optional=False)
    if not _is_int(a.uid) or a.uid < 0:
        raise ArgError(f"uid must be a non-negative int, got {_shown(a.uid)}", "buffer-uid")


@_arg_rule(_O.PARAM)
def _param(a: ParamArg) -> None:
    if not _is_int(a.slot) or a.slot < 0:
        raise ArgError(f"slot must be a non-negative int, got {_shown(a.slot)}", "param-slot")
    _need_dtype("dtype", a.dtype, "param-dtype")
    _need_device(a.device, optional=True)
    _need_addrspace(a.addrspace, optional=True)


@_arg_rule(_O.CONST)
def _const(a: ConstArg) -> None:
    v, dt = a.value, a.dtype
    _need_dtype("dtype", dt, "const-dtype")
    want = dt.python_type()
    if type(v) is not want:
        raise ArgError(f"value {_shown(v)} is {type(v).__name__}, but {dt.name} holds {want.__name__}", "const-type")
    if not (dt.is_float and math.isnan(v)) and dt.normalize(v) != v:
        raise ArgError(f"value {v!r} is not representable in {dt.name}", "const-range")


@_arg_rule(_O.DEFINE_VAR)
def _define_var(a: VarArg) -> None:
    if not is_identifier(a.name):
        raise ArgError(f"name must be an identifier (a letter or _, then letters, digits or _; at most 64), got "
                       f"{_shown(a.name)}", "var-name")
    if not (_is_int(a.min) and _is_int(a.max)) or a.min > a.max:
        raise ArgError(f"range [{_shown(a.min)}, {_shown(a.max)}] must be ints with min <= max", "var-range")


@_arg_rule(_O.SPECIAL)
def _special(a: str) -> None:
    if SPECIAL_NAME.fullmatch(a) is None:
        raise ArgError(f"name must be gidxN, lidxN or tidxN (N a digit: the hardware dimension), got {_shown(a)}",
                       "special-name")


@_arg_rule(_O.RANGE)
def _range_arg(a: RangeArg) -> None:
    if not _is_int(a.idx) or a.idx < 0 or not isinstance(a.type, AxisType):
        raise ArgError(f"RangeArg needs an int idx >= 0 and an AxisType, got {_shown(a)}", "range-arg")


@_arg_rule(_O.REDUCE)
def _reduce_arg(a: ReduceArg) -> None:
    if a.op not in _REDUCE_OPS:
        raise ArgError(f"reduce op must be Add, Max or Mul, got {_shown(a.op)}", "reduce-op")
    if not _ints(a.axes):
        raise ArgError(f"axes must be a tuple of ints, got {_shown(a.axes)}", "reduce-axes")


@_arg_rule(_O.REPLICATED)
def _replicated(a: tuple[int, ...]) -> None:
    if len(set(a)) != len(a):
        raise ArgError(f"axes {a} repeat an axis", "axes-range")


@_arg_rule(_O.CAST, _O.BITCAST)
def _cast(a: DType) -> None:
    _need_dtype("target", a, "cast-dtype")


@_arg_rule(_O.SLICE)
def _slice_arg(a: SliceArg) -> None:
    if not _is_int(a.size) or a.size <= 0:
        raise ArgError(f"size must be a positive int, got {_shown(a.size)}", "slice-size")
    _need_dtype("dtype", a.dtype, "slice-dtype")


@_arg_rule(_O.LOAD)
def _load_arg(a: LoadArg | None) -> None:
    if a is not None:
        _need_device(a.device, optional=True)
        _need_addrspace(a.addrspace, optional=True)


def check_arg(op: Ops, arg: Any) -> None:
    """Raise ArgError unless arg is a valid arg of op: its type (ARGS), then its fields (names are identifiers,
    sizes positive, values of their dtype). Needs no sources, so a trace reader runs it on every node it reads:
    an arg from a file reaches a renderer only through this check."""
    if op in ARGS:
        what, ok = ARGS[op]
        if not ok(arg):
            raise ArgError(f"arg must be {what}, got {_shown(arg)}", "arg-type")
    elif arg is not None:
        raise ArgError(f"takes no arg, got {_shown(arg)}", "arg-type")
    for rule in _ARG_RULES.get(op, ()):
        rule(arg)


# ---------------------------------------------------------------- op-specific rules (with sources)
Rule = Callable[[UOp], None]
_RULES: dict[Ops, list[Rule]] = {}


def _rule(*ops: Ops) -> Callable[[Rule], Rule]:
    def deco(fn: Rule) -> Rule:
        for op in ops:
            _RULES.setdefault(op, []).append(fn)
        return fn
    return deco


@_rule(_O.BIND)
def _bind(u: UOp) -> None:
    var, val = u.src
    if val.dtype != var.dtype:
        raise SpecError(u, f"value has dtype {val.dtype.name}, the variable {var.dtype.name}", 1,
                        rule="bind-dtype")
    if not var.arg.min <= val.arg.value <= var.arg.max:
        raise SpecError(u, f"value {val.arg.value} is outside {var.arg.name}'s range [{var.arg.min}, "
                           f"{var.arg.max}]", 1, rule="bind-range")


@_rule(_O.RANGE)
def _range(u: UOp) -> None:
    if u.src[0].op is Ops.CONST and u.src[0].arg.value < 0:
        raise SpecError(u, f"bound {u.src[0].arg.value} is negative", 0, rule="range-bound")


@_rule(_O.REDUCE)
def _reduce(u: UOp) -> None:
    axes = u.arg.axes
    if len(u.src) > 1:
        for i, r in enumerate(u.src[1:], 1):
            if r.op is not Ops.RANGE:
                raise SpecError(u, f"reduces over ranges, but source {i} is a {r.op.value}", i, rule="reduce-ranges")
        if axes:
            raise SpecError(u, f"reduces over ranges and axes {axes} at once; use one or the other",
                            rule="reduce-ranges")
    elif len(set(axes)) != len(axes) or (u.src[0].ndim and len({a % u.src[0].ndim for a in axes}) != len(axes)):
        raise SpecError(u, f"axes {axes} repeat an axis", rule="reduce-axes")


@_rule(_O.SLICE)
def _slice(u: UOp) -> None:
    a: SliceArg = u.arg
    t, off = u.src
    n = prod(t.shape)
    if off.op is Ops.CONST and _is_int(n):
        o = off.arg.value
        have, need = n * t.dtype.itemsize, o * t.dtype.itemsize + a.size * a.dtype.itemsize
        if o < 0 or need > have:
            raise SpecError(u, f"{a.size} x {a.dtype.name} at offset {o} x {t.dtype.name} needs {need} bytes, "
                               f"but the source has {have}", rule="slice-bounds")


def load_slots(u: UOp) -> tuple[int | None, int | None]:
    """Which sources of a Load (buf, alt?, gate?) are its alt and its gate (None: absent). A lone extra source is
    the alt if it has buf's dtype, else the gate."""
    if len(u.src) == 3:
        return 1, 2
    if len(u.src) == 2:
        return (1, None) if u.src[1].dtype == u.src[0].dtype else (None, 1)
    return None, None


@_rule(_O.LOAD)
def _load(u: UOp) -> None:
    buf = u.src[0]
    a, g = load_slots(u)
    if a is not None and u.src[a].dtype != buf.dtype:
        raise SpecError(u, f"alt has dtype {u.src[a].dtype.name}, buf {buf.dtype.name}", a, rule="load-alt")
    if g is not None and u.src[g].dtype != dtypes.bool:
        raise SpecError(u, f"gate must be bool, got {u.src[g].dtype.name}", g, rule="load-gate")
    for i, s in enumerate(u.src[1:], 1):
        if s.shape not in (buf.shape, ()):
            raise SpecError(u, f"{fmt_shape(s.shape)} must be () or buf's {fmt_shape(buf.shape)}", i,
                            rule="load-shape")


@_rule(_O.STORE)
def _store(u: UOp) -> None:
    buf, val = u.src[0], u.src[1]
    b = buf
    while b.op in _VIEWS and b.src:
        b = b.src[0]
    if b.op not in _STORABLE:
        raise SpecError(u, f"cannot store into {b.op.value}; the target must be a Buffer, Param or Load "
                           "(seen through Index/After/movement views)", 0, rule="store-target")
    if buf.shape != val.shape:
        raise SpecError(u, f"buf.shape {fmt_shape(buf.shape)} != val.shape {fmt_shape(val.shape)}", 1,
                        rule="store-shape")
    if len(u.src) > 2 and u.src[2].shape not in (buf.shape, ()):
        raise SpecError(u, f"gate {fmt_shape(u.src[2].shape)} must be () or buf's {fmt_shape(buf.shape)}", 2,
                        rule="store-shape")


@_rule(_O.PREFETCH)
def _prefetch(u: UOp) -> None:
    """A hint that one element of memory will be read soon: one scalar address into a Buffer or Param."""
    idx = u.src[0]
    if idx.shape != ():
        raise SpecError(u, f"addresses one element, but the Index has shape {fmt_shape(idx.shape)}", 0,
                        rule="prefetch-address")
    b = idx.src[0].memory()
    if b.op not in (_O.BUFFER, _O.PARAM):
        raise SpecError(u, f"prefetches from a Buffer or Param, not a {b.op.value}", 0, rule="prefetch-address")


@_rule(_O.LINEAR)
def _linear(u: UOp) -> None:
    """An instruction list in execution order: each instruction after every one it reads, constants included (a
    runtime runs the list as it is). An instruction may be listed twice: equal instructions are one node."""
    done: set[UOp] = set()
    for k, x in enumerate(u.src):
        for s in x.src:
            if s not in done:
                raise SpecError(u, f"instruction {k} ({x.op.value}) reads a {s.op.value} that no instruction before "
                                   "it computes", k, rule="linear-order")
        done.add(x)


@_rule(_O.GROUP)
def _group(u: UOp) -> None:
    for i, s in enumerate(u.src):
        if s.dtype != dtypes.void:
            raise SpecError(u, f"merges side effects only, but source {i} is a {s.dtype.name} value", i,
                            rule="group-void")


@_rule(*GroupOp.Elementwise)
def _same_device(u: UOp) -> None:
    devs = [(i, s.device) for i, s in enumerate(u.src) if s.device is not None]
    for i, d in devs[1:]:
        if d != devs[0][1]:
            raise SpecError(u, f"sources on different devices: {devs[0][1]!r} vs {d!r}; Copy one first", i,
                            rule="device-mismatch")


@_rule(_O.INDEX)
def _index(u: UOp) -> None:
    for i, s in enumerate(u.src[1:], 1):
        if not s.dtype.is_int:
            raise SpecError(u, f"index {i - 1} has dtype {s.dtype.name}; indices must be integers", i,
                            rule="index-dtype")


def _params_of(body: UOp) -> list[UOp]:
    """Params a Function body refers to, not looking into nested Function/Call bodies (their Params are theirs)."""
    seen: set[UOp] = {body}
    stack, out = [body], []
    while stack:
        n = stack.pop()
        if n.op is Ops.PARAM:
            out.append(n)
        for s in n.src[1:] if n.op in (Ops.FUNCTION, Ops.CALL) and n is not body else n.src:
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return out


@_rule(_O.FUNCTION)
def _function(u: UOp) -> None:
    args = u.src[1:]
    by_slot: dict[int, UOp] = {}
    for p in sorted(_params_of(u.src[0]), key=lambda p: (p.arg.slot, fmt_shape(p.shape), p.dtype.name)):
        k = p.arg.slot
        if k in by_slot:
            q = by_slot[k]
            raise SpecError(u, f"two different Params share slot {k}: {q.dtype.name}{fmt_shape(q.shape)} and "
                               f"{p.dtype.name}{fmt_shape(p.shape)}", 0, rule="param-slots")
        by_slot[k] = p
    for k, p in by_slot.items():
        if k >= len(args):
            raise SpecError(u, f"Param slot {k} has no argument ({len(args)} given)", 0, rule="param-slots")
        a = args[k]
        if a.dtype != p.dtype or len(a.shape) != len(p.shape) or \
                any(_is_int(x) and _is_int(y) and x != y for x, y in zip(a.shape, p.shape, strict=True)):
            raise SpecError(u, f"argument {k} is {a.dtype.name}{fmt_shape(a.shape)}, but Param {k} is "
                               f"{p.dtype.name}{fmt_shape(p.shape)}", k + 1, rule="param-args")
    if unread := [k for k in range(len(args)) if k not in by_slot]:  # its schedule is made from the body alone
        raise SpecError(u, f"argument {unread[0]} is read by no Param of the body (a Function's arguments are "
                           "exactly its Params)", unread[0] + 1, rule="param-args")


# ---------------------------------------------------------------- driver
def _check_tables(u: UOp) -> None:
    """The table-driven source rules: value-ness, dtype classes, shared dtypes, bools, index scalars, src ops."""
    op, src = u.op, u.src
    for i in _sel(u, VALUE_SRCS.get(op, ())):
        if src[i].dtype == dtypes.void:
            raise SpecError(u, "source must be a value, not void", i, rule="value-src")
    if (kind := OPERAND_DTYPES.get(op)) is not None:
        for i, s in enumerate(src):
            if not kind[1](s.dtype):
                raise SpecError(u, f"operands must be {kind[0]}, got {s.dtype.name}", i, rule="operand-dtype")
    if op in SAME_DTYPE:
        idx = _sel(u, SAME_DTYPE[op])
        for i in idx[1:]:
            if src[i].dtype != src[idx[0]].dtype:
                raise SpecError(u, f"operands must have the same dtype: {src[idx[0]].dtype.name} vs "
                                   f"{src[i].dtype.name}", i, rule="same-dtype")
    for i in _sel(u, BOOL_SRCS.get(op, ())):
        if src[i].dtype != dtypes.bool:
            what = "condition" if op is Ops.WHERE else "gate"
            raise SpecError(u, f"{what} must be bool, got {src[i].dtype.name}", i, rule="bool-src")
    for i in _sel(u, INDEX_SRCS.get(op, ())):
        if src[i].dtype != dtypes.index or src[i].shape != ():
            raise SpecError(u, f"must be an index scalar, got {src[i].dtype.name} of shape "
                               f"{fmt_shape(src[i].shape)}", i, rule="index-src")
    for i, allowed in SRC_OPS.get(op, ()):
        if i < len(src) and src[i].op not in allowed:  # arity has checked the sources that must be there
            names = " or ".join(sorted(o.value for o in allowed))
            article = "an" if names[0] in "AEIOU" else "a"
            raise SpecError(u, f"source {i} must be {article} {names}, got {src[i].op.value}", i, rule="src-op")


_DERIVED = ("dtype", "shape", "device", "axis")


def check(u: UOp) -> None:
    """Validate one node, assuming its sources are valid. Raises SpecError naming the op, source and rule."""
    if not isinstance(u.op, Ops):
        raise TypeError(f"not a UOp op: {u.op!r}")
    for i, s in enumerate(u.src):
        if not isinstance(s, UOp):
            raise SpecError(u, f"source {i} is a {type(s).__name__}, not a UOp", rule="src-type")
    lo, hi = ARITY[u.op]
    if not lo <= len(u.src) <= (len(u.src) if hi is None else hi):
        raise SpecError(u, f"takes {_arity_text(lo, hi)}, got {len(u.src)}", rule="arity")
    try:
        check_arg(u.op, u.arg)
    except ArgError as e:
        raise SpecError(u, str(e), rule=e.rule) from None
    _check_tables(u)
    for rule in _RULES.get(u.op, ()):
        rule(u)
    for prop in _DERIVED:  # the shape rules (broadcast, reshape sizes, permutations, ...) run here, in props.py
        try:
            getattr(u, prop)
        except SpecError:
            raise
        except Exception as e:  # a malformed node that props.py could not even read
            raise SpecError(u, f"cannot derive {prop}: {type(e).__name__}: {e}", rule="derive") from e


def validate(root: UOp) -> UOp:
    """Check every node under root, sources before users (iterative: deep graphs are fine). Returns root."""
    for u in root.toposort():
        check(u)
    return root
