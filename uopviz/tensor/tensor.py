"""`Tensor`: the lazy front-end. Methods build Tensor-level UOp graphs; `realize()` (or `.numpy()`) runs them.

A Tensor is a UOp plus the device it lives on (constants have no device in the graph, so the Tensor keeps it).
The graph contract with `uopviz.realize`: data leaves are `Reshape(Buffer, shape)`, constants are scalar Consts
brought to shape by reshape + expand, and every elementwise op sees sources of one shape and one dtype.
The ops themselves live in topic modules (creation, movement, elementwise, reductions, nn) mixed in here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from uopviz.dtype import DType, dtypes, exact_array, values_dtype
from uopviz.runtime import buffer
from uopviz.runtime import device as devices
from uopviz.runtime.device import DeviceMismatchError
from uopviz.tensor import multi
from uopviz.tensor.autograd import AutogradMixin, cut_from_gradients
from uopviz.tensor.create import CreationMixin
from uopviz.tensor.elementwise import ElementwiseMixin
from uopviz.tensor.function import FunctionTraceError, outside_calls, tracing
from uopviz.tensor.jit import JitError, capturing
from uopviz.tensor.loss import LossMixin
from uopviz.tensor.movement import MovementMixin
from uopviz.tensor.multi import MultiMixin, ShardError, needs_lowering
from uopviz.tensor.nn import NNMixin
from uopviz.tensor.reduce import ReduceMixin
from uopviz.tensor.util import (
    ArgumentError,
    AxisError,
    Dim,
    ShapeError,
    concrete,
    const_uop,
    fmt,
    numel,
    to_dtype,
    value_of,
)
from uopviz.uop.ops import Device, Ops, UOp

__all__ = ["ArgumentError", "AxisError", "DeviceMismatchError", "ShapeError", "ShardError", "Tensor"]


class Tensor(CreationMixin, MovementMixin, ElementwiseMixin, ReduceMixin, NNMixin, LossMixin, AutogradMixin,
             MultiMixin):
    """A lazy n-dimensional array. Build it from Python scalars, nested lists or NumPy arrays:
    `Tensor([[1, 2], [3, 4]], device="CPU", dtype=dtypes.float32)`; ops follow NumPy and tinygrad names.

    Python values (scalars and lists alike) get NumPy's dtypes, so no value silently changes: bools bool;
    ints int32 when every one fits, else int64, else uint64 (else OverflowError); floats, and ints mixed with
    them, float32 unless a finite value would overflow it to inf, else float64. With `dtype` given, the values
    go straight to it (float64 data is never rounded through float32) and must fit: an int out of its range,
    or a finite value it would round to inf, is an OverflowError naming the value. NumPy arrays keep their
    dtype; given another, they are cast as `astype` does (which wraps, as C casts do).
    """

    __slots__ = ("__weakref__", "_cut", "_device", "_grad", "_requires_grad", "_uop")
    _cut: bool  # set once a realize ended its graph (cut_from_gradients): backward() from it is refused
    __array_ufunc__ = None  # `ndarray op Tensor` defers to Tensor's reflected operators

    def __init__(self, data: Any, device: Device = None, dtype: Any = None, requires_grad: bool = False) -> None:
        dt = None if dtype is None else to_dtype(dtype)
        if isinstance(data, UOp):
            self._uop, self._device = _int_size(data), data.device or devices.canonical_devices(device)
        elif isinstance(data, Tensor):
            self._uop = data.to(device or data.device).uop
            self._device = devices.canonical_devices(device or data.device)
        else:
            self._device = devices.canonical_devices(device)
            if isinstance(self._device, tuple):  # on several devices: replicated, as tinygrad does
                self._uop = Tensor(data, self._device[0], dt).broadcast(self._device).uop
            else:
                self._uop = _from_python(data, dt, self._device)
        if dt is not None and dt != self.dtype:
            self._uop = self._uop.cast(dt)
        if requires_grad:
            self.requires_grad = True

    def _new(self, uop: UOp) -> Tensor:
        """A Tensor of uop on self's device."""
        t = object.__new__(Tensor)
        t._uop, t._device = uop, self._device
        return t

    def _same_device(self, other: Tensor) -> None:
        if other._device != self._device:
            raise DeviceMismatchError(f"tensors on different devices: {self._device} and {other._device}; "
                                      f"move one with .to({self._device!r})")

    # ---------------------------------------------------------------- properties
    @property
    def uop(self) -> UOp:
        """The Tensor-level graph (after realize: Reshape(Buffer, shape))."""
        return self._uop

    @property
    def shape(self) -> tuple[Dim, ...]:
        """The dims: ints, or symbolic sizes (bound variables) for a tensor built with them."""
        return self._uop.shape

    @property
    def dtype(self) -> DType:
        return self._uop.dtype

    @property
    def device(self) -> str | tuple[str, ...]:
        """The device's name, or a tuple of them for a tensor on several devices (uopviz/tensor/multi.py)."""
        return self._device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def numel(self) -> Dim:
        """The number of elements (a symbolic size when a dim is one)."""
        return numel(self.shape)

    def _size(self) -> int:
        """The number of elements now (symbolic dims at their bound values)."""
        return value_of(self.numel())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return value_of(self.shape[0])

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        raise TensorBoolError("the truth value of a Tensor is ambiguous (and lazy); use .item(), .any() or .all()")

    def __repr__(self) -> str:
        head = f"shape={fmt(self.shape)}, dtype={self.dtype.name}, device={self._device}"
        if self.is_realized and buffer.is_allocated(self._uop.src[0]):
            return f"Tensor({self.numpy()!r}, {head})"
        return f"<Tensor {head} (not realized)>"

    # ---------------------------------------------------------------- running
    @property
    def is_realized(self) -> bool:
        """Whether the tensor is backed by a buffer of its own (Reshape(Buffer, shape))."""
        u = self._uop
        return (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER) or multi.is_realized(u)

    def realize(self, *others: Tensor) -> Tensor:
        """Compute self and others (one schedule per device); each then holds a buffer. Returns self."""
        from uopviz.realize import realize, schedule_cache
        if (name := tracing()) is not None and any(_reads_inputs(t._uop) for t in (self, *others)):
            raise FunctionTraceError(f"cannot trace {name}: it reads a value (numpy, item, tolist, realize) that "
                                     "depends on its inputs, which are not known until it runs; return the Tensor "
                                     "instead, and read it after the call")
        if _later:
            _assign_now(self, *others)
        todo = [t for t in (self, *others) if not t.is_realized and t._size() > 0]
        if not todo:
            return self
        lowering = needs_lowering([t._uop for t in todo])
        devs = list(dict.fromkeys(t._device for t in todo))
        # one realize on one device: its structure, found once for the schedule cache and cut_from_gradients
        found = schedule_cache.structure_of([t._uop for t in todo], {}, devs[0]) \
            if len(devs) == 1 and isinstance(devs[0], str) and not lowering else None
        for t in cut_from_gradients(todo, found):
            t._cut = True
        if lowering:
            multi.realize(todo)
            return self
        for dev in devs:
            if isinstance(dev, tuple):  # its graph names several devices, so the shard pass above took it
                raise multi.ShardError(f"a tensor on {dev} reached a one-device realize")
            group = [t for t in todo if t._device == dev]
            for t, out in zip(group, realize([t._uop for t in group], device=dev, known=found)):
                t._uop = out
        return self

    def viz(self, **kwargs: Any) -> Any:
        """Realize this tensor under the recorder and return the uopviz widget of it (uopviz.show)."""
        from uopviz.widget import show
        return show(self, **kwargs)

    def beam(self, width: int = 4, **kwargs: Any) -> Any:
        """BEAM-search the opts of every kernel this tensor's realize runs (uopviz.widget.search_tensor: live in a
        notebook); returns each kernel's BeamResult. realize() then uses the opts found."""
        from uopviz.widget import search_tensor
        return search_tensor(self, width, **kwargs)

    def profile(self) -> Any:
        """Realize this tensor inside `uopviz.profile()` and return the Profile of the kernels it ran."""
        from uopviz.profile import profile
        with profile() as p:
            self.realize()
        return p

    def contiguous(self) -> Tensor:
        return self._new(UOp(Ops.CONTIGUOUS, (self._uop,)))

    def detach(self) -> Tensor:
        return self._new(UOp(Ops.DETACH, (self._uop,)))

    def assign(self, x: Any) -> Tensor:
        """Write x (broadcast and cast to self's shape and dtype) into self's buffer, in place. Lazy tensors
        built from self before the assign read the new values when they are realized."""
        value = x if isinstance(x, Tensor) else Tensor(x, device=self._device, dtype=self.dtype)
        assign_all([self], [value])
        return self

    def to(self, device: str | Sequence[str] | None) -> Tensor:
        """This tensor on another device (copied through the host); self if it is there already. Lazy, a Copy (so
        gradients flow back through it): to a tuple of devices it is split along axis 0 (SPEC's Copy to a
        multi-device); from one, gathered."""
        dev = devices.canonical_devices(device)
        if dev == self._device:
            return self
        if isinstance(dev, tuple):
            return self.scatter_to(dev)
        if self._size() == 0 and not isinstance(self._device, tuple):
            return Tensor.zeros(self.shape, dtype=self.dtype, device=dev)
        return Tensor(self._uop.copy_to(dev))

    def numpy(self) -> Any:
        """A NumPy copy of the values (realizing first). bfloat16 comes back as float32 (NumPy has none)."""
        import numpy as np
        if (name := capturing()) is not None:
            raise JitError(f"@jit {name} reads a value (numpy, item, tolist): a replay runs only its kernels, so "
                           "whatever it decides from the value would not be replayed; read values outside the function")
        if self.dtype.is_float and self.dtype.fmt is None:  # bfloat16 and the fp8s: NumPy has none
            return self.cast(dtypes.float32).numpy()
        if isinstance(self._device, tuple):
            return self.gather_to().numpy()
        shape = concrete(self.shape)
        if self._size() == 0:
            return np.zeros(shape, dtype=dtypes.to_numpy(self.dtype))
        self.realize()
        return buffer.to_numpy(self._uop.src[0])[:self._size()].reshape(shape)

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def item(self) -> bool | int | float:
        """The one value of a one-element tensor, as a Python scalar."""
        if self._size() != 1:
            raise ValueError(f"item() needs a tensor of one element, this one has shape {fmt(self.shape)}; "
                             "index or reduce it first")
        return self.numpy().reshape(-1)[0].item()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)


