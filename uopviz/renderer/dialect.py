"""The C-style dialects: each one object that says how its language spells what the renderer writes.

A dialect is a description with behaviour: its types, its math functions (scalar and vector), how it writes a
barrier, a hardware id, a local buffer, a vector type, literal, lane, load and store, a select and a conversion,
the kernel's opening line, a Wmma (tensor cores), and where its programs compile. The renderer (cstyle.py) asks
these and never compares a dialect's name, and codegen reads the capabilities (`vector_functions`) through the
Target, so a new C-style backend is one new Dialect subclass here and one runtime.

This module imports nothing above the IR, so the Target (uopviz/target.py) can hold a dialect.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import Ops, TensorCore

C_TYPES = {"bool": "_Bool", "int8": "signed char", "uint8": "unsigned char", "int16": "short",
           "uint16": "unsigned short", "int32": "int", "uint32": "unsigned int", "int64": "long long",
           "uint64": "unsigned long long", "float16": "_Float16", "float32": "float", "float64": "double",
           "index": "int"}
CL_TYPES = {**C_TYPES, "bool": "bool", "int8": "char", "uint8": "uchar", "uint16": "ushort", "uint32": "uint",
            "int64": "long", "uint64": "ulong", "float16": "half"}

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


def _fp8(name: str, qual: str, u8: str, f2u: str, u2f: str) -> str:
    """`u8 name_bits(float)` and `float name_value(u8)` for an fp8 format (dtype.py's _FP8: torch's rounding, ties
    to even; e4m3fn saturates at ±448, e5m2 overflows to inf), in integer arithmetic on the float's bits as torch's
    c10 does. f2u/u2f spell the dialect's bit casts of a float and an unsigned int (@ is the operand)."""
    e4m3 = name == "float8_e4m3fn"
    mant, bias = (3, 7) if e4m3 else (2, 15)
    k = 1 - bias - mant + 23  # adding 2^k rounds a subnormal to its grid: ulp(2^k) is the least subnormal
    high = "0x43e80000u" if e4m3 else "0x47700000u"  # 464 (ties to 448) and 61440 (ties to inf) and beyond
    over = "0x7eu" if e4m3 else "0x7cu"
    least = f"{(127 + 1 - bias) << 23:#x}u"  # the least normal's bits
    nan = "(b & 0x7fu) == 0x7fu" if e4m3 else "e == 31u && m"
    inf = "" if e4m3 else f"  if (e == 31u) return {u2f.replace('@', 's | 0x7f800000u')};\n"
    sub = f"{2.0 ** (1 - bias - mant)!r}f"
    return (f"{qual} {u8} {name}_bits(float x) {{\n"
            f"  unsigned int u = {f2u.replace('@', 'x')}, s = (u >> 24) & 0x80u, a = u & 0x7fffffffu;\n"
            f"  if (a > 0x7f800000u) return ({u8})(s | 0x7fu);\n"
            f"  if (a >= {high}) return ({u8})(s | {over});\n"
            f"  if (a < {least}) return ({u8})(s | ({f2u.replace('@', u2f.replace('@', 'a') + f' + {2.0 ** k!r}f')} - "
            f"({127 + k}u << 23)));\n"
            f"  a += (((a >> {23 - mant}) & 1u) + {(1 << (22 - mant)) - 1:#x}u) - ({127 - bias}u << 23);\n"
            f"  return ({u8})(s | (a >> {23 - mant}));\n}}\n"
            f"{qual} float {name}_value({u8} b) {{\n"
            f"  unsigned int s = ((unsigned int)b & 0x80u) << 24, e = ((unsigned int)b >> {mant}) & "
            f"{(1 << (7 - mant)) - 1}u, m = (unsigned int)b & {(1 << mant) - 1}u;\n"
            f"  if ({nan}) return {u2f.replace('@', 's | 0x7fc00000u')};\n{inf}"
            f"  if (e == 0u) return {u2f.replace('@', 's | ' + f2u.replace('@', f'(float)m * {sub}'))};\n"
            f"  return {u2f.replace('@', f's | ((e + {127 - bias}u) << 23) | (m << {23 - mant})')};\n}}\n")


