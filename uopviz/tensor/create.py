"""Tensor creation: constants, empty buffers, eye, arange, linspace and counter-based random numbers.

arange is SPEC's composition (prefix_sum of ones, minus 1), which the lowering folds to O(n). Random numbers
are Threefry-2x32 of a counter (the element's index plus a per-call offset) under a key (the seed), so the
same seed gives the same values on every device, and no state lives on a device.
"""

from __future__ import annotations

import functools
import math
import os
from typing import TYPE_CHECKING, Any

from uopviz.dtype import DType, DTypeError, dtypes
from uopviz.runtime import buffer
from uopviz.runtime import device as devices
from uopviz.tensor.util import Dim, Dims, ShapeError, const_uop, fmt, is_symbolic, numel, shape_arg, sym, to_dtype
from uopviz.uop.ops import Device, Ops, UOp

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor


class _RandomState:
    """The global seed and how many random numbers were drawn under it (the next call's counter offset)."""

    seed: int = int.from_bytes(os.urandom(4), "little")
    drawn: int = 0


# float dtype -> (mantissa bits, unsigned dtype of its size, the bits of 1.0)
_ONE_BITS: dict[DType, tuple[int, DType, int]] = {
    dtypes.float16: (10, dtypes.uint16, 0x3C00), dtypes.bfloat16: (7, dtypes.uint16, 0x3F80),
    dtypes.float32: (23, dtypes.uint32, 0x3F800000), dtypes.float64: (52, dtypes.uint64, 0x3FF0000000000000),
}


def _not_baked() -> None:
    """The global generator's counter is a Python value, put in a buffer of the graph when it is drawn: a @jit replay
    or a later call of a @function would run with that buffer and draw the same numbers again, so drawing from it
    there is a named error."""
    from uopviz.tensor.function import FunctionTraceError, tracing
    from uopviz.tensor.jit import JitError, capturing
    hint = ("its counter is taken once, when traced, so every call would draw the same numbers; draw them outside "
            "and pass them in, or give rand a seed of your own")
    if (name := capturing()) is not None:
        raise JitError(f"@jit {name} draws random numbers from the global generator: {hint}")
    if (name := tracing()) is not None:
        raise FunctionTraceError(f"cannot trace {name}: it draws random numbers from the global generator: {hint}")


def concrete_shape(shape: Any, what: str) -> tuple[int, ...]:
    """A shape of ints: what counts elements one by one (random numbers) takes no symbolic size."""
    dims = shape_arg(shape)
    ints = tuple(d for d in dims if isinstance(d, int))
    if len(ints) != len(dims):
        raise ShapeError(f"{what} needs a shape of ints, got {fmt(dims)}; make it at the largest size and shrink it")
    return ints


def _float_dtype(dtype: Any, what: str, *values: int | float) -> DType:
    """The dtype of `what`, which makes floats: the one given, checked to hold `values` (its end points), else
    Tensor's rule for them (the default float unless they overflow it)."""
    dt = dtypes.from_py([float(v) for v in values], None if dtype is None else to_dtype(dtype))
    if not dt.is_float:
        raise DTypeError(f"{what} makes floats; {dt.name} is not a float dtype")
    return dt


