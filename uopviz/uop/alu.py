"""The Python meaning of every elementwise op: the one definition constant folding and the PYTHON runtime share.

`exec_alu` computes one op on Python scalars and stores the result as memory of `dtype` would hold it
(ints wrap, floats round, via `DType.normalize`). Idiv and Mod are floor division and floor modulo
(SPEC's ⌊a/b⌋, like Python's // and %); dividing an integer by zero raises ZeroDivisionError so that each
caller decides what it means (the simplifier declines to fold, a runtime reports it). Float edge cases
follow IEEE 754: 1/0 is ±inf, log2(0) is -inf, log2(x<0), sqrt(x<0) and sin(±inf) are nan.

`bitcast` reinterprets a scalar's bits as another dtype of the same size. `evaluate` runs a whole scalar
expression graph (elementwise ops and Bitcast), iteratively, so deep graphs are fine.
"""

from __future__ import annotations

import math
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from uopviz.dtype import DType, DTypeError, dtypes
from uopviz.uop.ops import Ops, UOp, toposort

Scalar = bool | int | float


def _isnan(x: Scalar) -> bool:
    return isinstance(x, float) and math.isnan(x)


def _recip(x: Scalar) -> float:
    if x == 0:
        return math.copysign(math.inf, x) if isinstance(x, float) else math.inf
    return 1.0 / x


def _trunc(x: Scalar) -> Scalar:
    """Round toward zero, keeping the sign (trunc(-0.5) is -0.0, as C's); ints, infinities and nan are their own
    truncation."""
    return math.copysign(float(math.trunc(x)), x) if isinstance(x, float) and math.isfinite(x) else x


def _max(a: Scalar, b: Scalar) -> Scalar:
    """max that propagates nan from either side (Python's max would keep or drop it depending on the order)."""
    return a if _isnan(a) else b if _isnan(b) else max(a, b)


def _ieee_div(a: Scalar, b: Scalar) -> float:
    """a/0 for floats: ±inf by the signs of a and of the zero, nan for 0/0 and nan/0."""
    if a == 0 or _isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _idiv(a: Scalar, b: Scalar) -> Scalar:
    """Floor division. A float divided by zero is ⌊±inf⌋ = ±inf (IEEE); an int divided by zero raises."""
    if b == 0 and (isinstance(a, float) or isinstance(b, float)):
        return _ieee_div(a, b)
    return a // b


def _mod(a: Scalar, b: Scalar) -> Scalar:
    """Floor modulo (the sign of the divisor). A float modulo zero is nan (IEEE); an int modulo zero raises."""
    if b == 0 and (isinstance(a, float) or isinstance(b, float)):
        return math.nan
    return a % b


def _div(a: Scalar, b: Scalar) -> Scalar:
    """True division (SPEC's Div = Mul(A, Recip(B))). A float divided by zero is IEEE; an int one raises."""
    if b == 0 and (isinstance(a, float) or isinstance(b, float)):
        return _ieee_div(a, b)
    return a / b


def _shl(a: int, b: int) -> int:
    if b < 0:
        raise ValueError(f"negative shift count {b}")
    return a << b


def _shr(a: int, b: int) -> int:
    if b < 0:
        raise ValueError(f"negative shift count {b}")
    return a >> b


def _exp2(x: float) -> float:
    try:
        return math.pow(2.0, x)
    except OverflowError:
        return math.inf


def _log2(x: float) -> float:
    if _isnan(x) or x < 0:
        return math.nan
    return -math.inf if x == 0 else math.log2(x)


def _sin(x: float) -> float:
    return math.nan if isinstance(x, float) and math.isinf(x) else math.sin(x)


def _sqrt(x: float) -> float:
    return math.nan if x < 0 else math.sqrt(x)


def _is_odd_int(x: float) -> bool:
    return math.isfinite(x) and x == math.floor(x) and int(x) % 2 == 1


