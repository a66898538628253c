"""Scalar data types of the UOp dialect: sizes, ranges, promotion, the NumPy mapping and the dtypes of Python values.

Vectors are shapes in this dialect (DESIGN §2), so every DType here is a scalar.
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass
from typing import Any, Final


class DTypeError(TypeError, RuntimeError):
    """A dtype was asked for something it cannot do (unknown name, no NumPy equivalent, no promotion); a TypeError
    as in NumPy and a RuntimeError as in PyTorch."""


@dataclass(frozen=True, eq=True, order=False)
class DType:
    """One scalar type. `kind` is 'b' (bool), 'i' (signed), 'u' (unsigned), 'f' (float), 'x' (index), 'v' (void)."""

    priority: int
    itemsize: int
    name: str
    fmt: str | None
    kind: str

    def __repr__(self) -> str:
        return f"dtypes.{self.name}"

    def __hash__(self) -> int:
        return hash(self.name)  # equal dtypes have one name; hashing every field was hot in graph building

    def __eq__(self, other: object) -> bool:
        # identity first (one object per name: dtypes' table, which __reduce__ returns to), then the name decides:
        # the dataclass's comparison of all five fields was hot in graph building's `dt in (...)` tests
        return self is other or (type(other) is DType and self.name == other.name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dtypes.from_name, (self.name,))

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        """Signed, unsigned and index integers (not bool)."""
        return self.kind in ("i", "u", "x")

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "u"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def bits(self) -> int:
        return 8 * self.itemsize

    @property
    def struct_fmt(self) -> str:
        """fmt, the struct module's letter, for a dtype that has one (not bfloat16, the fp8s, index or void)."""
        if self.fmt is None:
            raise DTypeError(f"{self} has no struct format")
        return self.fmt

    @property
    def min(self) -> int | float | bool:
        if self.kind == "b":
            return False
        if self.kind == "u":
            return 0
        if self.kind in ("i", "x"):
            return -(1 << (self.bits - 1))
        if self.kind == "f":
            return -math.inf
        raise DTypeError(f"{self} has no range")

    @property
    def max(self) -> int | float | bool:
        if self.kind == "b":
            return True
        if self.kind == "u":
            return (1 << self.bits) - 1
        if self.kind in ("i", "x"):
            return (1 << (self.bits - 1)) - 1
        if self.kind == "f":
            return math.inf
        raise DTypeError(f"{self} has no range")

    @property
    def finfo_max(self) -> float:
        """Largest finite value of a float dtype."""
        return _FLOAT_MAX[self.name]

    def python_type(self) -> type:
        return {"b": bool, "f": float}.get(self.kind, int)

    def normalize(self, value: Any) -> bool | int | float:
        """Convert a Python value to this dtype exactly as a store into memory would (wrap, round, truncate)."""
        if self.kind == "b":
            return bool(value)
        if self.kind in ("i", "u", "x"):
            if isinstance(value, float):
                if not math.isfinite(value):
                    raise DTypeError(f"cannot convert {value} to {self}")
                value = int(value)  # truncation toward zero, as C casts do
            v = int(value) & ((1 << self.bits) - 1)
            if self.kind != "u" and v >= 1 << (self.bits - 1):
                v -= 1 << self.bits
            return v
        if self.kind == "f":
            f = float(value)
            if self.name == "float64" or (not math.isfinite(f) and self.name not in _FP8):
                return f
            if self.name == "bfloat16":
                return _round_bfloat16(f)
            if self.name in _FP8:
                return _round_fp8(f, self.name)
            try:
                return struct.unpack(self.struct_fmt, struct.pack(self.struct_fmt, f))[0]
            except OverflowError:
                return math.copysign(math.inf, f)
        raise DTypeError(f"{self} holds no values")


def _round_bfloat16(v: float) -> float:
    """Round-to-nearest-even to bfloat16 (the top 16 bits of a float32)."""
    try:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", bits))[0]