_FP8_NAMES = ("float8_e4m3fn", "float8_e5m2")
FP8 = frozenset(_FP8_NAMES)  # emulated on every device: computed in float, stored as their bytes
_C_BITS = ("((union { float f; unsigned int u; }){ .f = (@) }).u",
           "((union { unsigned int u; float f; }){ .u = (@) }).f")
_FP8_C = {n: _fp8(n, "static inline", "unsigned char", *_C_BITS) for n in _FP8_NAMES}
_FP8_CL = {n: _fp8(n, "static inline", "uchar", "as_uint(@)", "as_float(@)") for n in _FP8_NAMES}
_FP8_CUDA = {n: _fp8(n, "__device__ __forceinline__", "unsigned char", "__float_as_uint(@)", "__uint_as_float(@)")
             for n in _FP8_NAMES}


_ODD_C = """static inline float float32_odd(double x) {
  union { float f; unsigned int u; } v = { (float)x };
  if ((double)v.f != x && x == x) { if (x > 0 ? (double)v.f > x : (double)v.f < x) v.u -= 1u; v.u |= 1u; }
  return v.f;
}
"""
_ODD_CL = """static inline float float32_odd(double x) {
  float f = (float)x; uint u = as_uint(f);
  if ((double)f != x && x == x) { if (x > 0 ? (double)f > x : (double)f < x) u -= 1u; u |= 1u; }
  return as_float(u);
}
"""
_ODD_CUDA = """__device__ __forceinline__ float float32_odd(double x) {
  float f = (float)x; unsigned int u = __float_as_uint(f);
  if ((double)f != x && x == x) { if (x > 0 ? (double)f > x : (double)f < x) u -= 1u; u |= 1u; }
  return __uint_as_float(u);
}
"""