def assign_all(targets: Sequence[Tensor], values: Sequence[Tensor]) -> None:
    """Write each value (broadcast and cast to its target) into its target's buffer, in place, every target of a
    device in one schedule (an optimizer's step updates all its parameters and state at once this way). Values may
    read any of the targets: they then see the old contents."""
    from uopviz.realize import assign, reads_any
    written = {t._uop.src[0] for t in targets if t.is_realized and not isinstance(t.device, tuple)}
    if _later and reads_any([v._uop for _, v in _later], written):
        _assign_now()  # assign_later's values read these targets as they are now (an optimizer's step after BN's)
    pairs = []
    for t, v in zip(targets, values, strict=True):
        t._same_device(v)
        v = v.cast(t.dtype).expand(t.shape)
        if t._size() and v.uop is not t.uop:
            pairs.append((t.realize(), v))
    if shared := [(t, v) for t, v in pairs if isinstance(t.device, tuple)]:
        multi.assign(shared)
    for dev in dict.fromkeys(t.device for t, _ in pairs if not isinstance(t.device, tuple)):
        group = [(t, v) for t, v in pairs if t.device == dev]
        assign([t.uop for t, _ in group], [v.uop for _, v in group])


_later: list[tuple[Tensor, Tensor]] = []  # assign_later's (target, value) pairs, written by the next realize