class CreationMixin:
    """Constructors of Tensor (class methods) and the *_like helpers."""

    __slots__ = ()

    @classmethod
    def full(cls: type[Tensor], shape: Dims, fill_value: bool | int | float, dtype: Any = None,
             device: Device = None) -> Tensor:
        """A tensor of one value (its dtype by Tensor's rule for Python values, or checked against the one given:
        a value that does not fit is an OverflowError, not a wrapped value); no memory until realized."""
        dims = shape_arg((shape,))
        dt = dtypes.from_py(fill_value, None if dtype is None else to_dtype(dtype))
        return cls(const_uop(fill_value, dt, dims), device=device)

    @classmethod
    def zeros(cls: type[Tensor], *shape: Dims, dtype: Any = None, device: Device = None) -> Tensor:
        return cls.full(shape_arg(shape), 0.0, dtype or dtypes.default_float, device)

    @classmethod
    def ones(cls: type[Tensor], *shape: Dims, dtype: Any = None, device: Device = None) -> Tensor:
        return cls.full(shape_arg(shape), 1.0, dtype or dtypes.default_float, device)

    @classmethod
    def empty(cls: type[Tensor], *shape: int | tuple[int, ...], dtype: Any = None, device: str | None = None) -> Tensor:
        """A tensor backed by a fresh buffer with undefined contents (fill it with assign). A symbolic shape gets
        a buffer for the largest size its variables allow."""
        dims = shape_arg(shape)
        dt = dtypes.default_float if dtype is None else to_dtype(dtype)
        n = numel(dims)
        if isinstance(n, int) and n == 0:
            return cls.zeros(dims, dtype=dt, device=device)
        size = n if isinstance(n, int) else int(n.vmax)
        return cls(buffer.new_buffer(size, dt, devices.canonical(device)).reshape(dims))

    def full_like(self: Tensor, fill_value: bool | int | float, dtype: Any = None,
                  device: Device = None) -> Tensor:
        return type(self).full(self.shape, fill_value, dtype or self.dtype, device or self.device)

    def zeros_like(self: Tensor, dtype: Any = None, device: Device = None) -> Tensor:
        return self.full_like(0, dtype, device)

    def ones_like(self: Tensor, dtype: Any = None, device: Device = None) -> Tensor:
        return self.full_like(1, dtype, device)

    @classmethod
    def arange(cls: type[Tensor], start: Dim | float, stop: Dim | float | None = None, step: int | float = 1,
               dtype: Any = None, device: Device = None) -> Tensor:
        """start, start+step, ... below stop (NumPy's arange): SPEC's prefix_sum of ones minus 1, scaled and
        shifted. The dtype is Tensor's rule for Python values applied to the first and last value (ints int32,
        else int64; any float the default float, unless that overflows), or the one given, checked to hold them."""
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError("arange step must not be zero")
        if isinstance(start, UOp) or isinstance(stop, UOp):
            return cls._symbolic_arange(start, stop, step, dtype, device)
        dev = devices.canonical_devices(device)
        if type(start) is int and type(stop) is int and type(step) is int and isinstance(dev, str):
            given = None if dtype is None else to_dtype(dtype)
            return cls(_int_arange(start, stop, step, given, dtypes.default_int, dev), dev)
        return cls._arange(start, stop, step, dtype, device)

    @classmethod
    def _arange(cls: type[Tensor], start: int | float, stop: int | float, step: int | float, dtype: Any,
                device: Device) -> Tensor:
        """arange of a start, stop and step known now, built."""
        ints = all(isinstance(v, int) for v in (start, stop, step))
        n = int(max(-((start - stop) // step) if ints else math.ceil((stop - start) / step), 0))  # exact for big ints
        dt = dtypes.from_py([start, start + max(n - 1, 0) * step], None if dtype is None else to_dtype(dtype))
        if n == 0:
            return cls.zeros(0, dtype=dt, device=device)
        count = dtypes.int32 if n < 2**31 else dtypes.int64
        idx = cls.ones(n, dtype=count, device=device).cumsum(0, dtype=count).sub(1)
        if (step, start) == (1, 0):
            return idx.cast(dt)
        if ints and dt.is_int:  # exact modulo 2^bits, so right wherever the values fit dt (checked above)
            idx = idx.cast(dt)
            return idx.mul(idx._const_like(dt.normalize(step))).add(idx._const_like(start))
        idx = idx.cast(dt if dt.is_float else dtypes.default_float)  # scale in the float dtype asked for
        return idx.mul(step).add(start).cast(dt)

    @classmethod
    def _symbolic_arange(cls: type[Tensor], start: Dim | float, stop: Dim | float, step: int | float, dtype: Any,
                         device: Device) -> Tensor:
        """arange with a symbolic start or stop: the counter is an arange over the largest count the variables
        allow, shrunk to the count now, so one kernel serves every value; the count is NumPy's, clamped at 0."""
        def whole(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)
        if not (all(is_symbolic(v) or whole(v) for v in (start, stop)) and whole(step)) or \
                isinstance(start, float) or isinstance(stop, float) or isinstance(step, float):  # (as whole said)
            given = ", ".join(v.render() if isinstance(v, UOp) else repr(v) for v in (start, stop, step))
            raise ShapeError(f"arange({given}): with a symbolic bound, start and stop must be ints or symbolic sizes "
                             "and step an int (the size must be an integer expression of the variables)")
        count = sym(-((start - stop) // step))  # ceil((stop - start) / step), as floor division rounds down
        if not isinstance(count, int) and count.vmin < 0:
            count = sym(count.maximum(0))
        ends = [b for v in (start, sym(start + (count - 1) * step))
                for b in ((v, v) if isinstance(v, int) else (int(v.vmin), int(v.vmax)))]
        dt = dtypes.from_py(ends, None if dtype is None else to_dtype(dtype))
        top = count if isinstance(count, int) else int(count.vmax)
        idx = cls.arange(top, dtype=dt, device=device).shrink(((0, count),))
        if step != 1:
            idx = idx.mul(idx._const_like(dt.normalize(step)))
        if isinstance(start, int):
            return idx.add(idx._const_like(start)) if start else idx
        return idx.add(cls(start, device=device).cast(dt))

    @classmethod
    def linspace(cls: type[Tensor], start: int | float, stop: int | float, num: int, dtype: Any = None,
                 device: Device = None) -> Tensor:
        """num evenly spaced values from start to stop, both included. An int dtype gets the float values truncated
        toward zero (torch's linspace: 5, 7.5, 10 as int32 is 5, 7, 10)."""
        if not isinstance(num, int) or num < 0:
            raise ValueError(f"linspace needs a non-negative int count, got {num!r}")
        if dtype is not None and (want := to_dtype(dtype)).is_int:
            return cls.linspace(start, stop, num, device=device).cast(want)
        dt = _float_dtype(dtype, "linspace", start, stop)
        if num == 1:
            return cls.full((1,), float(start), dt, device)
        idx = cls.arange(num, dtype=dt, device=device)
        return idx.mul((stop - start) / max(num - 1, 1)).add(start)

    @classmethod
    def eye(cls: type[Tensor], n: int, m: int | None = None, dtype: Any = None, device: Device = None) -> Tensor:
        """n×m with ones on the diagonal: arange(n)[:, None] == arange(m)[None, :]."""
        m = n if m is None else m
        rows = cls.arange(n, device=device).reshape(n, 1)
        return rows.eq(cls.arange(m, device=device).reshape(1, m)).cast(dtype or dtypes.default_float)

    # ---------------------------------------------------------------- random
    @staticmethod
    def manual_seed(seed: int) -> None:
        """Seed every later rand/randn call that is not given its own seed (and restart their counter)."""
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"a seed must be an int, got {seed!r}")
        _RandomState.seed, _RandomState.drawn = seed, 0

    @classmethod
    def _random_bits(cls: type[Tensor], n: int, seed: int | None, device: Device) -> Tensor:
        """n uint64 words: threefry2x32(counter = offset + i, key = seed). Without a seed, the global seed is
        used and its counter advances, so two calls give different numbers."""
        if seed is None:
            _not_baked()
            key, offset = _RandomState.seed, _RandomState.drawn
            _RandomState.drawn += n
        elif isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"a seed must be an int, got {seed!r}")
        else:
            key, offset = seed, 0
        # the key and the counter's offset are read from memory, not written into the kernel as constants: then every
        # draw of one size is one kernel, compiled once in every process (a model's layers of one shape, a dropout's
        # every step), where constants made each draw a kernel of its own
        import numpy as np

        mask = 0xFFFFFFFFFFFFFFFF
        state = cls(np.array([key & mask, offset & mask], dtype=np.uint64), device=device)
        counter = cls.arange(n, dtype=dtypes.uint64, device=state.device).add(state[1:].expand(n))
        return counter._alu(Ops.THREEFRY, state[:1].expand(n))

    @classmethod
    def rand(cls: type[Tensor], *shape: int | tuple[int, ...], seed: int | None = None, dtype: Any = None,
             device: Device = None) -> Tensor:
        """Uniform in [0, 1): the top mantissa-many random bits under the exponent of 1.0 give [1, 2); minus 1."""
        dims = concrete_shape(shape, "rand")
        dt = _float_dtype(dtype, "rand")
        n = math.prod(dims)
        if n == 0:
            return cls.zeros(dims, dtype=dt, device=device)
        mant, uint, one = _ONE_BITS[dt]
        bits = cls._random_bits(n, seed, device).rshift(64 - mant).cast(uint)
        return bits.bitwise_or(one).bitcast(dt).sub(1).reshape(dims)

    @classmethod
    def randn(cls: type[Tensor], *shape: int | tuple[int, ...], seed: int | None = None, dtype: Any = None,
              device: Device = None) -> Tensor:
        """Standard normal by Box–Muller: √(−2 ln(1−u1)) · cos(2π u2), computed in float32 (or float64)."""
        dims = concrete_shape(shape, "randn")
        dt = _float_dtype(dtype, "randn")
        n = math.prod(dims)
        work = dtypes.float64 if dt == dtypes.float64 else dtypes.float32
        u = cls.rand(2, n, seed=seed, dtype=work, device=device)
        u1, u2 = u[0], u[1]
        r = u1.sub(1, reverse=True).log().mul(-2).sqrt()
        return r.mul(u2.mul(2 * math.pi).cos()).cast(dt).reshape(dims)

    @classmethod
    def uniform(cls: type[Tensor], *shape: int | tuple[int, ...], low: float = 0.0, high: float = 1.0,
                seed: int | None = None, dtype: Any = None, device: Device = None) -> Tensor:
        """Uniform in [low, high): rand scaled and shifted."""
        dt = _float_dtype(dtype, "uniform")
        return cls.rand(*shape, seed=seed, dtype=dt, device=device).mul(high - low).add(low).cast(dt)

    @classmethod
    def normal(cls: type[Tensor], *shape: int | tuple[int, ...], mean: float = 0.0, std: float = 1.0,
               seed: int | None = None, dtype: Any = None, device: Device = None) -> Tensor:
        """Normal with the given mean and standard deviation: randn scaled and shifted."""
        dt = _float_dtype(dtype, "normal")
        return cls.randn(*shape, seed=seed, dtype=dt, device=device).mul(std).add(mean).cast(dt)

    @classmethod
    def randint(cls: type[Tensor], *shape: int | tuple[int, ...], low: int = 0, high: int = 10, seed: int | None = None,
                dtype: Any = None, device: Device = None) -> Tensor:
        """Uniform integers in [low, high) (int32 unless given): floor of a float64 uniform, so every value of a
        range up to 2^52 is reachable."""
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (low, high)) or high <= low:
            raise ValueError(f"randint needs ints low < high, got low={low!r}, high={high!r}")
        dt = dtypes.from_py([low, high - 1], None if dtype is None else to_dtype(dtype))
        if not dt.is_int:
            raise DTypeError(f"randint makes ints; {dt.name} is not an int dtype")
        u = cls.rand(*shape, seed=seed, dtype=dtypes.float64, device=device)
        return u.mul(high - low).floor().cast(dt).add(low)

    @classmethod
    def kaiming_uniform(cls: type[Tensor], *shape: int | tuple[int, ...], a: float = 0.0, seed: int | None = None,
                        dtype: Any = None, device: Device = None) -> Tensor:
        """He initialisation (PyTorch's kaiming_uniform_, fan_in mode, leaky_relu gain with slope a): uniform in
        ±√(6 / ((1 + a²)·fan_in)), fan_in being the product of the dims after the first."""
        dims = concrete_shape(shape, "kaiming_uniform")
        bound = math.sqrt(6 / ((1 + a * a) * max(math.prod(dims[1:]), 1)))
        return cls.uniform(dims, low=-bound, high=bound, seed=seed, dtype=dtype, device=device)

    @classmethod
    def kaiming_normal(cls: type[Tensor], *shape: int | tuple[int, ...], a: float = 0.0, seed: int | None = None,
                       dtype: Any = None, device: Device = None) -> Tensor:
        """He initialisation, normal: standard deviation √(2 / ((1 + a²)·fan_in))."""
        dims = concrete_shape(shape, "kaiming_normal")
        std = math.sqrt(2 / ((1 + a * a) * max(math.prod(dims[1:]), 1)))
        return cls.normal(dims, std=std, seed=seed, dtype=dtype, device=device)

    @classmethod
    def scaled_uniform(cls: type[Tensor], *shape: int | tuple[int, ...], seed: int | None = None, dtype: Any = None,
                       device: Device = None) -> Tensor:
        """Uniform in ±1/√(number of elements) (tinygrad's scaled_uniform)."""
        dims = concrete_shape(shape, "scaled_uniform")
        bound = max(math.prod(dims), 1) ** -0.5
        return cls.uniform(dims, low=-bound, high=bound, seed=seed, dtype=dtype, device=device)

    @classmethod
    def glorot_uniform(cls: type[Tensor], *shape: int | tuple[int, ...], seed: int | None = None, dtype: Any = None,
                       device: Device = None) -> Tensor:
        """Xavier/Glorot initialisation: uniform in ±√(6 / (fan_in + fan_out)), fan_out = dims[0]·receptive field,
        fan_in = dims[1]·receptive field."""
        dims = concrete_shape(shape, "glorot_uniform")
        field = math.prod(dims[2:])
        fan_out, fan_in = dims[0] * field, (dims[1] if len(dims) > 1 else 1) * field
        bound = math.sqrt(6 / max(fan_in + fan_out, 1))
        return cls.uniform(dims, low=-bound, high=bound, seed=seed, dtype=dtype, device=device)


@functools.lru_cache(maxsize=256)
def _int_arange(start: int, stop: int, step: int, dtype: DType | None, default_int: DType, device: str) -> UOp:
    """The graph of an arange of ints on one device, kept: the one-hot masks of losses, embeddings and gathers, and
    triangles, ask for the same few in every step of an eager loop, and building one is a dozen ops and a dtype
    check in NumPy (its nodes are constants only, so the graph is the one it would be built as again). default_int
    is part of the key: the dtype of an arange given none depends on it."""
    from uopviz.tensor.tensor import Tensor
    return Tensor._arange(start, stop, step, dtype, device).uop
