"""Elementwise Tensor ops: NumPy broadcasting and promotion, arithmetic, comparisons, math, activations, bits.

Every op here builds SPEC primitives (or its decomposed ops Exp2/Log2/Sin/Sqrt/Pow) over sources of one shape
and one dtype: operands are promoted with `least_upper_dtype` and broadcast with explicit reshape + expand first.
Python scalars are "weak" (NumPy 2 / NEP 50): they take the tensor's dtype unless their kind is wider, so
`int8_tensor + 1` stays int8 and `int_tensor * 1.5` becomes the default float.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uopviz.dtype import DType, DTypeError, dtypes, least_upper_dtype
from uopviz.tensor import special
from uopviz.tensor.template import templated
from uopviz.tensor.util import (
    ArgumentError,
    Shape,
    broadcast_shapes,
    const_uop,
    expand_to,
    normalize_axes,
    to_dtype,
)
from uopviz.uop.ops import Ops, UOp

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

Scalar = bool | int | float
_LN2 = math.log(2)


_SCALARS = frozenset({bool, int, float})


def _is_scalar(x: Any) -> bool:
    """A Python scalar (weakly typed). NumPy scalars carry a dtype, so they are not."""
    return type(x) in _SCALARS


def _weak_dtype(dt: DType, v: Scalar) -> DType:
    """The dtype of `tensor op v`: the tensor's, unless v is of a wider kind (int over bool, float over int)."""
    if type(v) is float:  # the most common: a scale, a rate, an epsilon
        return dt if dt.is_float else dtypes.default_float
    if isinstance(v, bool):
        out = dt
    elif isinstance(v, int):
        out = dtypes.default_int if dt.is_bool else dt
    else:
        out = dt if dt.is_float else dtypes.default_float
    if out.is_int and isinstance(v, int) and not out.min <= v <= out.max:
        raise OverflowError(f"Python int {v} is out of range for {out.name}; cast the tensor to a wider dtype first")
    return out


def _exponential_linear(x: Tensor, alpha: float, scale: float) -> Tensor:
    """x for x > 0, else alpha·expm1(scale·x): elu and celu. The negative side computes on min(x, 0) by where, so a
    large x's overflowing exponential cannot turn its zero gradient into NaN."""
    pos = x.gt(0)
    return pos.where(x, special.expm1(pos.where(0, x).mul(scale)).mul(alpha))


def _bounded(x: Tensor, lo: float, hi: float) -> Tensor:
    """x limited to [lo, hi], the bound itself chosen at a bound, so the gradient is 0 there (PyTorch's hardtanh
    and relu6; clip passes it, as torch.clamp). NaN stays NaN."""
    return x.le(lo).where(lo, x.ge(hi).where(hi, x))