def assign_later(targets: Sequence[Tensor], values: Sequence[Tensor]) -> None:
    """assign_all, done by the next realize of anything (or read of a target): the values are computed in that
    realize's schedule, so what they share with it is computed once. BatchNorm's running statistics read the batch's
    mean and variance, which the layer's output reads too: assigned at once, every BN layer of a training step
    computed the network up to it again (a ResNet step ran each convolution three times). Values see the targets as
    they are when the assign runs; a realize of something that reads a target writes the targets first, so it sees
    the new values, as after assign_all."""
    if any(isinstance(t.device, tuple) or not t.is_realized for t in targets):  # as assign_all does, at once
        assign_all(targets, values)
        return
    pending = {t._uop for t, _ in _later}
    if any(t._uop in pending for t in targets):  # a second assign of a target reads the first's result
        _assign_now()
    for t, v in zip(targets, values, strict=True):
        t._same_device(v)
        _later.append((t, v.cast(t.dtype).expand(t.shape)))


def _assign_now(*wanted: Tensor) -> None:
    """Write assign_later's values into their targets, computing them in one schedule with the tensors about to be
    realized where those do not read a target (else first, so that they read the new values)."""
    from uopviz.realize import reads_any
    pairs = _later[:]
    _later.clear()
    values = [v for _, v in pairs]
    bufs = {t._uop.src[0] for t, _ in pairs}
    together = [t for t in wanted if not t.is_realized]
    if any(isinstance(t.device, tuple) for t in together) or reads_any([t._uop for t in together], bufs):
        together = []
    Tensor.realize(*values, *together)
    assign_all([t for t, _ in pairs], values)