# the fp8 formats (torch's names): mantissa bits, exponent bias, largest finite value, and whether a value beyond it
# saturates to it (e4m3fn has no infinities: torch's cast saturates, inf included) or becomes inf (e5m2, IEEE-like)
_FP8: Final = {"float8_e4m3fn": (3, 7, 448.0, True), "float8_e5m2": (2, 15, 57344.0, False)}


def _round_fp8(v: float, name: str) -> float:
    """v rounded to the nearest fp8 value of format `name` (ties to even; subnormals on the fixed grid below the
    least normal), beyond the largest finite value saturated or inf as torch's casts do; nan stays nan. One rounding
    of v itself (torch rounds a double to float32 first: a tie or two in 2^29 of float64 inputs differ)."""
    mant, bias, top, saturate = _FP8[name]
    a = abs(v)
    if math.isnan(a):
        return v
    if a <= 4 * top:
        e = max(math.frexp(a)[1] - 1, 1 - bias)  # the exponent of a's binade, or the least normal's for subnormals
        q = 2.0 ** (e - mant)
        a = round(a / q) * q  # a / q is exact (a power of two), round() takes a tie to the even integer
    if a > top:
        a = top if saturate else math.inf
    return math.copysign(a, v)


def _fp8_bits(v: float, name: str) -> int:
    """The bit pattern of v's fp8 value (nan as 0x7F with v's sign, inf as 0x7C)."""
    mant, bias, _, _ = _FP8[name]
    r = _round_fp8(v, name)
    sign = 0x80 if math.copysign(1.0, r) < 0 else 0
    a = abs(r)
    if math.isnan(a):
        return sign | 0x7F
    if math.isinf(a):
        return sign | 0x7C
    if a == 0 or math.frexp(a)[1] - 1 < 1 - bias:  # subnormal: exponent field 0, a multiple of the least one
        return sign | int(a / 2.0 ** (1 - bias - mant))
    e = math.frexp(a)[1] - 1
    return sign | (e + bias) << mant | int((a / 2.0**e - 1) * 2**mant)


@functools.cache
def _fp8_table(name: str) -> Any:
    """The float32 value of each of the 256 fp8 bit patterns."""
    import numpy as np

    mant, bias, _, saturate = _FP8[name]
    out = []
    top = (1 << (7 - mant)) - 1  # the exponent field of all ones
    for b in range(256):
        e, m = (b & 0x7F) >> mant, b & ((1 << mant) - 1)
        if (b & 0x7F) == 0x7F or (not saturate and e == top and m):  # e4m3fn's one nan; e5m2's as IEEE's
            v = math.nan
        elif not saturate and e == top:
            v = math.inf
        else:
            v = (m / 2**mant if e == 0 else 1 + m / 2**mant) * 2.0 ** (max(e, 1) - bias)
        out.append(-v if b & 0x80 else v)
    return np.array(out, np.float32)


_FLOAT_MAX: Final = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
                     "float64": 1.7976931348623157e308, **{k: v[2] for k, v in _FP8.items()}}