class ElementwiseMixin:
    """Elementwise ops of Tensor."""

    __slots__ = ()

    # ---------------------------------------------------------------- operands
    def _alu(self: Tensor, op: Ops, *others: Tensor) -> Tensor:
        if len(others) == 1:  # most ops: no list of the sources
            return self._new(UOp(op, (self._uop, others[0]._uop)))
        return self._new(UOp(op, (self._uop, *[o._uop for o in others])))

    def _const_like(self: Tensor, value: Scalar, dtype: DType | None = None) -> Tensor:
        """A constant of self's shape and device (and dtype unless given)."""
        return self._new(const_uop(value, dtype or self.dtype, self.shape))

    def _coerce(self: Tensor, x: Any) -> Tensor:
        """x as a Tensor on self's device (a Python scalar gets the weak dtype it has in `self op x`)."""
        if isinstance(x, type(self)):
            return x
        if _is_scalar(x):
            return self._new(const_uop(x, _weak_dtype(self.dtype, x), ()))
        return type(self)(x, device=self.device)

    def _pair(self: Tensor, x: Any, reverse: bool = False) -> tuple[Tensor, Tensor]:
        """(self, x) — or (x, self) when reverse — promoted to one dtype and broadcast to one shape."""
        u = self._uop
        if type(x) in _SCALARS:  # the constant made at self's shape at once (the graph _coerce and broadcasting give)
            dt = _weak_dtype(u.dtype, x)
            a, b = self if dt is u.dtype else self.cast(dt), self._new(const_uop(x, dt, u.shape))
            return (b, a) if reverse else (a, b)
        y = x if type(x) is type(self) else self._coerce(x)
        if y._device != self._device:
            self._same_device(y)
        if (dt := u.dtype) is (v := y._uop).dtype and dt is not dtypes.void and ((s := u.shape) is v.shape or
                                                                              s == v.shape):
            return (y, self) if reverse else (self, y)  # one dtype and shape already (most ops of a model)
        if dt is not v.dtype or dt is dtypes.void:  # void: least_upper_dtype's error
            dt = least_upper_dtype(dt, v.dtype)
        shape = s if (s := u.shape) == (t := v.shape) else broadcast_shapes(s, t)
        a = self if dt is u.dtype else self.cast(dt)
        b = y if dt is v.dtype else y.cast(dt)
        if s != shape:  # a cast keeps the shape
            a = self._new(expand_to(a._uop, shape))
        if t != shape:
            b = self._new(expand_to(b._uop, shape))
        return (b, a) if reverse else (a, b)

    def _broadcast_uop(self: Tensor, shape: Shape) -> Tensor:
        return self if self.shape == shape else self._new(expand_to(self.uop, shape))

    def _float(self: Tensor) -> Tensor:
        """Self in a float dtype (ints and bools become the default float), for math that needs one."""
        return self if self.dtype.is_float else self.cast(dtypes.default_float)

    def _need(self: Tensor, what: str, ok: bool, hint: str) -> None:
        if not ok:
            raise DTypeError(f"{what} is not defined for {self.dtype.name} tensors; {hint}")

    # ---------------------------------------------------------------- arithmetic
    def add(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        a, b = self._pair(x, reverse)
        return a._alu(Ops.OR if a.dtype.is_bool else Ops.ADD, b)

    def sub(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        a, b = self._pair(x, reverse)
        a._need("subtraction", not a.dtype.is_bool, "use ^ or logical_not, or cast to an int dtype")
        return a._alu(Ops.ADD, -b)

    def mul(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        a, b = self._pair(x, reverse)
        return a._alu(Ops.AND if a.dtype.is_bool else Ops.MUL, b)

    def div(self: Tensor, x: Any, reverse: bool = False, rounding_mode: str | None = None) -> Tensor:
        """True division (ints give the default float, as in NumPy): a · recip(b). rounding_mode "trunc" rounds
        the quotient toward zero, "floor" down (PyTorch's; ints then stay ints)."""
        if rounding_mode == "floor":
            return self.floordiv(x, reverse)
        if rounding_mode == "trunc":
            a, b = self._pair(x, reverse)
            if a.dtype.is_float:
                return a.div(b).trunc()
            q = a.floordiv(b)
            return q.add(a.fmod(b).ne(0).bitwise_and(a.lt(0).ne(b.lt(0))).cast(q.dtype))
        if rounding_mode is not None:
            raise ArgumentError(f"rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        a, b = self._pair(x, reverse)
        a, b = a._float(), b._float()
        if a.dtype.itemsize == 1:  # fp8: 1/b rounded to 3 or 2 mantissa bits first would be up to 11% off
            return a.cast(dtypes.float32).div(b.cast(dtypes.float32)).cast(a.dtype)
        return a._alu(Ops.MUL, b.reciprocal())

    def floordiv(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """NumPy's //: Idiv (floor division) for ints, floor(a/b) for floats."""
        a, b = self._pair(x, reverse)
        if a.dtype.is_bool:
            a, b = a.cast(dtypes.int8), b.cast(dtypes.int8)
        return a._int_div(Ops.IDIV, b) if a.dtype.is_int else a.div(b).floor()

    def mod(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """NumPy's %: the sign of the divisor. Mod for ints, a − b·floor(a/b) for floats."""
        a, b = self._pair(x, reverse)
        if a.dtype.is_bool:
            a, b = a.cast(dtypes.int8), b.cast(dtypes.int8)
        return a._int_div(Ops.MOD, b) if a.dtype.is_int else a.sub(b.mul(a.div(b).floor()))

    def _int_div(self: Tensor, op: Ops, b: Tensor) -> Tensor:
        """Idiv/Mod with NumPy's answers where C's would trap: x // 0 = x % 0 = 0, and (signed) x // -1 = -x
        (wrapping at the minimum) and x % -1 = 0; the divisor there is replaced by 1."""
        zero = b._const_like(0)
        trap = b.eq(0).add(b.eq(-1)) if not self.dtype.is_unsigned else b.eq(0)
        out = self._alu(op, trap.where(b._const_like(1), b))
        if op is Ops.IDIV and not self.dtype.is_unsigned:
            out = b.eq(-1).where(-self, out)
        return trap.where(zero, out) if op is Ops.MOD else b.eq(0).where(zero, out)

    def pow(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """a ** b. Floats use Pow (C's pow edge cases; float32 and narrower floats computed in float64); ints
        multiply by repeated squaring, so they wrap like NumPy; a negative int exponent gives what truncating
        1/a**|b| would (0 unless |a| = 1). A float exponent makes an int base the default float, whatever its value
        (torch's: int32 ** 2.0 is float32)."""
        if not reverse and type(x) is float and not self.dtype.is_float:
            return self._float().pow(x)
        if not reverse and _is_scalar(x) and not isinstance(x, bool):
            if isinstance(x, int) and not self.dtype.is_float:
                if x < 0:
                    raise ArgumentError(f"integers to negative integer powers are not allowed ({x}); "
                                     "cast the base to a float dtype first")
                return self._int_pow_const(x)
            if x == 2:
                return self.mul(self)
            if x == 0.5:
                return self._float().sqrt()
            # small integral exponents as products, as torch does (within 2 ulp, C's special cases kept: -0 ** -1 is
            # -inf, -0 ** -2 is inf; -2 squares 1/a, as 1/(a·a) would lose the subnormal results of large a): no
            # float64 Pow in a float32 kernel, which GPUs run slowly, or lack
            if x == 3:
                return self.mul(self).mul(self)
            if x == -1:
                return self.reciprocal()
            if x == -2:
                return self.reciprocal().square()
        a, b = self._pair(x, reverse)
        if a.dtype.is_float and a.dtype.itemsize < 8:
            # in float64 and rounded once, as libm's powf carries log2 a and the product in double: Exp2(Log2(a)·b)
            # in float32 amplifies their roundings by |b·log2 a|·ln 2 (98 ulp near the ends of the range)
            wide = a.cast(dtypes.float64)
            return wide._alu(Ops.POW, b.cast(dtypes.float64)).cast(a.dtype)
        if a.dtype.is_float:
            return a._alu(Ops.POW, b)
        if a.dtype.is_bool:
            a, b = a.cast(dtypes.int8), b.cast(dtypes.int8)
        return a._int_pow(b)

    def _int_pow_const(self: Tensor, e: int) -> Tensor:
        x = self.cast(dtypes.int8) if self.dtype.is_bool else self
        out, base = x._const_like(1), x
        while e:
            if e & 1:
                out = out._alu(Ops.MUL, base)
            e >>= 1
            if e:
                base = base._alu(Ops.MUL, base)
        return out

    def _int_pow(self: Tensor, e: Tensor) -> Tensor:
        """self ** e for int tensors: square-and-multiply over the bits of e, with where per bit."""
        one, zero = self._const_like(1), self._const_like(0)
        out, base = one, self
        for k in range(e.dtype.bits - (0 if e.dtype.is_unsigned else 1)):
            bit = e._alu(Ops.SHR, self._const_like(k)).bitwise_and(1).ne(zero)
            out = bit.where(out._alu(Ops.MUL, base), out)
            base = base._alu(Ops.MUL, base)
        if e.dtype.is_unsigned:
            return out
        neg_one = self._const_like(-1)
        odd = e.bitwise_and(1).ne(zero)
        negative = self.eq(one).where(one, self.eq(neg_one).where(odd.where(neg_one, one), zero))
        return e.lt(zero).where(negative, out)

    def neg(self: Tensor) -> Tensor:
        self._need("negation", not self.dtype.is_bool, "use ~ or logical_not")
        return self._alu(Ops.MUL, self._const_like(-1))

    def reciprocal(self: Tensor) -> Tensor:
        return self._float()._alu(Ops.RECIP)

    def maximum(self: Tensor, x: Any) -> Tensor:
        a, b = self._pair(x)
        return a._alu(Ops.OR if a.dtype.is_bool else Ops.MAX, b)

    def minimum(self: Tensor, x: Any) -> Tensor:
        """min(a, b) = −max(−a, −b) for floats; ~max(~a, ~b) for ints, which cannot overflow."""
        a, b = self._pair(x)
        if a.dtype.is_bool:
            return a._alu(Ops.AND, b)
        if a.dtype.is_float:
            return -(-a)._alu(Ops.MAX, -b)
        return ~(~a)._alu(Ops.MAX, ~b)

    def where(self: Tensor, x: Any, y: Any) -> Tensor:
        """x where self (the condition) is true, else y; all three broadcast, x and y promoted."""
        cond = self if self.dtype.is_bool else self.ne(0)
        if _is_scalar(x) and _is_scalar(y):  # two scalars: x sets the dtype, y is weak against it
            x = cond._new(const_uop(x, dtypes.from_py(x), ()))
        if _is_scalar(x):
            q, p = cond._coerce(y)._pair(x)
        else:
            p, q = cond._coerce(x)._pair(y)
        cond._same_device(p)
        if (s := cond.shape) is (t := p.shape) or s == t:  # p and q have one shape (_pair's)
            return cond._alu(Ops.WHERE, p, q)
        shape = broadcast_shapes(s, t)
        c, p, q = cond._broadcast_uop(shape), p._broadcast_uop(shape), q._broadcast_uop(shape)
        return c._alu(Ops.WHERE, p, q)

    # ---------------------------------------------------------------- comparisons (bool results)
    def lt(self: Tensor, x: Any) -> Tensor:
        a, b = self._pair(x)
        return a._alu(Ops.CMPLT, b)

    def gt(self: Tensor, x: Any) -> Tensor:
        a, b = self._pair(x)
        return b._alu(Ops.CMPLT, a)

    def ne(self: Tensor, x: Any) -> Tensor:
        a, b = self._pair(x)
        return a._alu(Ops.CMPNE, b)

    def eq(self: Tensor, x: Any) -> Tensor:
        return self.ne(x).logical_not()

    def le(self: Tensor, x: Any) -> Tensor:
        """a <= b; for floats (a < b) | (a == b), so that NaN compares false."""
        a, b = self._pair(x)
        return a.lt(b).add(a.eq(b)) if a.dtype.is_float else b.lt(a).logical_not()

    def ge(self: Tensor, x: Any) -> Tensor:
        a, b = self._pair(x)
        return b.lt(a).add(a.eq(b)) if a.dtype.is_float else a.lt(b).logical_not()

    def logical_not(self: Tensor) -> Tensor:
        x = self if self.dtype.is_bool else self.ne(0)
        return x._alu(Ops.CMPNE, x._const_like(True))

    def isnan(self: Tensor) -> Tensor:
        return self._alu(Ops.CMPNE, self) if self.dtype.is_float else self._const_like(False, dtypes.bool)

    # ---------------------------------------------------------------- bitwise (ints and bools)
    def _bitwise(self: Tensor, op: Ops, x: Any, reverse: bool) -> Tensor:
        """A bitwise op; a Python int that fits the tensor's width with the other signedness is taken as that bit
        pattern (`int32 | 0xFFFFFFFF` is `| -1`, as in torch)."""
        dt = self.dtype
        if type(x) is int and dt.is_int and not dt.min <= x <= dt.max and -(1 << (dt.bits - 1)) <= x < (1 << dt.bits):
            x = x - (1 << dt.bits) if x > dt.max else x + (1 << dt.bits)
        a, b = self._pair(x, reverse)
        a._need(f"bitwise {op.value}", a.dtype.is_int or a.dtype.is_bool, "cast to an int dtype first")
        return a._alu(op, b)

    def bitwise_and(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(Ops.AND, x, reverse)

    def bitwise_or(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(Ops.OR, x, reverse)

    def bitwise_xor(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        return self._bitwise(Ops.XOR, x, reverse)

    def bitwise_not(self: Tensor) -> Tensor:
        """~x: logical not for bools, x ^ all-ones for ints."""
        if self.dtype.is_bool:
            return self.logical_not()
        self._need("bitwise not", self.dtype.is_int, "cast to an int dtype first")
        return self._alu(Ops.XOR, self._const_like(-1))

    def _shift(self: Tensor, op: Ops, x: Any, reverse: bool) -> Tensor:
        a, b = self._pair(x, reverse)
        a._need("a shift", a.dtype.is_int, "cast to an int dtype first")
        return a._alu(op, b)

    def lshift(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """a << b; shifting by the width of the dtype or more is undefined (as in C)."""
        return self._shift(Ops.SHL, x, reverse)

    def rshift(self: Tensor, x: Any, reverse: bool = False) -> Tensor:
        """a >> b: arithmetic for signed, logical for unsigned dtypes."""
        return self._shift(Ops.SHR, x, reverse)

    # ---------------------------------------------------------------- math (ints become the default float)
    def exp2(self: Tensor) -> Tensor:
        return self._float()._alu(Ops.EXP2)

    def _math(self: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
        """fn of self as a float; halves are computed in float32 and rounded once at the end (as NumPy does), so
        a formula of several ops does not pile up half-precision roundings."""
        x = self._float()
        return fn(x.cast(dtypes.float32)).cast(x.dtype) if x.dtype.itemsize < 4 else fn(x)

    def exp(self: Tensor) -> Tensor:
        """e^x = 2^n · e^r with n = round(x·log2 e) and r = x − n·ln 2 in two parts (Cody–Waite, as libm does), e^r
        by its polynomial (uopviz.tensor.special.exp): exp2(x·log2 e) alone rounds that product first, an error
        |x·log2 e|·ln 2 ulp wide (57 ulp at 80). 2^n is two exact powers of two made from n's bits, so no
        intermediate overflows or flushes early."""
        return self._math(special.exp)

    def _exp_of_shifted(self: Tensor) -> Tensor:
        """e^x as exp2(x·log2 e), for the softmax family's x − max (and sigmoid's −x): the product's rounding costs
        |x|·log2 e·ln 2 ulp, only in terms far below the row's largest, which barely count in its sum; the accurate
        exp's extra operations would make the scheduler store e^x for its two reads (a softmax in two kernels, not
        one)."""
        return self._math(lambda x: x.mul(1 / _LN2).exp2())

    def log2(self: Tensor) -> Tensor:
        return self._float()._alu(Ops.LOG2)

    def log(self: Tensor) -> Tensor:
        return self._math(lambda x: x.log2().mul(_LN2))

    def sin(self: Tensor) -> Tensor:
        return self._float()._alu(Ops.SIN)

    def cos(self: Tensor) -> Tensor:
        """sin(2x) / (2·sin x): both sines are accurate over the whole range (x·2 is exact), so the quotient is
        too, where sin(π/2 − x) would lose every digit of a large x in the subtraction. 1 below |x| = 1e-18 (where
        cos rounds to 1 and 1/sin x could overflow); only in the top binade, where 2x overflows, 1 − 2·sin²(x/2)
        (accurate to the float's ulp in absolute terms, not relative to a cos near 0)."""
        def f(x: Tensor) -> Tensor:
            safe = x.abs().lt(1e-18).where(1.0, x)  # the ratio is 0/0 at 0, and its gradient NaN: not taken there
            ratio = safe.mul(2).sin().div(safe.sin().mul(2))
            huge = x.mul(0.5).sin().square().mul(-2).add(1)
            return x.abs().lt(1e-18).where(1.0, x.abs().gt(x.dtype.finfo_max / 2).where(huge, ratio))
        return self._math(f)

    def tan(self: Tensor) -> Tensor:
        return self._math(lambda x: x.sin().div(x.cos()))

    def sqrt(self: Tensor) -> Tensor:
        return self._float()._alu(Ops.SQRT)

    def rsqrt(self: Tensor) -> Tensor:
        return self.sqrt().reciprocal()

    def abs(self: Tensor) -> Tensor:
        if self.dtype.is_bool or self.dtype.is_unsigned:
            return self
        return self._alu(Ops.MAX, -self)

    def sign(self: Tensor) -> Tensor:
        """-1, 0 or 1 in self's dtype; NaN stays NaN (and ±0 stay themselves, carrying no gradient: sign is flat)."""
        if self.dtype.is_bool or self.dtype.is_unsigned:
            return self.ne(0).cast(self.dtype)
        return self.gt(0).where(self._const_like(1), self.lt(0).where(self._const_like(-1), self.detach()))

    def trunc(self: Tensor) -> Tensor:
        return self._alu(Ops.TRUNC) if self.dtype.is_float else self

    def floor(self: Tensor) -> Tensor:
        """trunc(x) − (x < trunc(x))."""
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        return t.sub(self.lt(t).cast(self.dtype))

    def ceil(self: Tensor) -> Tensor:
        """trunc(x) + (x > trunc(x))."""
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        return t.add(self.gt(t).cast(self.dtype))

    # ---------------------------------------------------------------- activations
    def relu(self: Tensor) -> Tensor:
        """max(x, 0); NaN stays NaN. Its gradient at 0 is 0 (PyTorch's), where Max would split a tie in half."""
        return self.le(0).where(0, self)

    def sigmoid(self: Tensor) -> Tensor:
        """1 / (1 + e^-x): saturates to 0 and 1 without overflow trouble (1/inf = 0). e^-x as exp2(−x·log2 e), the
        logistic 1/(1 + 2^z) whose gradient rule (tensor/gradient.py) keeps its digits where s² underflows; the
        accurate exp's composition hid that form and lost them."""
        return self._math(lambda x: x.neg()._exp_of_shifted().add(1).reciprocal())

    def tanh(self: Tensor) -> Tensor:
        """Accurate near 0 and exactly ±1 far out (uopviz.tensor.special)."""
        return self._math(special.tanh)

    @templated
    def gelu(self: Tensor, approximate: str = "none") -> Tensor:
        """PyTorch's GELU: x·Φ(x) = 0.5·x·(1 + erf(x/√2)); approximate="tanh" gives the tanh approximation
        0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))."""
        if approximate == "none":
            return self._math(special.gelu)
        if approximate != "tanh":
            raise ValueError(f"gelu approximate must be 'none' or 'tanh', got {approximate!r}")

        def f(x: Tensor) -> Tensor:
            inner = x.add(x.mul(x).mul(x).mul(0.044715)).mul(math.sqrt(2 / math.pi))
            return x.mul(0.5).mul(inner.tanh().add(1))
        return self._math(f)

    def quick_gelu(self: Tensor) -> Tensor:
        """x·sigmoid(1.702·x)."""
        return self._math(lambda x: x.mul(x.mul(1.702).sigmoid()))

    def silu(self: Tensor) -> Tensor:
        """x · sigmoid(x)."""
        return self._math(lambda x: x.mul(x.sigmoid()))

    swish = silu

    def batchnorm(self: Tensor, weight: Tensor | None, bias: Tensor | None, mean: Tensor, invstd: Tensor,
                  axis: int | tuple[int, ...] = 1) -> Tensor:
        """(x − mean)·weight·invstd + bias with statistics given, each laid along `axis` (tinygrad's batchnorm;
        the layer nn.BatchNorm computes them)."""
        axes = normalize_axes(axis, self.ndim)
        shape = tuple(d if k in axes else 1 for k, d in enumerate(self.shape))
        x = self.sub(mean.reshape(shape))
        if weight is not None:
            x = x.mul(weight.reshape(shape))
        x = x.mul(invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
        return x if bias is None else x.add(bias.reshape(shape))

    def elu(self: Tensor, alpha: float = 1.0) -> Tensor:
        """x for x > 0, else alpha·(e^x − 1)."""
        return self._math(lambda x: _exponential_linear(x, alpha, 1.0))

    def selu(self: Tensor) -> Tensor:
        """scale·elu(x, alpha) with the self-normalising constants of Klambauer et al."""
        return self.elu(1.6732632423543772848170429916717).mul(1.0507009873554804934193349852946)

    def celu(self: Tensor, alpha: float = 1.0) -> Tensor:
        """x for x > 0, else alpha·(e^(x/alpha) − 1)."""
        return self._math(lambda x: _exponential_linear(x, alpha, 1 / alpha))

    def relu6(self: Tensor) -> Tensor:
        return _bounded(self, 0, 6)

    def leaky_relu(self: Tensor, negative_slope: float = 0.01) -> Tensor:
        return self._float().gt(0).where(self._float(), self._float().mul(negative_slope))

    def hardsigmoid(self: Tensor) -> Tensor:
        """relu6(x + 3) / 6."""
        return self._float().add(3).relu6().div(6)

    def hardswish(self: Tensor) -> Tensor:
        """x · relu6(x + 3) / 6."""
        return self._float().mul(self.hardsigmoid())

    def hardtanh(self: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
        return _bounded(self._float(), min_val, max_val)

    def softplus(self: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
        """log(1 + e^(βx))/β, computed as max(βx, 0) + log1p(e^(−|βx|)) so it cannot overflow nor round a far
        negative tail to 0; x itself where βx > threshold (PyTorch's switch to the linear function)."""
        def f(x: Tensor) -> Tensor:
            bx = x.mul(beta)
            soft = bx.maximum(0).add(special.log1p(bx.abs().neg().exp())).div(beta)  # the kinks at 0 sum to 1/2
            return bx.gt(threshold).where(x, soft)
        return self._math(f)

    def mish(self: Tensor) -> Tensor:
        """x · tanh(softplus(x))."""
        return self._math(lambda x: x.mul(x.softplus().tanh()))

    def softsign(self: Tensor) -> Tensor:
        """x / (1 + |x|)."""
        return self._math(lambda x: x.div(x.abs().add(1)))

    def logsigmoid(self: Tensor) -> Tensor:
        """log(sigmoid(x)) = −softplus(−x), without overflow."""
        return self._float().neg().softplus().neg()

    # ---------------------------------------------------------------- more math
    def square(self: Tensor) -> Tensor:
        return self.mul(self)

    def clip(self: Tensor, min_: Any = None, max_: Any = None) -> Tensor:
        """Each value limited to [min_, max_] (either may be None; scalars or tensors, broadcast). At a bound the
        gradient goes to self (PyTorch's clamp), beyond it to the bound."""
        if min_ is None and max_ is None:
            raise ArgumentError("clip needs min_ or max_ (or both)")
        out = self if min_ is None else self.lt(min_).where(min_, self)
        return out if max_ is None else out.gt(max_).where(max_, out)

    clamp = clip

    def log10(self: Tensor) -> Tensor:
        return self._math(lambda x: x.log2().mul(math.log10(2)))

    def isinf(self: Tensor, detect_positive: bool = True, detect_negative: bool = True) -> Tensor:
        """Where the value is +inf (detect_positive) or -inf (detect_negative), as tinygrad's isinf."""
        if not self.dtype.is_float or not (detect_positive or detect_negative):
            return self._const_like(False, dtypes.bool)
        if detect_positive and detect_negative:
            return self.abs().eq(math.inf)
        return self.eq(math.inf if detect_positive else -math.inf)

    def isfinite(self: Tensor) -> Tensor:
        """Neither inf nor nan."""
        if not self.dtype.is_float:
            return self._const_like(True, dtypes.bool)
        return self.abs().lt(math.inf)

    def is_floating_point(self: Tensor) -> bool:
        return self.dtype.is_float

    def round(self: Tensor) -> Tensor:
        """To the nearest integer, halves to even (NumPy's and PyTorch's rule): exact, from trunc and the fraction."""
        if not self.dtype.is_float:
            return self
        t = self.trunc()
        frac, sign = self.sub(t).abs(), self.sign()
        odd = t.sub(t.div(2).floor().mul(2)).ne(0)
        up = frac.gt(0.5).add(frac.eq(0.5).mul(odd))
        return up.where(t.add(sign), t)

    def _sign_bit(self: Tensor) -> Tensor:
        """Whether the sign bit is set (true for −0.0 and negative nan too)."""
        ints = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[self.dtype.itemsize]
        return self.bitcast(ints).lt(0)

    def copysign(self: Tensor, x: Any) -> Tensor:
        """|self| with the sign of x (of its sign bit: −0.0 counts as negative), in a float dtype."""
        a, b = self._pair(x)
        a, b = a._float(), b._float().cast(a._float().dtype)
        return b._sign_bit().where(a.abs().neg(), a.abs())

    def fmod(self: Tensor, x: Any) -> Tensor:
        """C's fmod: the remainder of division truncated toward zero, with the dividend's sign (NumPy's % has the
        divisor's)."""
        a, b = self._pair(x)
        if a.dtype.is_float:
            return a.sub(b.mul(a.div(b).trunc()))
        m = a.mod(b)
        return m.ne(0).bitwise_and(a.lt(0).ne(b.lt(0))).where(m.sub(b), m)

    def lerp(self: Tensor, end: Any, weight: Any) -> Tensor:
        """self + weight·(end − self)."""
        return self.add(self._coerce(end).sub(self).mul(weight))

    def logaddexp(self: Tensor, x: Any) -> Tensor:
        """log(e^a + e^b) = m + log(e^(a−m) + e^(b−m)), m = max(a, b), so it cannot overflow; m where m is ±inf."""
        a, b = self._pair(x)
        a, b = a._float(), b._float()
        m = a.maximum(b)
        out = m.add(a.sub(m).exp().add(b.sub(m).exp()).log())
        return m.isinf().where(m, out)

    def erf(self: Tensor) -> Tensor:
        """The error function, within 1.3 ulp (uopviz.tensor.special)."""
        return self._math(special.erf)

    def erfc(self: Tensor) -> Tensor:
        """1 − erf(x), accurate relative to itself in the tail where 1 − erf cancels to 0."""
        return self._math(special.erfc)

    def expm1(self: Tensor) -> Tensor:
        """eˣ − 1, accurate near 0 where exp(x) − 1 cancels."""
        return self._math(special.expm1)

    def log1p(self: Tensor) -> Tensor:
        """log(1 + x), accurate near 0 where 1 + x rounds x's digits away."""
        return self._math(special.log1p)

    def atan(self: Tensor) -> Tensor:
        """Arc tangent: |x| > 1 reflected by atan(x) = π/2 − atan(1/x), then halved twice with atan(x) =
        2·atan(x / (1 + √(1 + x²))) to |x| <= tan(π/16), where the Taylor series converges fast (enough terms for
        the dtype); odd, so computed for |x|."""
        def f(ax: Tensor) -> Tensor:
            big = ax.gt(1)
            y = big.where(ax.reciprocal(), ax)
            for _ in range(2):
                y = y.div(y.square().add(1).sqrt().add(1))
            y2, terms = y.square(), 12 if ax.dtype == dtypes.float64 else 6
            series = y._const_like((-1) ** terms / (2 * terms + 1))
            for k in range(terms - 1, -1, -1):
                series = series.mul(y2).add((-1) ** k / (2 * k + 1))
            r = series.mul(y).mul(4)
            return big.where(r.sub(math.pi / 2, reverse=True), r)
        return self._math(lambda x: special.odd(x, f))

    def asin(self: Tensor) -> Tensor:
        """atan(x / √((1 − x)(1 + x))); ±π/2 at ±1, nan outside [−1, 1]."""
        return self._math(lambda x: x.div(x.sub(1, reverse=True).mul(x.add(1)).sqrt()).atan())

    def acos(self: Tensor) -> Tensor:
        """π/2 − asin(x)."""
        return self._math(lambda x: x.asin().sub(math.pi / 2, reverse=True))

    def sinh(self: Tensor) -> Tensor:
        return self._math(special.sinh)

    def cosh(self: Tensor) -> Tensor:
        return self._math(lambda x: x.exp().add(x.neg().exp()).mul(0.5))

    def asinh(self: Tensor) -> Tensor:
        """Inverse hyperbolic sine, accurate near 0 and for any |x| (uopviz.tensor.special)."""
        return self._math(special.asinh)

    def acosh(self: Tensor) -> Tensor:
        """log(x + √((x − 1)(x + 1))); nan below 1."""
        return self._math(lambda x: x.add(x.sub(1).mul(x.add(1)).sqrt()).log())

    def atanh(self: Tensor) -> Tensor:
        """0.5·log((1 + x) / (1 − x)), accurate near 0 (uopviz.tensor.special)."""
        return self._math(special.atanh)

    def isclose(self: Tensor, other: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> Tensor:
        """a == b, or a finite |a − b| <= atol + rtol·|b| (NumPy's and PyTorch's test): an infinity is close only
        to itself (inf − inf is nan, inf − x is inf, and the bound would be inf too); nan is close to nan only with
        equal_nan."""
        a, b = self._pair(other)
        close = a.eq(b)
        if a.dtype.is_float:
            diff = a.sub(b).abs()
            close = close.bitwise_or(diff.isfinite().bitwise_and(diff.le(b.abs().mul(rtol).add(atol))))
            if equal_nan:
                close = close.bitwise_or(a.isnan().bitwise_and(b.isnan()))
        return close

    def masked_fill(self: Tensor, mask: Any, value: Any) -> Tensor:
        """value where mask is true, else self (mask broadcast to self's shape); self's dtype is kept."""
        m = self._coerce(mask)
        if not m.dtype.is_bool:
            raise DTypeError(f"masked_fill needs a bool mask, got {m.dtype.name}")
        v = self._coerce(value) if not _is_scalar(value) else value
        return m.where(v, self).cast(self.dtype)

    # ---------------------------------------------------------------- dtype changes
    def cast(self: Tensor, dtype: Any) -> Tensor:
        """The values in another dtype, as C casts them (no check: the values are not known until run). Float to
        int truncates toward zero; a float outside the int's range (or nan, inf) is undefined, as in C, and the
        devices differ on it today (CPU and CL give the hardware's answer, PYTHON wraps, or raises on nan)."""
        dt = to_dtype(dtype)
        return self if dt is self.dtype or dt == self.dtype else self._new(self.uop.cast(dt))  # is: no __eq__ call

    def bitcast(self: Tensor, dtype: Any) -> Tensor:
        """Reinterpret the bits as another dtype. To one of another size the last axis is rescaled (NumPy's view
        and tinygrad's bitcast: float32 (…, n) as uint8 is (…, 4n)); its bytes must divide into the new size."""
        dt = to_dtype(dtype)
        if dt.itemsize != self.dtype.itemsize and (not self.ndim or not isinstance(n := self.shape[-1], int)
                                                   or (n * self.dtype.itemsize) % dt.itemsize):
            raise DTypeError(f"cannot bitcast {self.dtype.name} {self.shape} to {dt.name}: to a dtype of another size "
                             f"the last axis' bytes must divide into {dt.itemsize} B items")
        return self if dt == self.dtype else self._new(self.uop.bitcast(dt))

    def float(self: Tensor) -> Tensor:
        return self.cast(dtypes.float32)

    def half(self: Tensor) -> Tensor:
        return self.cast(dtypes.float16)

    def double(self: Tensor) -> Tensor:
        return self.cast(dtypes.float64)

    def int(self: Tensor) -> Tensor:
        return self.cast(dtypes.int32)

    def long(self: Tensor) -> Tensor:
        return self.cast(dtypes.int64)

    def bool(self: Tensor) -> Tensor:
        return self.cast(dtypes.bool)

    # ---------------------------------------------------------------- Python operators
    def __add__(self, x: Any) -> Tensor: return self.add(x)
    def __radd__(self, x: Any) -> Tensor: return self.add(x, True)
    def __sub__(self, x: Any) -> Tensor: return self.sub(x)
    def __rsub__(self, x: Any) -> Tensor: return self.sub(x, True)
    def __mul__(self, x: Any) -> Tensor: return self.mul(x)
    def __rmul__(self, x: Any) -> Tensor: return self.mul(x, True)
    def __truediv__(self, x: Any) -> Tensor: return self.div(x)
    def __rtruediv__(self, x: Any) -> Tensor: return self.div(x, True)
    def __floordiv__(self, x: Any) -> Tensor: return self.floordiv(x)
    def __rfloordiv__(self, x: Any) -> Tensor: return self.floordiv(x, True)
    def __mod__(self, x: Any) -> Tensor: return self.mod(x)
    def __rmod__(self, x: Any) -> Tensor: return self.mod(x, True)
    def __pow__(self, x: Any) -> Tensor: return self.pow(x)
    def __rpow__(self, x: Any) -> Tensor: return self.pow(x, True)
    def __and__(self, x: Any) -> Tensor: return self.bitwise_and(x)
    def __rand__(self, x: Any) -> Tensor: return self.bitwise_and(x, True)
    def __or__(self, x: Any) -> Tensor: return self.bitwise_or(x)
    def __ror__(self, x: Any) -> Tensor: return self.bitwise_or(x, True)
    def __xor__(self, x: Any) -> Tensor: return self.bitwise_xor(x)
    def __rxor__(self, x: Any) -> Tensor: return self.bitwise_xor(x, True)
    def __lshift__(self, x: Any) -> Tensor: return self.lshift(x)
    def __rlshift__(self, x: Any) -> Tensor: return self.lshift(x, True)
    def __rshift__(self, x: Any) -> Tensor: return self.rshift(x)
    def __rrshift__(self, x: Any) -> Tensor: return self.rshift(x, True)
    def __neg__(self) -> Tensor: return self.neg()
    def __invert__(self) -> Tensor: return self.bitwise_not()
    def __abs__(self) -> Tensor: return self.abs()
    def __lt__(self, x: Any) -> Tensor: return self.lt(x)
    def __gt__(self, x: Any) -> Tensor: return self.gt(x)
    def __le__(self, x: Any) -> Tensor: return self.le(x)
    def __ge__(self, x: Any) -> Tensor: return self.ge(x)
    # == and != compare elementwise into a bool Tensor, as NumPy's and torch's do, not into object's bool
    def __eq__(self, x: Any) -> Tensor: return self.eq(x)  # type: ignore[override]  # elementwise, see above
    def __ne__(self, x: Any) -> Tensor: return self.ne(x)  # type: ignore[override]  # elementwise, see above
    __hash__ = object.__hash__  # __eq__ is elementwise; tensors hash by identity