class TensorBoolError(TypeError):
    """A Tensor used as a bool (`if t:`): its value is not known until it is computed."""


def _reads_inputs(u: UOp) -> bool:
    """Whether a graph reads a @function's placeholder inputs (Params outside any called Function's body)."""
    return any(x.op is Ops.PARAM for x in outside_calls(u))


def _int_size(u: UOp) -> UOp:
    """A symbolic size given as data (`Tensor(n)`, `x * n`) as the int a Python int of its range would be: index is
    the kernels' own integer type, which no buffer stores."""
    if u.dtype != dtypes.index or u.shape != ():
        return u
    return u.cast(dtypes.from_py([int(u.vmin), int(u.vmax)]))


def _from_python(data: Any, dtype: DType | None, device: str) -> UOp:
    """The graph of a Python scalar (a Const), a nested list or a NumPy array (a Buffer with a copy). Python
    values get their dtype, or are checked against the one given, by `dtype.values_dtype`; arrays keep theirs."""
    import numpy as np
    if type(data) in (bool, int, float):
        return UOp.const(dtypes.from_py(data, dtype), data)
    if isinstance(data, (list, tuple)):
        try:
            values, kind = exact_array(data)
        except ValueError as e:
            raise ShapeError(f"nested lists must be rectangular (every row the same length): {e}") from None
        dt = values_dtype(values, kind, dtype)
        data = values.astype(dtypes.to_numpy(dtypes.float32 if dt.is_float and dt.fmt is None else dt))
    if isinstance(data, np.generic):
        data = np.asarray(data)
    if not isinstance(data, np.ndarray):
        raise TypeError(f"cannot make a Tensor from {type(data).__name__}; give a scalar, a nested list or an "
                        "ndarray")
    src = dtypes.from_numpy(data.dtype)
    if dtype is not None and dtype != src and dtype.fmt is not None:  # else a cast from the array's float dtype
        data, src = data.astype(dtypes.to_numpy(dtype)), dtype
    if data.size == 0:
        return const_uop(0, src, data.shape)
    return buffer.from_numpy(data, device).reshape(data.shape)