class Dialect(ABC):
    """A C-style language. Class attributes describe it; methods spell the constructs that differ between
    dialects. Vector types are named as OpenCL names them (`float4`), in every dialect."""

    name: ClassVar[str]
    kernel_prefix: ClassVar[str]  # before the kernel's name: its return type and qualifiers
    buffer_prefix: ClassVar[str] = ""  # before a buffer parameter's type (its address space)
    arg_const: ClassVar[str] = "const "  # a buffer the kernel only reads
    restrict: ClassVar[str] = " restrict"
    types: ClassVar[dict[str, str]]  # dtype name -> the type's spelling
    memory_types: ClassVar[dict[str, str]] = {}  # element types of buffers where they differ from value types
    functions: ClassVar[dict[Ops, str]]  # scalar math functions; '{f}' is the float32 suffix where it has one
    vector_functions: ClassVar[frozenset[Ops]] = frozenset()  # math functions that take vectors as they are
    emulation: ClassVar[dict[str, str]] = {}  # narrow floats carried as float in registers: their helpers
    # `float float32_odd(double)`: a double rounded to float by round-to-odd, so that rounding that float to an emulated
    # narrow float rounds the double once (through a plain float cast it rounded twice: 1 ulp off at ties)
    float32_odd: ClassVar[str | None] = None
    int_suffix: ClassVar[dict[str, str]] = {"uint32": "u", "int64": "ll", "uint64": "ull"}
    local_prefix: ClassVar[str | None] = None  # before a work-group's shared buffer; None: it has none
    barrier: ClassVar[str | None] = None  # the statement that syncs a work-group; None: it has no work-groups
    compiles_in_worker: ClassVar[bool] = False  # a search's worker process may compile for the parent
    prefetch: ClassVar[str | None] = None  # the statement hinting that element {at} of {buf} will be read soon

    def preamble(self, used: set[DType]) -> str:
        """What the source starts with, for the dtypes it uses."""
        return ""

    def kernel_head(self, name: str, args: list[str], threads: int | None) -> str:
        """The kernel's opening line (threads: work-items per work-group where the kernel names them)."""
        return f"{self.kernel_prefix} {name}({', '.join(args)}) {{"

    def wmma(self, tc: TensorCore, out: str, a: list[str], b: list[str], c: list[str]) -> list[str]:
        """The statements computing Wmma `tc` into a new array `out` of C's lanes, from the 16-bit patterns of the
        lane's A and B fragment elements and the lanes of C; KeyError where the dialect has no such instruction."""
        raise KeyError(tc.name)

    @abstractmethod
    def hardware_id(self, name: str, groups: bool) -> str | None:
        """The expression of hardware id `name` (gidxN, lidxN, tidxN; groups: the kernel has work-groups, so
        gidx numbers them), or None for an id the kernel receives as its last argument; KeyError for an id the
        dialect does not have."""

    def vector_typedef(self, name: str, scalar: str, size: int, align: int | None) -> str | None:
        """The declaration the kernel needs for vector type `name` (size bytes of `scalar`; align: that of an
        unaligned variant, else None), or None where vector types are built in."""
        return None

    @abstractmethod
    def vector_literal(self, vtype: str, lanes: list[str]) -> str: ...

    def shuffle(self, a: str, b: str, lanes: list[int]) -> str | None:
        """The vector of lanes of a and b (two vectors of one type; lane i of b is lane n + i), or None where the
        dialect has no shuffle (the renderer then writes the vector literal of those lanes)."""
        return None

    @abstractmethod
    def splat(self, vtype: str, e: str, n: int) -> str:
        """e repeated in every lane of an n-lane vtype."""

    @abstractmethod
    def lane(self, e: str, i: int) -> str: ...

    @abstractmethod
    def vector_load(self, vtype: str, n: int, addr: str) -> str:
        """An expression loading n lanes at pointer addr (vtype: the type's unaligned variant)."""

    @abstractmethod
    def vector_store(self, vtype: str, n: int, addr: str, value: str) -> str: ...

    @abstractmethod
    def select(self, vtype: str, mask_type: str, x: str, y: str, mask: str) -> str:
        """Lane by lane, x where mask (all ones) else y."""

    @abstractmethod
    def convert(self, e: str, vtype: str) -> str:
        """A vector converted lane by lane (a value cast)."""

    @abstractmethod
    def vector_bitcast(self, e: str, vtype: str) -> str: ...

    def bitcast(self, e: str, to: str) -> str | None:
        """A scalar's bits read as type `to` as one expression, or None where the renderer goes through a union."""
        return None

    def function(self, op: Ops, dt: DType, vtype: str | None, n: int) -> tuple[str, str | None]:
        """The name of math function `op` on dt (vtype: the n-lane vector type it takes, None for a scalar) and the
        helper the source must define for it (None: the language has it)."""
        return self.functions[op].format(f="f" if dt is dtypes.float32 else ""), None


# (bytes per lane, lanes): the predefined macro of the x86 extension with that vector FMA and its builtin, as GCC's
# and Clang's own intrinsic headers call it (the headers themselves cost a fifth of a second per compile)
_X86_FMA = {(4, 4): ("__FMA__", "__builtin_ia32_vfmaddps(a, b, c)"),
            (4, 8): ("__FMA__", "__builtin_ia32_vfmaddps256(a, b, c)"),
            (4, 16): ("__AVX512F__", "__builtin_ia32_vfmaddps512_mask(a, b, c, -1, 4)"),
            (8, 2): ("__FMA__", "__builtin_ia32_vfmaddpd(a, b, c)"),
            (8, 4): ("__FMA__", "__builtin_ia32_vfmaddpd256(a, b, c)"),
            (8, 8): ("__AVX512F__", "__builtin_ia32_vfmaddpd512_mask(a, b, c, -1, 4)")}


