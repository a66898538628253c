"""One C-style renderer for Linear programs, in the dialect a target names (renderer/dialect.py: C for the CPU,
OpenCL C): the renderer builds the program's structure, the dialect spells what differs between languages.

Index arithmetic is written inline where it is used (it reads like the math), every other value gets a
named variable, so the source maps line by line onto the Linear listing. Integer Idiv and Mod are floor
division and floor modulo (SPEC); C's `/` and `%` truncate, so they are used directly only where the operands'
intervals prove both non-negative, and the floor forms otherwise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from uopviz.codegen.lanes import MASKS, mask_dtype, width
from uopviz.dtype import DType, dtypes
from uopviz.renderer.dialect import CL_TYPES, FP8, Dialect
from uopviz.uop.ops import AddrSpace, Ops, UOp
from uopviz.uop.spec import SPECIAL_NAME, is_identifier


class RenderError(ValueError):
    """The program uses something this dialect cannot express (the message names it)."""


_INFIX = {Ops.ADD: "+", Ops.MUL: "*", Ops.CMPLT: "<", Ops.CMPNE: "!=", Ops.XOR: "^", Ops.OR: "|", Ops.AND: "&",
          Ops.SHL: "<<", Ops.SHR: ">>"}


class _Writer:
    def __init__(self, d: Dialect, name: str, emulated: frozenset[str]) -> None:
        self.d, self.name, self.emulated = d, name, emulated
        self.expr: dict[UOp, str] = {}
        self.lines: list[str] = []
        self.depth = 1
        self.args: list[tuple[int, str]] = []
        self.vars: list[str] = []
        self.used: set[DType] = set()
        self.counts: dict[str, int] = {}
        self.helpers: dict[str, str] = {}
        self.patterns: dict[UOp, str] = {}  # emulated values loaded only for a Wmma: kept as their 16 bits

    def emulates(self, dt: DType) -> bool:
        """Whether dt lives as float in registers and as its 16-bit pattern in memory (noting the helpers used)."""
        if dt.name not in self.emulated:
            return False
        self.helpers[dt.name] = self.d.emulation[dt.name]
        return True

    def type(self, dt: DType) -> str:
        if self.emulates(dt):
            return self.d.types["float32"]
        if dt.name not in self.d.types:
            raise RenderError(f"the {self.d.name} dialect has no type for {dt.name}")
        self.used.add(dt)
        return self.d.types[dt.name]

    def mem_type(self, dt: DType) -> str:
        if self.emulates(dt):
            return self.d.types[dtypes.uint_of(dt).name]
        return self.d.memory_types.get(dt.name) or self.type(dt)

    def literal(self, value: bool | int | float, dt: DType) -> str:
        return literal(value, dtypes.float32 if self.emulates(dt) else dt, self.d)

    def fresh(self, prefix: str) -> str:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return f"{prefix}{n}"

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def define(self, u: UOp, prefix: str, value: str) -> None:
        name = self.fresh(prefix)
        self.line(f"{self.value_type(u)} {name} = {value};")
        self.expr[u] = name

    def value_type(self, u: UOp) -> str:
        """The type of a value: its dtype's, or for a vector (shape (N,)) the vector type of its lanes."""
        return self.vector(_lane_dtype(u), width(u)) if u.shape else self.type(u.dtype)

    def vector(self, dt: DType, n: int, unaligned: bool = False) -> str:
        """The dialect's n-lane vector of dt, named as OpenCL names them (declared where the dialect needs it);
        loads and stores go through a variant aligned as the lanes are (memory holds no stricter alignment)."""
        name = f"{CL_TYPES[dt.name]}{n}" + ("_u" if unaligned else "")
        if name not in self.helpers:
            decl = self.d.vector_typedef(name, self.type(dt), n * dt.itemsize, dt.itemsize if unaligned else None)
            if decl is not None:
                self.helpers[name] = decl
        self.type(dt)
        return name

    def splat(self, x: UOp, e: str, like: UOp) -> str:
        """Expression e of x as a vector of like's type and width (a scalar repeated; a vector as it is)."""
        if x.shape:
            return e
        return self.d.splat(self.value_type(like), e, width(like))


