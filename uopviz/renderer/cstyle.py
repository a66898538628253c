"""One C-style renderer for Linear programs, with dialects for C (the CPU) and OpenCL C.

Index arithmetic is written inline where it is used (it reads like the math), every other value gets a
named variable, so the source maps line by line onto the Linear listing. Integer Idiv and Mod are floor
division and floor modulo (SPEC); C's `/` and `%` truncate, so they are used directly only where the operands'
intervals prove both non-negative, and the floor forms otherwise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from uopviz.codegen.lanes import MASKS, mask_dtype
from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import AddrSpace, Ops, UOp
from uopviz.uop.spec import SPECIAL_NAME, is_identifier


class RenderError(ValueError):
    """The program uses something this dialect cannot express (the message names it)."""


@dataclass(frozen=True)
class Dialect:
    name: str
    kernel_prefix: str
    buffer_prefix: str
    types: dict[str, str]
    memory_types: dict[str, str]  # element types of buffers where they differ from value types (OpenCL bools)
    functions: dict[Ops, str]  # native transcendental spellings by dtype suffix '{f}'
    preamble: Callable[[set[DType]], str]
    emulation: dict[str, str]  # narrow floats carried as float in registers, as 16-bit patterns in memory: helpers
    arg_const: str = "const "
    restrict: str = " restrict"


_C_TYPES = {"bool": "_Bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
            "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int", "int64": "long long",
            "uint64": "unsigned long long", "float16": "_Float16", "float32": "float", "float64": "double",
            "index": "int"}
_CL_TYPES = {**_C_TYPES, "bool": "bool", "int8": "char", "uint8": "uchar", "uint16": "ushort", "uint32": "uint",
             "int64": "long", "uint64": "ulong", "float16": "half"}


def _c_preamble(used: set[DType]) -> str:
    return "#include <math.h>\n"


def _cl_preamble(used: set[DType]) -> str:
    lines = []
    if dtypes.float64 in used:
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    if dtypes.float16 in used:
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
    return "\n".join(lines) + ("\n" if lines else "")


# Each emulated type T gets `unsigned short T_bits(float)` (round to nearest even) and `float T_value(unsigned short)`.
# bfloat16 is the top half of a float32; OpenCL's vstore_half/vload_half convert halves without cl_khr_fp16.
_BF16_C = """static inline unsigned short bfloat16_bits(float x) {
  union { float f; unsigned int u; } v = { x };
  return x != x ? (unsigned short)((v.u >> 16) | 64u) : (unsigned short)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
static inline float bfloat16_value(unsigned short b) {
  union { unsigned int u; float f; } v = { (unsigned int)b << 16 };
  return v.f;
}
"""
_BF16_CL = """static inline ushort bfloat16_bits(float x) {
  uint u = as_uint(x);
  return x != x ? (ushort)((u >> 16) | 64u) : (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float bfloat16_value(ushort b) { return as_float((uint)b << 16); }
"""
_HALF_CL = """static inline ushort float16_bits(float x) { ushort b; vstore_half(x, 0, (__private half*)&b); return b; }
static inline float float16_value(ushort b) { return vload_half(0, (__private const half*)&b); }
"""

C = Dialect("c", "void", "", _C_TYPES, {}, {Ops.EXP2: "exp2{f}", Ops.LOG2: "log2{f}", Ops.SIN: "sin{f}",
                                            Ops.SQRT: "sqrt{f}", Ops.TRUNC: "trunc{f}"}, _c_preamble,
            {"bfloat16": _BF16_C})
OPENCL = Dialect("opencl", "__kernel void", "__global ", _CL_TYPES, {"bool": "uchar"},
                 {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt", Ops.TRUNC: "trunc"},
                 _cl_preamble, {"bfloat16": _BF16_CL, "float16": _HALF_CL}, restrict="")
DIALECTS = {"c": C, "opencl": OPENCL}

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
            return self.d.types["uint16"]
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
        return self.vector(_lane_dtype(u), int(u.shape[0])) if u.shape else self.type(u.dtype)

    def vector(self, dt: DType, n: int, unaligned: bool = False) -> str:
        """The dialect's n-lane vector of dt, named as OpenCL names them; C declares them as typedefs, and its
        loads and stores go through a variant aligned as the lanes are (memory holds no stricter alignment)."""
        name = f"{_CL_TYPES[dt.name]}{n}" + ("_u" if unaligned else "")
        if self.d.name == "c" and name not in self.helpers:
            align = f", aligned({dt.itemsize})" if unaligned else ""
            size = n * dt.itemsize
            self.helpers[name] = f"typedef {self.type(dt)} {name} __attribute__((vector_size({size}){align}));\n"
        self.type(dt)
        return name

    def splat(self, x: UOp, e: str, like: UOp) -> str:
        """Expression e of x as a vector of like's type and width (a scalar repeated; a vector as it is)."""
        if x.shape:
            return e
        t, n = self.value_type(like), int(like.shape[0])
        return f"(({t}){{{','.join([e] * n)}}})" if self.d.name == "c" else f"(({t})({e}))"


# the names the renderer makes up itself: a variable named like one would be shadowed by it, or shadow it
_GENERATED = re.compile(r"(data|ridx|alu|val|acc|temp|cast|pun|[glt]idx)[0-9]+")


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
    suffix = {"uint32": "u", "int64": "ll", "uint64": "ull"}.get(dt.name, "")
    if d.name == "opencl" and suffix in ("ll", "ull"):
        suffix = "l" if suffix == "ll" else "ul"
    if dt.name == "int64" and v == dt.min:
        return f"({v + 1}{suffix}-1)"
    if dt.name == "int32" and v == dt.min:
        return f"({v + 1}-1)"
    return f"{v}{suffix}"


def _floor_div(a: str, b: str) -> str:
    return f"(({a})/({b})-((({a})%({b})!=0)&((({a})<0)!=(({b})<0))))"


def _floor_mod(a: str, b: str) -> str:
    return f"(((({a})%({b}))+({b}))%({b}))"


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
    op, c = u.op, w.d.name == "c"
    if op in (Ops.MAX, Ops.WHERE):
        a, b = (u.src[0], u.src[1]) if op is Ops.MAX else (u.src[1], u.src[2])
        x, y = w.splat(a, s[0] if op is Ops.MAX else s[1], u), w.splat(b, s[1] if op is Ops.MAX else s[2], u)
        if op is Ops.MAX:
            m = w.fresh("alu")
            w.line(f"{w.vector(MASKS[u.dtype.itemsize], int(u.shape[0]))} {m} = "
                   f"{f'(({x}>{y})|({x}!={x}))' if u.dtype.is_float else f'({x}>{y})'};")
        elif not u.src[0].shape:
            return f"({s[0]}?{x}:{y})"
        else:
            m = s[0]
        if not c:
            return f"select({y},{x},{m})"
        it = w.vector(MASKS[u.dtype.itemsize], int(u.shape[0]))
        return f"(({w.value_type(u)})((({it}){x}&{m})|(({it}){y}&~{m})))"
    if u.src[0].dtype.is_bool:  # logic on lane masks: a scalar bool joins them as all ones (-1) or zeros
        s = [e if x.shape else f"(-({e}))" for x, e in zip(u.src, s)]
    if op is Ops.CAST:
        return f"__builtin_convertvector({s[0]},{w.value_type(u)})" if c else f"convert_{w.value_type(u)}({s[0]})"
    return _alu(w, u, s)


def _alu(w: _Writer, u: UOp, s: list[str]) -> str:
    op, dt = u.op, u.src[0].dtype
    if op in _INFIX:
        return f"({s[0]}{_INFIX[op]}{s[1]})"
    if op in (Ops.IDIV, Ops.MOD):
        if dt.is_float:
            raise RenderError(f"{op.value} on {dt.name}: the front-end builds float floor division from Trunc")
        if (_nonneg(u.src[0]) and _nonneg(u.src[1])) or dt.kind == "u":
            return f"({s[0]}{'/' if op is Ops.IDIV else '%'}{s[1]})"
        return _floor_div(s[0], s[1]) if op is Ops.IDIV else _floor_mod(s[0], s[1])
    if op is Ops.MAX:  # nan-propagating, like NumPy's maximum and the PYTHON runtime
        nan = f"||{s[0]}!={s[0]}" if dt.is_float else ""
        return f"(({s[0]}>{s[1]}{nan})?{s[0]}:{s[1]})"
    if op is Ops.WHERE:
        return f"({s[0]}?{s[1]}:{s[2]})"
    if op is Ops.RECIP:
        return f"({w.literal(1.0, u.dtype)}/{s[0]})"
    if op is Ops.CAST:
        return f"(({w.type(u.dtype)})({s[0]}))"
    if op in w.d.functions:
        if not dt.is_float:
            raise RenderError(f"{op.value} of {dt.name} (cast to a float first)")
        return f"{w.d.functions[op].format(f='f' if dt is dtypes.float32 else '')}({s[0]})"
    raise RenderError(f"the {w.d.name} dialect cannot render {op.value} (instruction selection should have "
                      f"decomposed it)")


def _rounded(w: _Writer, dt: DType, e: str) -> str:
    """e computed in float, rounded to the emulated dt it stands for (as if dt had its own arithmetic)."""
    return f"{dt.name}_value({dt.name}_bits({e}))" if w.emulates(dt) else e


def _bitcast(w: _Writer, u: UOp, x: str) -> None:
    src, dst = u.src[0].dtype, u.dtype
    if u.shape:
        w.define(u, "cast", f"(({w.value_type(u)})({x}))" if w.d.name == "c" else f"as_{w.value_type(u)}({x})")
        return
    if w.emulates(src):
        src, x = dtypes.uint16, f"{src.name}_bits({x})"
    if w.emulates(dst):
        w.define(u, "cast", f"{dst.name}_value({_pun(w, src, dtypes.uint16, x)})")
    else:
        w.define(u, "cast", _pun(w, src, dst, x))


def _pun(w: _Writer, src: DType, dst: DType, x: str) -> str:
    """x's bits read as dst: OpenCL's as_T, a union in C."""
    if src == dst:
        return x
    if w.d.name == "opencl":
        return f"as_{w.type(dst)}({x})"
    tmp = w.fresh("pun")
    w.line(f"union {{ {w.type(src)} a; {w.type(dst)} b; }} {tmp};")
    w.line(f"{tmp}.a = {x};")
    return f"{tmp}.b"


def _buffer_of(u: UOp) -> UOp:
    while u.op is Ops.AFTER:
        u = u.src[0]
    return u


def render(linear: UOp, name: str, dialect: str, params: Sequence[DType] | None = None,
           emulated: frozenset[str] = frozenset({"bfloat16"})) -> str:
    """The source of kernel `name` for a Linear program in the given dialect ("c" or "opencl"). `params` are
    the dtypes of every buffer slot the kernel is called with (default: the Params the program uses); a
    slot whose reads were simplified away is still declared, so every caller passes the same arguments.
    `emulated` names the float dtypes the device has no arithmetic for: they are computed in float and rounded
    after every op, and stored as 16-bit patterns."""
    d = DIALECTS[dialect]
    w = _Writer(d, _name(name, "kernel name"), emulated & d.emulation.keys())
    uses: dict[UOp, int] = {}
    groups = any(u.op is Ops.SPECIAL and u.arg.startswith("lidx") for u in linear.src)  # gidx numbers work-groups
    for u in linear.src:
        for s in u.src:
            uses[s] = uses.get(s, 0) + 1
    for u in linear.src:
        op, s = u.op, [w.expr.get(x, "") for x in u.src]
        if op in (Ops.SINK, Ops.GROUP, Ops.BARRIER) and not (op is Ops.BARRIER and d.name == "opencl"):
            continue
        if u.dtype is dtypes.index and u.shape:
            continue  # lane addresses: a vector access writes them as its base pointer
        if op is Ops.BARRIER:
            w.line("barrier(CLK_LOCAL_MEM_FENCE);")
        elif op is Ops.CONST:
            w.expr[u] = w.literal(u.arg.value, u.dtype)
        elif op is Ops.PARAM:
            w.expr[u] = f"data{u.arg.slot}"
            w.args.append((u.arg.slot, _buffer_decl(w, u.arg.slot, u.arg.dtype, linear)))
        elif op is Ops.DEFINE_VAR:
            w.expr[u] = _var_name(u)
            w.vars.append(w.expr[u])
        elif op is Ops.BUFFER:
            kind = {AddrSpace.REG: ("acc", ""), AddrSpace.LOCAL: ("temp", "__local ")}[u.arg.addrspace]
            nm = w.fresh(kind[0])
            w.line(f"{kind[1]}{w.mem_type(u.arg.dtype)} {nm}[{u.arg.size}];")
            w.expr[u] = nm
        elif op is Ops.SPECIAL and not SPECIAL_NAME.fullmatch(u.arg):
            raise RenderError(f"hardware id {u.arg!r} is not gidxN, lidxN or tidxN")
        elif op is Ops.SPECIAL and u.arg == "tidx0" and d.name == "c":
            w.expr[u] = u.arg
            w.vars.append(u.arg)  # the last argument: the runtime calls the function once per thread index
        elif op is Ops.SPECIAL:
            if d.name != "opencl":
                raise RenderError(f"{u.arg}: the {d.name} dialect has no hardware thread ids")
            fn = "get_local_id" if u.arg.startswith("l") else "get_group_id" if groups else "get_global_id"
            w.line(f"int {u.arg} = {fn}({u.arg[-1]}); /* {s[0]} */")
            w.expr[u] = u.arg
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
        elif op is Ops.STACK:
            t, same = w.value_type(u), all(x is u.src[0] for x in u.src)  # OpenCL writes a repeated lane once
            w.expr[u] = f"(({t}){{{','.join(s)}}})" if d.name == "c" else f"(({t})({s[0] if same else ','.join(s)}))"
        elif op is Ops.INDEX and u.shape:
            base = _strip(w.expr[u.src[1].src[0]])  # Index(buf, base + iota): a vector's address
            w.expr[u] = s[0] if base == "0" else f"{s[0]}+{base}"
        elif op is Ops.INDEX and u.src[0].shape and _buffer_of(u.src[0]).op not in (Ops.PARAM, Ops.BUFFER):
            i = int(u.src[1].arg.value)
            e = f"{s[0]}[{i}]" if d.name == "c" else f"{s[0]}.s{i:x}"
            w.expr[u] = f"({e}!=0)" if u.dtype.is_bool else e
        elif op is Ops.INDEX:
            w.expr[u] = f"{s[0]}[{_strip(s[1])}]"
        elif op is Ops.LOAD:
            _load(w, u, s)
        elif op is Ops.STORE:
            _store(w, u, s)
        elif op is Ops.BITCAST:
            _bitcast(w, u, s[0])
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
    head = f"{d.kernel_prefix} {w.name}({', '.join(args)}) {{"
    return d.preamble(w.used) + "".join(w.helpers.values()) + "\n".join([head, *w.lines, "}"]) + "\n"


def _strip(e: str) -> str:
    return e[1:-1] if e.startswith("(") and e.endswith(")") and _balanced(e[1:-1]) else e


def _balanced(e: str) -> bool:
    depth = 0
    for ch in e:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _buffer_decl(w: _Writer, slot: int, dtype: DType, linear: UOp) -> str:
    written = any(u.op is Ops.STORE and (b := _buffer_of(u.src[0].src[0])).op is Ops.PARAM and b.arg.slot == slot
                  for u in linear.src)
    const = "" if written else w.d.arg_const
    return f"{w.d.buffer_prefix}{const}{w.mem_type(dtype)}*{w.d.restrict} data{slot}"


def _load(w: _Writer, u: UOp, s: list[str]) -> None:
    if u.shape:
        n = int(u.shape[0])
        w.define(u, "val", f"*({w.vector(u.dtype, n, True)}*)({s[0]})" if w.d.name == "c" else f"vload{n}(0,{s[0]})")
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
        v, n = w.splat(u.src[1], s[1], u.src[0]), int(u.src[0].shape[0])
        c = w.d.name == "c"
        st = f"*({w.vector(u.src[1].dtype, n, True)}*)({s[0]}) = {v};" if c else f"vstore{n}({v},0,{s[0]});"
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