class CDialect(Dialect):
    """C for the CPU: GCC/Clang vector extensions, no hardware ids but a THREAD index argument."""

    name = "c"
    kernel_prefix = "void"
    types = C_TYPES
    functions: ClassVar[dict[Ops, str]] = {Ops.EXP2: "exp2{f}", Ops.LOG2: "log2{f}", Ops.SIN: "sin{f}",
                                           Ops.SQRT: "sqrt{f}", Ops.TRUNC: "trunc{f}", Ops.MULACC: "fma{f}"}
    vector_functions = frozenset({Ops.MULACC})
    emulation: ClassVar[dict[str, str]] = {"bfloat16": _BF16_C, **_FP8_C}
    float32_odd = _ODD_C
    compiles_in_worker = True  # the library lands in the shared disk cache, where the parent finds it
    # GCC's and Clang's, which never fault; the address is reckoned in integers, as a prefetch may point past the end
    # of its buffer, where pointer arithmetic would be undefined
    prefetch = "__builtin_prefetch((const void*)((__UINTPTR_TYPE__){buf} + sizeof(*{buf}) * ({at})));"

    def preamble(self, used: set[DType]) -> str:
        return "#include <math.h>\n"

    def hardware_id(self, name: str, groups: bool) -> str | None:
        if name.startswith("tidx"):
            return None  # the runtime calls the function once per thread index
        raise KeyError(name)

    def vector_typedef(self, name: str, scalar: str, size: int, align: int | None) -> str | None:
        aligned = f", aligned({align})" if align is not None else ""
        return f"typedef {scalar} {name} __attribute__((vector_size({size}){aligned}));\n"

    def function(self, op: Ops, dt: DType, vtype: str | None, n: int) -> tuple[str, str | None]:
        """Vector extensions have no fma: an always-inlined helper (a helper left a call passes its vectors through
        memory) is the x86 vector FMA builtin (GCC's and Clang's, no header) where the compiler targets it, else the
        vector of its lanes' fmas. The lanes alone are not enough: GCC usually merges them into one vector FMA, but
        not where an operand is a guarded load's select (a padded tile two vectors wide ran scalar fmas, 20x
        slower)."""
        name, _ = super().function(op, dt, None, 1)
        if vtype is None:
            return name, None
        lanes = ",".join(f"{name}(a[{i}],b[{i}],c[{i}])" for i in range(n))
        helper = f"{name}_{vtype}"
        head = f"static inline __attribute__((always_inline)) {vtype} {helper}({vtype} a, {vtype} b, {vtype} c)"
        body = f"return ({vtype}){{{lanes}}};"
        if (x86 := _X86_FMA.get((dt.itemsize, n))) is not None:
            feature, builtin = x86
            return helper, f"{head} {{\n#if defined({feature})\n  return {builtin};\n#else\n  {body}\n#endif\n}}\n"
        return helper, f"{head} {{ {body} }}\n"

    def vector_literal(self, vtype: str, lanes: list[str]) -> str:
        return f"(({vtype}){{{','.join(lanes)}}})"

    def splat(self, vtype: str, e: str, n: int) -> str:
        return self.vector_literal(vtype, [e] * n)

    def shuffle(self, a: str, b: str, lanes: list[int]) -> str | None:
        """GCC's (12 and later) and Clang's builtin: one instruction where the target has it."""
        return f"__builtin_shufflevector({a},{b},{','.join(map(str, lanes))})"

    def lane(self, e: str, i: int) -> str:
        return f"{e}[{i}]"

    def vector_load(self, vtype: str, n: int, addr: str) -> str:
        return f"*({vtype}*)({addr})"

    def vector_store(self, vtype: str, n: int, addr: str, value: str) -> str:
        return f"*({vtype}*)({addr}) = {value};"

    def select(self, vtype: str, mask_type: str, x: str, y: str, mask: str) -> str:
        return f"(({vtype})((({mask_type}){x}&{mask})|(({mask_type}){y}&~{mask})))"

    def convert(self, e: str, vtype: str) -> str:
        return f"__builtin_convertvector({e},{vtype})"

    def vector_bitcast(self, e: str, vtype: str) -> str:
        return f"(({vtype})({e}))"