# the names the renderer makes up itself: a variable named like one would be shadowed by it, or shadow it
_GENERATED = re.compile(r"(data|ridx|alu|val|acc|temp|cast|pun|wmma|[glt]idx)[0-9]+")


def _name(text: str, what: str) -> str:
    """A name that comes from a node's arg, checked again here (spec.check_arg checks it first), so the source
    holds no text the renderer did not build or check: whatever a graph holds, it cannot write code."""
    if not is_identifier(text):
        raise RenderError(f"{what} {text!r} is not an identifier (a letter or _, then letters, digits or _)")
    return text


def _var_name(u: UOp) -> str:
    name = _name(u.arg.name, "variable name")
    if _GENERATED.fullmatch(name):
        raise RenderError(f"variable name {name!r} is one the renderer gives its own values; rename the variable")
    return name


def literal(value: bool | int | float, dt: DType, d: Dialect) -> str:
    """A constant as the dialect writes it (exact: floats by their shortest round-tripping repr)."""
    if dt.is_bool:
        return "1" if value else "0"
    if dt.is_float:
        if math.isnan(value):
            s = "NAN"
        elif math.isinf(value):
            s = "INFINITY" if value > 0 else "-INFINITY"
        else:
            s = repr(float(value)) + ("f" if dt in (dtypes.float32, dtypes.float16) else "")
        if dt is dtypes.float64 and not math.isfinite(value):
            s = f"(double){s}"
        if dt is dtypes.float16:
            s = f"(({d.types['float16']}){s})"
        return s
    v = int(value)
    suffix = d.int_suffix.get(dt.name, "")
    if dt.name == "int64" and v == dt.min:
        return f"({v + 1}{suffix}-1)"
    if dt.name == "int32" and v == dt.min:
        return f"({v + 1}-1)"
    return f"{v}{suffix}"


def _floor_div(a: str, b: str) -> str:
    return f"(({a})/({b})-((({a})%({b})!=0)&((({a})<0)!=(({b})<0))))"


def _floor_mod(w: _Writer, u: UOp, a: str, b: str) -> str:
    """C's remainder moved to the divisor's sign: b is added where the remainder is nonzero and its sign differs
    from b's. |r| < |b| with opposite signs, so r + b cannot overflow, where ((a%b)+b)%b did for large operands."""
    r = w.fresh("rem")
    w.line(f"{w.type(u.dtype)} {r} = ({a})%({b});")
    return f"({r}+((({r})!=0&&((({r})^({b}))<0))?({b}):0))"


_UNSIGNED = {4: dtypes.uint32, 8: dtypes.uint64}


def _may_overflow(u: UOp) -> bool:
    """Whether a signed 32- or 64-bit Add, Mul or Shl can leave its dtype, by its operands' ranges. C leaves that
    undefined, and GCC takes it never to happen: it assumed x·x >= 0 and folded (x·x) % -7 of an overflowed square
    to -12 (fuzzer, CPU seed 52785). Such an op is rendered in unsigned arithmetic, which wraps as NumPy's does;
    one whose range fits (index-like values) stays plain for the optimizer."""
    dt = u.dtype
    if dt.kind != "i" or dt.itemsize not in _UNSIGNED or u.op not in (Ops.ADD, Ops.MUL, Ops.SHL):
        return False
    bounds = [(x.vmin, x.vmax) for x in u.src]
    if not all(isinstance(v, int) and not isinstance(v, bool) for b in bounds for v in b):
        return True
    (a0, a1), (b0, b1) = bounds
    if u.op is Ops.ADD:
        ends = [a0 + b0, a1 + b1]
    elif u.op is Ops.MUL:
        ends = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
    else:  # a negative value shifted, or a shift past the width, is undefined too
        if a0 < 0 or b0 < 0 or b1 >= 8 * dt.itemsize:
            return True
        ends = [a1 << b1]
    return min(ends) < dt.min or max(ends) > dt.max