def _pow(a: Scalar, b: Scalar, dtype: DType) -> Scalar:
    """a**b. Ints use modular exponentiation (wraps like repeated Mul, and never builds a huge number);
    a negative int exponent truncates toward zero like 1/a**|b| would. Floats follow C's pow."""
    if dtype.is_int:
        a, b = int(a), int(b)
        if b >= 0:
            return pow(a, b, 1 << dtype.bits)
        if a == 0:
            raise ZeroDivisionError("0 to a negative power")
        return 1 if a == 1 else (-1 if b % 2 else 1) if a == -1 else 0
    a, b = float(a), float(b)
    try:
        return math.pow(a, b)
    except OverflowError:
        return -math.inf if a < 0 and _is_odd_int(b) else math.inf
    except ValueError:  # 0**negative is ±inf, negative**non-integer is nan
        if a == 0:
            return math.copysign(math.inf, a) if _is_odd_int(b) else math.inf
        return math.nan


_M32 = 0xFFFFFFFF
_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(x: int, key: int) -> int:
    """Threefry-2x32 with 20 rounds (Random123): 5 groups of 4 add-rotate-xor rounds, each group followed by a
    key injection. The two 32-bit words of the counter x and of the key are their low and high halves."""
    ks = (key & _M32, key >> 32 & _M32, (key & _M32) ^ (key >> 32 & _M32) ^ 0x1BD11BDA)
    x0, x1 = (x & _M32) + ks[0] & _M32, (x >> 32 & _M32) + ks[1] & _M32
    for i in range(5):
        for r in _THREEFRY_ROTATIONS[i % 2]:
            x0 = x0 + x1 & _M32
            x1 = ((x1 << r | x1 >> (32 - r)) & _M32) ^ x0
        x0 = x0 + ks[(i + 1) % 3] & _M32
        x1 = x1 + ks[(i + 2) % 3] + i + 1 & _M32
    return x1 << 32 | x0


# op -> (function of the operands); ops whose function needs the result dtype are handled in exec_alu
_FNS: dict[Ops, Callable[..., Any]] = {
    Ops.RECIP: _recip, Ops.TRUNC: _trunc,
    Ops.ADD: operator.add, Ops.MUL: operator.mul, Ops.MAX: _max, Ops.MOD: _mod, Ops.IDIV: _idiv,
    Ops.CMPLT: operator.lt, Ops.CMPNE: operator.ne,
    Ops.XOR: operator.xor, Ops.OR: operator.or_, Ops.AND: operator.and_, Ops.SHR: _shr, Ops.SHL: _shl,
    Ops.WHERE: lambda c, a, b: a if c else b,
    Ops.SUB: operator.sub, Ops.DIV: _div, Ops.CMPGT: operator.gt, Ops.CMPGE: operator.ge, Ops.CMPLE: operator.le,
    Ops.CMPEQ: operator.eq, Ops.NOT: lambda a: a != 1,  # SPEC: Not(A) = CmpNe(A, 1)
    Ops.EXP2: _exp2, Ops.LOG2: _log2, Ops.SIN: _sin, Ops.SQRT: _sqrt,
    Ops.MULACC: lambda a, b, c: a * b + c, Ops.THREEFRY: threefry2x32,
}
_FLOAT_ONLY = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT})


def exec_alu(op: Ops, dtype: DType, operands: Sequence[Scalar]) -> Scalar:
    """The value of `op` on scalar operands, as a `dtype` (the node's dtype: bool for comparisons, the target
    for Cast). Raises ZeroDivisionError for integer division by zero, ValueError for a negative shift, and
    DTypeError when a non-finite float is cast to an integer dtype."""
    if op is Ops.CAST:
        return dtype.normalize(operands[0])
    if op is Ops.NEG:
        (a,) = operands
        return dtype.normalize(not a if dtype.is_bool else -a)
    if op is Ops.POW:
        return dtype.normalize(_pow(operands[0], operands[1], dtype))
    fn = _FNS.get(op)
    if fn is None:
        raise ValueError(f"{op.value} is not an elementwise op")
    if op in _FLOAT_ONLY:
        operands = [float(x) for x in operands]
    return dtype.normalize(fn(*operands))