class OpenCLDialect(Dialect):
    """OpenCL C: work-groups with local memory and barriers, built-in vector types and functions."""

    name = "opencl"
    kernel_prefix = "__kernel void"
    buffer_prefix = "__global "
    restrict = ""
    types = CL_TYPES
    memory_types: ClassVar[dict[str, str]] = {"bool": "uchar"}
    functions: ClassVar[dict[Ops, str]] = {Ops.EXP2: "exp2", Ops.LOG2: "log2", Ops.SIN: "sin", Ops.SQRT: "sqrt",
                                           Ops.TRUNC: "trunc"}
    # not Sin: PoCL's vector sin returns wrong lanes when another lane's argument is huge (sin(1e-30) gave 0.0099
    # beside a 1e20), so each lane calls the scalar sin
    vector_functions = frozenset({Ops.EXP2, Ops.LOG2, Ops.SQRT, Ops.TRUNC})
    emulation: ClassVar[dict[str, str]] = {"bfloat16": _BF16_CL, "float16": _HALF_CL, **_FP8_CL}
    float32_odd = _ODD_CL
    int_suffix: ClassVar[dict[str, str]] = {"uint32": "u", "int64": "l", "uint64": "ul"}
    local_prefix = "__local "
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"

    def preamble(self, used: set[DType]) -> str:
        lines = []
        if dtypes.float64 in used:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        if dtypes.float16 in used:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
        return "\n".join(lines) + ("\n" if lines else "")

    def hardware_id(self, name: str, groups: bool) -> str | None:
        kind, dim = name[:4], name[4:]
        fn = {"lidx": "get_local_id", "gidx": "get_group_id" if groups else "get_global_id"}.get(kind)
        if fn is None:
            raise KeyError(name)
        return f"{fn}({dim})"

    def vector_literal(self, vtype: str, lanes: list[str]) -> str:
        same = all(x == lanes[0] for x in lanes)  # a repeated lane is written once
        return f"(({vtype})({lanes[0] if same else ','.join(lanes)}))"

    def splat(self, vtype: str, e: str, n: int) -> str:
        return f"(({vtype})({e}))"

    def lane(self, e: str, i: int) -> str:
        return f"{e}.s{i:x}"

    def vector_load(self, vtype: str, n: int, addr: str) -> str:
        return f"vload{n}(0,{addr})"

    def vector_store(self, vtype: str, n: int, addr: str, value: str) -> str:
        return f"vstore{n}({value},0,{addr});"

    def select(self, vtype: str, mask_type: str, x: str, y: str, mask: str) -> str:
        return f"select({y},{x},{mask})"

    def convert(self, e: str, vtype: str) -> str:
        return f"convert_{vtype}({e})"

    def vector_bitcast(self, e: str, vtype: str) -> str:
        return f"as_{vtype}({e})"

    def bitcast(self, e: str, to: str) -> str | None:
        return f"as_{to}({e})"


_HALF_CUDA = """__device__ __forceinline__ unsigned short float16_bits(float x) {
  unsigned short b; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(x)); return b;
}
__device__ __forceinline__ float float16_value(unsigned short b) {
  float x; asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(b)); return x;
}
"""
_BF16_CUDA = """__device__ __forceinline__ unsigned short bfloat16_bits(float x) {
  unsigned int u = __float_as_uint(x);
  return x != x ? (unsigned short)((u >> 16) | 64u) : (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float bfloat16_value(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }
"""
_PTX_TYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32"}