class dtypes:
    """All dtypes, with C-style aliases (`dtypes.float`, `dtypes.int`, ...)."""

    void: Final = DType(-1, 0, "void", None, "v")
    bool: Final = DType(0, 1, "bool", "?", "b")
    int8: Final = DType(1, 1, "int8", "b", "i")
    uint8: Final = DType(2, 1, "uint8", "B", "u")
    int16: Final = DType(3, 2, "int16", "h", "i")
    uint16: Final = DType(4, 2, "uint16", "H", "u")
    int32: Final = DType(5, 4, "int32", "i", "i")
    uint32: Final = DType(6, 4, "uint32", "I", "u")
    int64: Final = DType(7, 8, "int64", "q", "i")
    uint64: Final = DType(8, 8, "uint64", "Q", "u")
    index: Final = DType(9, 8, "index", "q", "x")
    float16: Final = DType(10, 2, "float16", "e", "f")
    bfloat16: Final = DType(11, 2, "bfloat16", None, "f")
    float32: Final = DType(12, 4, "float32", "f", "f")
    float64: Final = DType(13, 8, "float64", "d", "f")
    # 8-bit floats (torch's names; tinygrad's below): computed in float32, stored as their bit patterns
    float8_e4m3fn: Final = DType(14, 1, "float8_e4m3fn", None, "f")
    float8_e5m2: Final = DType(15, 1, "float8_e5m2", None, "f")

    half = float16
    float = float32
    double = float64
    char = int8
    uchar = uint8
    short = int16
    ushort = uint16
    int = int32
    uint = uint32
    long = int64
    ulong = uint64
    fp8e4m3 = float8_e4m3fn
    fp8e5m2 = float8_e5m2

    default_float: DType = float32
    default_int: DType = int32

    @staticmethod
    def all() -> tuple[DType, ...]:
        return _ALL

    @staticmethod
    def from_name(name: str) -> DType:
        try:
            return _BY_NAME[name]
        except KeyError:
            raise DTypeError(f"unknown dtype {name!r}; known: {', '.join(sorted(_BY_NAME))}") from None

    @staticmethod
    def from_py(value: Any, dtype: DType | None = None) -> DType:
        """The dtype a Python scalar (or nested list of them) gets: `values_dtype`'s rule, or dtype checked."""
        return values_dtype(*exact_array(value), dtype)

    @staticmethod
    def from_numpy(dt: Any) -> DType:
        import numpy as np

        name = np.dtype(dt).name
        if name not in _NUMPY_NAMES:
            raise DTypeError(f"NumPy dtype {name} has no uopviz equivalent")
        return _BY_NAME[name]

    @staticmethod
    def to_numpy(dt: DType) -> Any:
        """NumPy dtype that stores `dt`; index is int64. bfloat16 and void have none."""
        import numpy as np

        if dt == dtypes.index:
            return np.dtype(np.int64)
        if dt.name not in _NUMPY_NAMES:
            raise DTypeError(f"{dt} has no NumPy equivalent")
        return np.dtype(dt.name)

    @staticmethod
    def storage_numpy(dt: DType) -> Any:
        """NumPy dtype of a device buffer's elements: to_numpy's, but a float without one (bfloat16, the fp8s) as
        its bit patterns."""
        return dtypes.to_numpy(dtypes.uint_of(dt) if dt.kind == "f" and dt.fmt is None else dt)

    @staticmethod
    def uint_of(dt: DType) -> DType:
        """The unsigned int of dt's size: what holds its bit pattern (an emulated float's in memory)."""
        return {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[dt.itemsize]

    @staticmethod
    def fp8_from_bits(bits: Any, dt: DType) -> Any:
        """fp8 bit patterns (a uint8 array) as float32 values."""
        return _fp8_table(dt.name)[bits]

    @staticmethod
    def fp8_to_bits(values: Any, dt: DType) -> Any:
        """Float values (an array) rounded to fp8 as torch's cast rounds them, as uint8 bit patterns."""
        import numpy as np

        flat = [_fp8_bits(float(v), dt.name) for v in np.asarray(values, np.float64).reshape(-1)]
        return np.array(flat, np.uint8).reshape(np.shape(values))


_ALL: Final = tuple(v for v in vars(dtypes).values() if isinstance(v, DType) and v.name != "void")
_BY_NAME: Final = {**{k: v for k, v in vars(dtypes).items() if isinstance(v, DType)}, **{d.name: d for d in _ALL},
                   "void": dtypes.void}
_NUMPY_NAMES: Final = {d.name for d in _ALL if d.kind in "biuf" and d.fmt is not None}


def _parents(d: DType) -> tuple[DType, ...]:
    """Edges of the promotion lattice: every value of d is representable (or, for ints→float, the usual rule) above."""
    t = dtypes
    return {
        t.bool: (t.int8, t.uint8), t.int8: (t.int16,), t.int16: (t.int32,), t.int32: (t.int64,),
        t.int64: (t.float16, t.bfloat16), t.uint8: (t.int16, t.uint16), t.uint16: (t.int32, t.uint32),
        t.uint32: (t.int64, t.uint64), t.uint64: (t.float16, t.bfloat16), t.index: (t.float16, t.bfloat16),
        t.float16: (t.float32,), t.bfloat16: (t.float32,), t.float32: (t.float64,), t.float64: (),
        t.float8_e4m3fn: (t.float16, t.bfloat16), t.float8_e5m2: (t.float16, t.bfloat16),
    }[d]


def _ancestors(d: DType) -> set[DType]:
    out = {d}
    for p in _parents(d):
        out |= _ancestors(p)
    return out


def least_upper_dtype(*ds: DType) -> DType:
    """The smallest dtype every argument promotes to (JAX-style lattice: int8+uint8→int16, int64+float16→float16)."""
    return _least_upper(ds)


@functools.cache
def _least_upper(ds: tuple[DType, ...]) -> DType:  # every binary op asks: kept per tuple of dtypes
    if not ds:
        raise DTypeError("least_upper_dtype needs at least one dtype")
    if any(d == dtypes.void for d in ds):
        raise DTypeError("void does not promote")
    if dtypes.index in ds and all(d.is_int or d.is_bool for d in ds):
        return dtypes.index
    common = set.intersection(*(_ancestors(d) for d in ds))
    return min(common, key=lambda d: d.priority)


def sum_acc_dtype(d: DType) -> DType:
    """Accumulator dtype for a sum: small ints widen to int32/uint32, halves accumulate in float32."""
    if d.is_unsigned:
        return least_upper_dtype(d, dtypes.uint32)
    if d.is_int or d.is_bool:
        return d if d == dtypes.index else least_upper_dtype(d, dtypes.int32)
    return least_upper_dtype(d, dtypes.float32)


# ---------------------------------------------------------------- Python values
_KINDS: Final = "bif"  # bool < int < float: how NumPy promotes the Python values of one list
_DEFAULT_INTS: Final = (dtypes.int64, dtypes.uint64)  # after the default int, NumPy's choices for wider ints


def values_dtype(arr: Any, kind: str, dtype: DType | None = None) -> DType:
    """The dtype of Python values (`exact_array`'s array and kind): `dtype`, checked against them, or by NumPy's rule.

    With no dtype: bools stay bool; ints get the default int when every value fits, else int64, else uint64
    (OverflowError beyond); floats (and ints mixed with them) get the default float unless a finite value would
    overflow it to inf, else float64. A dtype given is checked: an int outside its range, a float truncating
    outside it, or a finite value it would round to inf is an OverflowError naming the value (nan given an int
    dtype is a ValueError); rounding to the nearest float is fine.
    """
    dt = dtype or _default_dtype(arr, kind)
    _check_fits(arr, kind, dt)
    return dt


def exact_array(value: Any) -> tuple[Any, str]:
    """Python numbers (a scalar or nested lists) in a NumPy array that holds them exactly (bool; int64, uint64
    or object ints; float64), so converting it to their dtype rounds once, and their kind: 'b' < 'i' < 'f', as
    NumPy promotes them. A ragged list raises NumPy's ValueError; anything but numbers and bools a DTypeError."""
    import numpy as np

    arr = np.array(value)
    if arr.dtype.kind in "biu":
        return arr, "b" if arr.dtype.kind == "b" else "i"
    # NumPy gives ints that need more than one of int64 and uint64 (or more than 64 bits) float64 or object
    # elements: look at the Python values themselves where that may have happened
    if arr.dtype.kind == "f" and not np.any(np.abs(arr) >= 2.0**63):
        return arr.astype(np.float64), "f"
    if arr.dtype.kind not in "fO":
        raise DTypeError(f"a Tensor holds numbers and bools; the data has {arr.dtype} elements")
    obj = np.array(value, dtype=object)
    kind = max((_kind(v) for v in obj.flat), key=_KINDS.index)
    if kind != "f":
        return obj, kind
    return np.array([_to_float(v) for v in obj.flat], np.float64).reshape(obj.shape), "f"


def _kind(v: Any) -> str:
    import numpy as np

    if isinstance(v, (bool, np.bool_)):
        return "b"
    if isinstance(v, (int, np.integer)):
        return "i"
    if isinstance(v, (float, np.floating)):
        return "f"
    raise DTypeError(f"a Tensor holds numbers and bools; the data has a {type(v).__name__}: {v!r}")


def _to_float(v: Any) -> float:
    try:
        return float(v)
    except OverflowError:
        text = str(v)
        raise OverflowError(f"Python int {text[:12]}... ({len(text)} digits) is too large for any float dtype "
                            "(float64 ends near 1.8e308)") from None


def _int_bounds(arr: Any, kind: str) -> tuple[Any, Any]:
    """(min, max) of ints or bools as Python ints; of floats truncated toward zero as int casts do (inf kept)."""
    import numpy as np

    if kind == "f":
        def trunc(v: float) -> int | float:
            return int(v) if math.isfinite(v) else v
        return trunc(float(np.min(arr))), trunc(float(np.max(arr)))
    return int(np.min(arr)), int(np.max(arr))


def _largest(arr: Any, kind: str) -> Any:
    """The finite value of largest magnitude (None if there is none): the one a float dtype overflows first."""
    import numpy as np

    if kind == "f":
        finite = arr[np.isfinite(arr)]
        return float(finite[np.argmax(np.abs(finite))]) if finite.size else None
    lo, hi = _int_bounds(arr, kind)
    return lo if -lo > hi else hi


def _default_dtype(arr: Any, kind: str) -> DType:
    if kind == "b":
        return dtypes.bool
    if kind == "f":
        return dtypes.float64 if _overflows(arr, kind, dtypes.default_float) is not None else dtypes.default_float
    lo, hi = _int_bounds(arr, kind) if arr.size else (0, 0)
    for dt in (dtypes.default_int, *_DEFAULT_INTS):
        if dt.min <= lo and hi <= dt.max:
            return dt
    if lo < 0 and hi <= dtypes.uint64.max and lo >= dtypes.int64.min:
        raise OverflowError(f"Python ints {lo} and {hi} have no dtype in common: {hi} needs uint64, which cannot "
                            f"hold {lo}; pass dtype=float64 (or split the data)")
    bad = lo if lo < dtypes.int64.min else hi
    raise OverflowError(f"Python int {bad} does not fit in int64 or uint64 (or any integer dtype); "
                        "pass dtype=float64 to store it rounded")


def _overflows(arr: Any, kind: str, dt: DType) -> Any:
    """The finite value that float dtype dt rounds to inf, if there is one (else None)."""
    if kind == "b" or not arr.size or (v := _largest(arr, kind)) is None:
        return None
    try:
        return v if math.isinf(dt.normalize(v)) else None
    except OverflowError:  # an int beyond float64
        return v


def _check_fits(arr: Any, kind: str, dt: DType) -> None:
    import numpy as np

    if dt.is_bool or kind == "b" or not arr.size:
        return
    if dt.is_float:
        if (bad := _overflows(arr, kind, dt)) is not None:
            raise OverflowError(f"{bad!r} overflows {dt.name} (whose largest finite value is {dt.finfo_max:.6g}); "
                                "pass a wider dtype")
        return
    if kind == "f" and np.isnan(arr).any():
        raise ValueError(f"cannot convert nan to {dt.name}: integer dtypes have no nan")
    lo, hi = _int_bounds(arr, kind)
    if lo < dt.min or hi > dt.max:
        raise OverflowError(f"{lo if lo < dt.min else hi!r} does not fit in {dt.name} (range {dt.min}..{dt.max}); "
                            "pass a wider dtype")