def _bits_of(value: Scalar, dtype: DType) -> int:
    """The unsigned bit pattern that memory of `dtype` holds for value (bfloat16: a float32's top 16 bits)."""
    if dtype.is_float:
        v = dtype.normalize(value)
        if dtype.name == "bfloat16":
            return struct.unpack("<I", struct.pack("<f", v))[0] >> 16
        if dtype.itemsize == 1:
            return int(dtypes.fp8_to_bits([v], dtype)[0])
        return int.from_bytes(struct.pack("<" + dtype.struct_fmt, v), "little")
    return int(value) & ((1 << dtype.bits) - 1)


def bitcast(value: Scalar, src: DType, dst: DType) -> Scalar:
    """value's bits (as stored in a `src`) read as a `dst` of the same size: Bitcast of one element."""
    if src.itemsize != dst.itemsize:
        raise DTypeError(f"cannot bitcast one {src.name} ({src.itemsize} B) to one {dst.name} ({dst.itemsize} B)")
    raw = _bits_of(value, src)
    if not dst.is_float:
        return dst.normalize(raw)
    if dst.name == "bfloat16":
        return struct.unpack("<f", struct.pack("<I", raw << 16))[0]
    if dst.itemsize == 1:
        return float(dtypes.fp8_from_bits(raw, dst))
    return struct.unpack("<" + dst.struct_fmt, raw.to_bytes(dst.itemsize, "little"))[0]


_LEAVES = frozenset({Ops.CONST, Ops.DEFINE_VAR, Ops.RANGE, Ops.SPECIAL, Ops.BIND})


def _leaf_value(u: UOp, env: Mapping[Any, Scalar]) -> Scalar:
    """A leaf's value: a Const's own; a BIND's bound value; a DEFINE_VAR/RANGE/SPECIAL's from env, keyed by the
    node itself or by its name ('r{idx}' for a range)."""
    if u.op is Ops.CONST:
        return u.arg.value
    if u.op is Ops.BIND:
        return u.src[1].arg.value
    if u in env:
        return env[u]
    key = u.arg.name if u.op is Ops.DEFINE_VAR else f"r{u.arg.idx}" if u.op is Ops.RANGE else str(u.arg)
    if key not in env:
        raise KeyError(f"no value for {u.op.value} {key!r} in env")
    return env[key]


def evaluate(root: UOp, env: Mapping[Any, Scalar] | None = None) -> Scalar:
    """The value of a scalar expression graph whose inner nodes are elementwise ops (computed with exec_alu).
    Iterative (a toposort that stops at leaves), so graph depth is not limited by Python's recursion limit."""
    env = {} if env is None else env
    vals: dict[UOp, Scalar] = {}
    for u in toposort([root], gate=lambda n: n.op not in _LEAVES):
        if u.op in _LEAVES:
            vals[u] = _leaf_value(u, env)
        elif u.op in _FNS or u.op in (Ops.CAST, Ops.NEG, Ops.POW):
            vals[u] = exec_alu(u.op, u.dtype, [vals[s] for s in u.src])
        elif u.op is Ops.BITCAST:
            vals[u] = bitcast(vals[u.src[0]], u.src[0].dtype, u.dtype)
        else:
            raise ValueError(f"cannot evaluate {u.op.value}: not a scalar expression node")
    return vals[root]


def size_value(d: int | UOp) -> int:
    """A size now: an int as it is; a symbolic size (index arithmetic over bound variables) at their values.
    ValueError naming the variables that are not bound."""
    if isinstance(d, int):
        return d
    nodes = d.toposort()
    unbound = sorted({u.arg.name for u in nodes if u.op is Ops.DEFINE_VAR} -
                     {u.src[0].arg.name for u in nodes if u.op is Ops.BIND})
    if unbound:
        raise ValueError(f"size {d.render()} has no value: variable {', '.join(unbound)} is not bound "
                         "(give a size as Variable(...).bind(value))")
    return int(evaluate(d))