class CUDADialect(Dialect):
    """CUDA C++ as NVRTC compiles it without the toolkit's headers: half and bfloat16 are carried as float and
    stored as their bits (converted by PTX's cvt and by bit arithmetic), there are no vector types (the CUDA target
    leaves scalar code; the Wmma's fragments are its only vectors, spelled lane by lane), and Wmma is PTX's
    mma.sync inline."""

    name = "cuda"
    kernel_prefix = 'extern "C" __global__ void'
    restrict = " __restrict__"
    types: ClassVar[dict[str, str]] = {k: v for k, v in {**C_TYPES, "bool": "bool"}.items() if k != "float16"}
    functions: ClassVar[dict[Ops, str]] = {Ops.EXP2: "exp2{f}", Ops.LOG2: "log2{f}", Ops.SIN: "sin{f}",
                                           Ops.SQRT: "sqrt{f}", Ops.TRUNC: "trunc{f}", Ops.MULACC: "fma{f}"}
    emulation: ClassVar[dict[str, str]] = {"bfloat16": _BF16_CUDA, "float16": _HALF_CUDA, **_FP8_CUDA}
    float32_odd = _ODD_CUDA
    local_prefix = "__shared__ "
    barrier = "__syncthreads();"
    default_block = 256  # threads per block the runtime launches a kernel without work-groups with, at most

    def preamble(self, used: set[DType]) -> str:
        return "#define INFINITY (__int_as_float(0x7f800000))\n#define NAN (__int_as_float(0x7fffffff))\n"

    def kernel_head(self, name: str, args: list[str], threads: int | None) -> str:
        return f"{self.kernel_prefix} __launch_bounds__({threads or self.default_block}) {name}({', '.join(args)}) {{"

    def hardware_id(self, name: str, groups: bool) -> str | None:
        kind, dim = name[:4], int(name[4:])
        if kind not in ("gidx", "lidx") or dim > 2:
            raise KeyError(name)
        xyz = "xyz"[dim]
        if kind == "lidx":
            return f"threadIdx.{xyz}"
        return f"blockIdx.{xyz}" if groups else f"(blockIdx.{xyz}*blockDim.{xyz}+threadIdx.{xyz})"

    def wmma(self, tc: TensorCore, out: str, a: list[str], b: list[str], c: list[str]) -> list[str]:
        ti, to = _PTX_TYPES[tc.dtype_in.name], _PTX_TYPES[tc.dtype_out.name]
        regs = [f"(unsigned)({lo})|((unsigned)({hi})<<16)" for x in (a, b) for lo, hi in zip(x[::2], x[1::2])]
        n, na = len(c), len(a) // 2

        def group(start: int, count: int) -> str:
            return "{" + ",".join(f"%{i}" for i in range(start, start + count)) + "}"

        ins = (f"mma.sync.aligned.{tc.name}.row.col.{to}.{ti}.{ti}.{to} {group(0, n)}, {group(n, na)}, "
               f"{group(n + na, len(regs) - na)}, {group(0, n)};")
        outs = ", ".join(f'"+f"({out}[{i}])' for i in range(n))
        ins_ops = ", ".join(f'"r"({r})' for r in regs)
        return [f"{self.types[tc.dtype_out.name]} {out}[{n}] = {{{', '.join(c)}}};",
                f'asm("{ins}" : {outs} : {ins_ops});']

    def lane(self, e: str, i: int) -> str:
        return f"{e}[{i}]"

    def vector_literal(self, vtype: str, lanes: list[str]) -> str:
        raise _no_vectors()

    def splat(self, vtype: str, e: str, n: int) -> str:
        raise _no_vectors()

    def vector_load(self, vtype: str, n: int, addr: str) -> str:
        raise _no_vectors()

    def vector_store(self, vtype: str, n: int, addr: str, value: str) -> str:
        raise _no_vectors()

    def select(self, vtype: str, mask_type: str, x: str, y: str, mask: str) -> str:
        raise _no_vectors()

    def convert(self, e: str, vtype: str) -> str:
        raise _no_vectors()

    def vector_bitcast(self, e: str, vtype: str) -> str:
        raise _no_vectors()


def _no_vectors() -> ValueError:
    return ValueError("CUDA C has no vector types here: a CUDA target's Instruction Selection leaves scalar code "
                      "(its Target.vectors is empty)")


C = CDialect()
OPENCL = OpenCLDialect()
CUDA = CUDADialect()