def _nonneg(u: UOp) -> bool:
    lo = u.vmin
    return isinstance(lo, (int, float)) and lo >= 0


def _lane_dtype(u: UOp) -> DType:
    """The lane type of a vector: a vector bool is a lane mask (codegen/lanes.py)."""
    if not u.dtype.is_bool:
        return u.dtype
    if (mask := mask_dtype(u)) is None:
        raise RenderError(f"{u.op.value}: a bool vector that is not a lane mask (devectorize splits those)")
    return mask


def _vector_alu(w: _Writer, u: UOp, s: list[str]) -> str:
    """An op on vectors: C vector extensions or OpenCL C; selects by lane masks, casts by conversion."""
    op = u.op
    if op in (Ops.MAX, Ops.WHERE):
        a, b = (u.src[0], u.src[1]) if op is Ops.MAX else (u.src[1], u.src[2])
        x, y = w.splat(a, s[0] if op is Ops.MAX else s[1], u), w.splat(b, s[1] if op is Ops.MAX else s[2], u)
        if op is Ops.MAX:
            m = w.fresh("alu")
            w.line(f"{w.vector(MASKS[u.dtype.itemsize], width(u))} {m} = "
                   f"{f'(({x}>{y})|({x}!={x}))' if u.dtype.is_float else f'({x}>{y})'};")
        elif not u.src[0].shape:
            return f"({s[0]}?{x}:{y})"
        else:
            m = s[0]
        return w.d.select(w.value_type(u), w.vector(MASKS[u.dtype.itemsize], width(u)), x, y, m)
    if u.src[0].dtype.is_bool:  # logic on lane masks: a scalar bool joins them as all ones (-1) or zeros
        s = [e if x.shape else f"(-({e}))" for x, e in zip(u.src, s)]
    if op in (Ops.SHL, Ops.SHR):  # OpenCL C shifts no scalar by a vector: the scalar is repeated first
        s = [w.splat(u.src[0], s[0], u), s[1]]
    if op is Ops.CAST:
        return w.d.convert(s[0], w.value_type(u))
    if op in _INFIX and _may_overflow(u):  # in unsigned lanes, which wrap (as _alu does for a scalar)
        lanes = w.vector(_UNSIGNED[u.dtype.itemsize], width(u))
        left, right = (w.d.vector_bitcast(w.splat(x, e, u), lanes) for x, e in zip(u.src, s))
        return w.d.vector_bitcast(f"({left}{_INFIX[op]}{right})", w.value_type(u))
    return _alu(w, u, s)


def _alu(w: _Writer, u: UOp, s: list[str]) -> str:
    op, dt = u.op, u.src[0].dtype
    if op in _INFIX and not u.shape and _may_overflow(u):
        wide = w.type(_UNSIGNED[u.dtype.itemsize])
        return f"(({w.type(u.dtype)})(({wide})({s[0]}){_INFIX[op]}({wide})({s[1]})))"
    if op in _INFIX:
        return f"({s[0]}{_INFIX[op]}{s[1]})"
    if op in (Ops.IDIV, Ops.MOD):
        if dt.is_float:
            raise RenderError(f"{op.value} on {dt.name}: the front-end builds float floor division from Trunc")
        if (_nonneg(u.src[0]) and _nonneg(u.src[1])) or dt.kind == "u":
            return f"({s[0]}{'/' if op is Ops.IDIV else '%'}{s[1]})"
        return _floor_div(s[0], s[1]) if op is Ops.IDIV else _floor_mod(w, u, s[0], s[1])
    if op is Ops.MAX:  # nan-propagating, like NumPy's maximum and the PYTHON runtime
        nan = f"||{s[0]}!={s[0]}" if dt.is_float else ""
        return f"(({s[0]}>{s[1]}{nan})?{s[0]}:{s[1]})"
    if op is Ops.WHERE:
        return f"({s[0]}?{s[1]}:{s[2]})"
    if op is Ops.RECIP:
        return f"({w.literal(1.0, u.dtype)}/{s[0]})"
    if op is Ops.CAST:
        if dt == dtypes.float64 and w.emulates(u.dtype) and w.d.float32_odd is not None:  # rounded once (dialect)
            w.helpers.setdefault("float32_odd", w.d.float32_odd)
            return f"float32_odd({s[0]})"
        return f"(({w.type(u.dtype)})({s[0]}))"
    if op in w.d.functions:
        if not dt.is_float:
            raise RenderError(f"{op.value} of {dt.name} (cast to a float first)")
        vtype = w.value_type(u) if u.shape else None
        name, helper = w.d.function(op, dt, vtype, width(u) if u.shape else 1)
        if helper is not None:
            w.helpers.setdefault(name, helper)
            s = [w.splat(x, e, u) for x, e in zip(u.src, s)]  # a scalar operand repeated: the helper takes vectors
        return f"{name}({', '.join(s)})"
    raise RenderError(f"the {w.d.name} dialect cannot render {op.value} (instruction selection should have "
                      f"decomposed it)")


def _rounded(w: _Writer, dt: DType, e: str) -> str:
    """e computed in float, rounded to the emulated dt it stands for (as if dt had its own arithmetic)."""
    return f"{dt.name}_value({dt.name}_bits({e}))" if w.emulates(dt) else e


def _bitcast(w: _Writer, u: UOp, x: str) -> None:
    src, dst = u.src[0].dtype, u.dtype
    if u.shape:
        w.define(u, "cast", w.d.vector_bitcast(x, w.value_type(u)))
        return
    if w.emulates(src):
        src, x = dtypes.uint_of(src), f"{src.name}_bits({x})"
    if w.emulates(dst):
        w.define(u, "cast", f"{dst.name}_value({_pun(w, src, dtypes.uint_of(dst), x)})")
    else:
        w.define(u, "cast", _pun(w, src, dst, x))


def _pun(w: _Writer, src: DType, dst: DType, x: str) -> str:
    """x's bits read as dst: the dialect's expression for it (OpenCL's as_T), else a union."""
    if src == dst:
        return x
    if (e := w.d.bitcast(x, w.type(dst))) is not None:
        return e
    tmp = w.fresh("pun")
    w.line(f"union {{ {w.type(src)} a; {w.type(dst)} b; }} {tmp};")
    w.line(f"{tmp}.a = {x};")
    return f"{tmp}.b"


def render(linear: UOp, name: str, d: Dialect, params: Sequence[DType] | None = None,
           emulated: frozenset[str] = frozenset({"bfloat16"})) -> str:
    """The source of kernel `name` for a Linear program in dialect d. `params` are
    the dtypes of every buffer slot the kernel is called with (default: the Params the program uses); a
    slot whose reads were simplified away is still declared, so every caller passes the same arguments.
    `emulated` names the float dtypes the device has no arithmetic for: they are computed in float and rounded
    after every op, and stored as their bit patterns; the fp8s always are (no dialect here has fp8 arithmetic)."""
    w = _Writer(d, _name(name, "kernel name"), (emulated | FP8) & d.emulation.keys())
    uses: dict[UOp, int] = {}
    lanes = [u for u in linear.src if u.op is Ops.SPECIAL and u.arg.startswith("lidx")]
    groups = bool(lanes)  # gidx numbers work-groups
    for u in linear.src:
        for x in u.src:
            uses[x] = uses.get(x, 0) + 1
    fragments, patterns = _fragments(linear)
    for u in linear.src:
        op, s = u.op, [w.expr.get(x, "") for x in u.src]
        if op in (Ops.SINK, Ops.GROUP) or (op is Ops.BARRIER and d.barrier is None) or u in fragments:
            continue
        if u.dtype is dtypes.index and u.shape:
            continue  # lane addresses: a vector access writes them as its base pointer
        if op is Ops.BARRIER:
            w.line(d.barrier)  # type: ignore[arg-type]  # None was skipped above
        elif op is Ops.CONST:
            w.expr[u] = w.literal(u.arg.value, u.dtype)
        elif op is Ops.PARAM:
            w.expr[u] = f"data{u.arg.slot}"
            w.args.append((u.arg.slot, _buffer_decl(w, u.arg.slot, u.arg.dtype, linear)))
        elif op is Ops.DEFINE_VAR:
            w.expr[u] = _var_name(u)
            w.vars.append(w.expr[u])
        elif op is Ops.BUFFER:
            w.expr[u] = _buffer(w, u)
        elif op is Ops.SPECIAL:
            _hardware_id(w, u, s[0], groups)
        elif op is Ops.RANGE:
            nm = f"ridx{u.arg.idx}"
            w.line(f"for (int {nm} = 0; {nm} < {s[0]}; {nm}++) {{")
            w.depth += 1
            w.expr[u] = nm
        elif op is Ops.END:
            w.depth -= 1
            w.line("}")
        elif op is Ops.AFTER:
            w.expr[u] = s[0]
        elif op is Ops.STACK and (shuffle := _shuffle(w, u)) is not None:
            w.define(u, "shuf", shuffle)
        elif op is Ops.STACK:
            w.expr[u] = d.vector_literal(w.value_type(u), s)
        elif op is Ops.INDEX and u.shape:
            base = _strip(w.expr[u.src[1].src[0]], "+")  # Index(buf, base + iota): a vector's address
            w.expr[u] = s[0] if base == "0" else f"{s[0]}+{base}"
        elif op is Ops.INDEX and u.src[0].shape and u.src[0].memory().op not in (Ops.PARAM, Ops.BUFFER):
            e = d.lane(s[0], int(u.src[1].arg.value))
            w.expr[u] = f"({e}!=0)" if u.dtype.is_bool else e
        elif op is Ops.INDEX:
            w.expr[u] = f"{s[0]}[{_strip(s[1])}]"
        elif op is Ops.LOAD and u in patterns and u.dtype.name in w.emulated:
            w.patterns[u] = w.fresh("val")
            w.line(f"{w.mem_type(u.dtype)} {w.patterns[u]} = {s[0]};")
        elif op is Ops.LOAD:
            _load(w, u, s)
        elif op is Ops.STORE:
            _store(w, u, s)
        elif op is Ops.PREFETCH:
            if d.prefetch is not None:
                buf, at = (w.expr[x] for x in u.src[0].src[:2])
                w.line(d.prefetch.format(buf=buf, at=_strip(at)))
        elif op is Ops.BITCAST:
            _bitcast(w, u, s[0])
        elif op is Ops.WMMA:
            _wmma(w, u)
        elif op is Ops.IF:
            w.line(f"if ({_strip(s[0])}) {{")
            w.depth += 1
        elif op is Ops.ENDIF:
            w.depth -= 1
            w.line("}")
        elif u.shape:
            w.define(u, "alu", _vector_alu(w, u, s))
        else:
            e = _alu(w, u, s) if op in (Ops.MAX, Ops.WHERE) else _rounded(w, u.dtype, _alu(w, u, s))
            if u.dtype is dtypes.index or (uses.get(u, 0) <= 1 and op is not Ops.WHERE and len(e) < 60
                                           and u.dtype.is_bool):
                w.expr[u] = e
            else:
                w.define(u, "alu", e)
    used = {slot for slot, _ in w.args}
    w.args += [(k, _buffer_decl(w, k, dt, linear)) for k, dt in enumerate(params or ()) if k not in used]
    args = [a for _, a in sorted(w.args)] + [f"int {v}" for v in w.vars]
    head = d.kernel_head(w.name, args, math.prod(int(x.src[0].arg.value) for x in lanes) if lanes else None)
    return d.preamble(w.used) + "".join(w.helpers.values()) + "\n".join([head, *w.lines, "}"]) + "\n"


def _shuffle(w: _Writer, u: UOp) -> str | None:
    """Stack u as the dialect's shuffle, where it has one and every lane of u is a lane of one of two vectors of one
    type (devectorize's every-other read, codegen/transpose.py's network): GCC compiles the vector literal of such
    lanes to one shuffle for some patterns only (a 16 x 4 transpose's literals ran as 64 inserts, 2.4x slower)."""
    if not all(x.op is Ops.INDEX and x.src[0].shape and x.src[0].memory().op not in (Ops.PARAM, Ops.BUFFER)
               for x in u.src):
        return None
    vecs = list(dict.fromkeys(x.src[0] for x in u.src))
    if len(vecs) > 2 or len({w.value_type(v) for v in vecs}) != 1:
        return None
    n = width(vecs[0])
    picks = [vecs.index(x.src[0]) * n + int(x.src[1].arg.value) for x in u.src]
    a = w.expr[vecs[0]]
    return w.d.shuffle(a, w.expr[vecs[-1]], picks)


def _fragments(linear: UOp) -> tuple[set[UOp], set[UOp]]:
    """The Stacks only Wmmas read (their lanes are the Wmma's operands, spelled by the dialect's wmma), and the
    ungated Loads only those Stacks read (the Wmma wants their bits: an emulated one is not converted to float)."""
    users: dict[UOp, set[UOp]] = {}
    for u in linear.src:
        for x in u.src:
            users.setdefault(x, set()).add(u)
    stacks = {x for x, us in users.items() if x.op is Ops.STACK and all(y.op is Ops.WMMA for y in us)}
    return stacks, {x for x, us in users.items() if x.op is Ops.LOAD and len(x.src) == 1 and us <= stacks}


def _wmma(w: _Writer, u: UOp) -> None:
    """Wmma as the dialect writes it, from its operands' lanes (A's and B's as 16-bit patterns)."""
    def lanes(x: UOp) -> list[str]:
        if x.op is Ops.STACK:
            return [w.expr[s] for s in x.src]
        return [w.d.lane(w.expr[x], i) for i in range(width(x))]

    def bits(x: UOp) -> list[str]:
        def of(e: str) -> str:
            return f"{x.dtype.name}_bits({e})" if w.emulates(x.dtype) else _pun(w, x.dtype, dtypes.uint16, e)
        if x.op is Ops.STACK:
            return [w.patterns[s] if s in w.patterns else of(w.expr[s]) for s in x.src]
        return [of(e) for e in lanes(x)]

    tc, out = u.arg, w.fresh("wmma")
    try:
        lines = w.d.wmma(tc, out, bits(u.src[0]), bits(u.src[1]), lanes(u.src[2]))
    except KeyError:
        raise RenderError(f"the {w.d.name} dialect has no tensor core {tc.name} for {tc.dtype_in.name} in and "
                          f"{tc.dtype_out.name} out") from None
    for line in lines:
        w.line(line)
    w.expr[u] = out


LOOSER = {"+": "?:<>=!&|^", "?": "?"}
"""Operators that bind more loosely than an operand of `+` (or the condition of `?:`) in C: an expression that holds
one outside parentheses keeps its own (`p+(c?i:0)` is an address; `p+c?i:0` tests the pointer and then yields an
integer, which a kernel read as an address: a segfault)."""


def _strip(e: str, operand_of: str | None = None) -> str:
    """e without its outer parentheses where they are not needed: e alone (an index, a condition), or as an
    operand of `operand_of` where no operator of e outside parentheses binds more loosely (LOOSER)."""
    inner = e[1:-1]
    if not (e.startswith("(") and e.endswith(")") and _balanced(inner)):
        return e
    if operand_of is not None and any(ch in LOOSER[operand_of] for ch in _outside_parentheses(inner)):
        return e
    return inner


def _outside_parentheses(e: str) -> str:
    """The characters of e at depth 0."""
    depth, out = 0, []
    for ch in e:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")"
    return "".join(out)


def _balanced(e: str) -> bool:
    depth = 0
    for ch in e:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _buffer(w: _Writer, u: UOp) -> str:
    """A kernel-local buffer: registers (an accumulator array), or a work-group's shared memory."""
    if u.arg.addrspace is AddrSpace.REG:
        prefix, nm = "", w.fresh("acc")
    elif u.arg.addrspace is AddrSpace.LOCAL and w.d.local_prefix is not None:
        prefix, nm = w.d.local_prefix, w.fresh("temp")
    else:
        raise RenderError(f"the {w.d.name} dialect has no {u.arg.addrspace.name} buffers")
    w.line(f"{prefix}{w.mem_type(u.arg.dtype)} {nm}[{u.arg.size}];")
    return nm


def _hardware_id(w: _Writer, u: UOp, bound: str, groups: bool) -> None:
    """A Special: a line reading the dialect's hardware id, or (an id the kernel is called with) its argument."""
    if not SPECIAL_NAME.fullmatch(u.arg):
        raise RenderError(f"hardware id {u.arg!r} is not gidxN, lidxN or tidxN")
    try:
        e = w.d.hardware_id(u.arg, groups)
    except KeyError:
        raise RenderError(f"{u.arg}: the {w.d.name} dialect has no such hardware id") from None
    if e is None:
        w.vars.append(u.arg)  # the last argument: the runtime calls the function once per index
    else:
        w.line(f"int {u.arg} = {e}; /* {bound} */")
    w.expr[u] = u.arg


def _buffer_decl(w: _Writer, slot: int, dtype: DType, linear: UOp) -> str:
    written = any(u.op is Ops.STORE and (b := u.src[0].src[0].memory()).op is Ops.PARAM and b.arg.slot == slot
                  for u in linear.src)
    const = "" if written else w.d.arg_const
    return f"{w.d.buffer_prefix}{const}{w.mem_type(dtype)}*{w.d.restrict} data{slot}"


def _load(w: _Writer, u: UOp, s: list[str]) -> None:
    if u.shape:
        n = width(u)
        val = w.d.vector_load(w.vector(u.dtype, n, True), n, s[0])
        w.define(u, "val", f"({_strip(s[2], '?')}?{val}:{s[1]})" if len(u.src) == 3 else val)
        return
    val = s[0]
    if w.emulates(u.dtype):
        val = f"{u.dtype.name}_value({val})"
    elif u.dtype.name in w.d.memory_types:
        val = f"({w.type(u.dtype)})({val})"
    if len(u.src) == 3:
        val = f"({s[2]}?{val}:{s[1]})"
    w.define(u, "val", val)


def _store(w: _Writer, u: UOp, s: list[str]) -> None:
    if u.src[0].shape:
        v, n = w.splat(u.src[1], s[1], u.src[0]), width(u.src[0])
        st = w.d.vector_store(w.vector(u.src[1].dtype, n, True), n, s[0], v)
        w.line(f"if ({s[2]}) {st}" if len(u.src) == 3 else st)
        return
    val = s[1]
    dt = u.src[1].dtype
    if w.emulates(dt):
        val = f"{dt.name}_bits({val})"
    elif dt.name in w.d.memory_types:
        val = f"({w.d.memory_types[dt.name]})({val})"
    st = f"{s[0]} = {val};"
    w.line(f"if ({s[2]}) {st}" if len(u.src) == 3 else st)
