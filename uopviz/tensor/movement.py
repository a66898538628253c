"""Movement Tensor ops: reshape, permute, expand, pad, shrink, flip, concatenation and NumPy-style indexing.

All of them are SPEC movement ops on the Tensor graph (no data moves until realize). Indexing with integer
tensors is SPEC's gather composition: a one-hot mask of the index against an arange, then a sum over the
indexed axis — with `where` instead of a multiply, so a NaN or inf elsewhere in the row cannot leak in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, overload

from uopviz.dtype import DTypeError, dtypes, least_upper_dtype
from uopviz.tensor.util import (
    ArgumentError,
    AxisError,
    Dim,
    Dims,
    ShapeError,
    at_most,
    broadcast_shapes,
    const_uop,
    dim_args,
    expand_to,
    fmt,
    int_args,
    int_dim,
    is_symbolic,
    normalize_axes,
    normalize_axis,
    numel,
    same_dim,
    sym,
)
from uopviz.uop.ops import Ops, all_ints

if TYPE_CHECKING:
    from collections.abc import Sequence

    from uopviz.tensor.tensor import Tensor

    Tensors: TypeAlias = Tensor | list[Tensor] | tuple[Tensor, ...]
    """cat, stack and meshgrid's first argument: a tensor (the others follow it) or a list or tuple of them."""


def _symbolic_slice(it: Any, d: Dim) -> bool:
    """A slice whose bounds or axis are symbolic sizes (only a step of 1 is supported there)."""
    return isinstance(it, slice) and (not isinstance(d, int) or is_symbolic(it.start) or is_symbolic(it.stop))


def _symbolic_bounds(it: slice, d: Dim) -> tuple[Dim, Dim]:
    """(start, stop) of a slice with symbolic parts: non-negative bounds, step 1 (NumPy's negative wrapping and
    clipping would depend on the variables' values, so they are refused rather than guessed)."""
    if it.step not in (None, 1):
        raise IndexError(f"a slice with a symbolic size or bound takes step 1, got {it}")
    for b in (it.start, it.stop):
        if b is not None and not is_symbolic(b) and (isinstance(b, bool) or not isinstance(b, int) or b < 0):
            raise IndexError(f"a slice with a symbolic size or bound takes non-negative int or symbolic bounds, "
                             f"got {it}")
    return sym(it.start or 0), sym(d if it.stop is None else it.stop)


def _axis_at(pos: int, items: list[Any]) -> int:
    """The axis of self that index item `pos` applies to (None items add axes and consume none)."""
    return sum(j is not None for j in items[:pos])


def _wrapped(t: Tensor, d: Dim) -> Tensor:
    """Lazy index t for an axis of size d, -d..-1 wrapped (an unsigned t has none), in a dtype that holds -d..d
    (for a symbolic d, its largest value), so that neither the wrap nor the arange it is matched against can
    overflow (a uint8 index into 300 rows)."""
    top = d if isinstance(d, int) else int(d.vmax)
    dt = t.dtype if t.dtype.min <= (0 if t.dtype.is_unsigned else -top) and top <= t.dtype.max else dtypes.int64
    t = t.cast(dt)
    return t if dt.is_unsigned else t.lt(0).where(t.add(d if isinstance(d, int) else t._new(d.cast(dt))), t)


def _is_scalar_value(x: Any) -> bool:
    return type(x) in (bool, int, float)


def _unpack(first: Tensors, others: tuple[Tensor | int, ...], dim: int) -> tuple[Tensor, tuple[Tensor, ...], int]:
    """cat/stack's tensors and dim, given as `Tensor.cat((a, b), 1)` (a sequence, then torch's positional dim) or
    as `a.cat(b, dim=1)`. Anything after a sequence but one int dim is refused, as torch does, and so is an int
    among tensors given one by one."""
    if isinstance(first, (list, tuple)):
        if not first:
            raise ShapeError("cat/stack need at least one tensor")
        if len(others) == 1 and isinstance(others[0], int) and not isinstance(others[0], bool):
            return first[0], tuple(first[1:]), others[0]
        if others:
            raise TypeError(f"cat/stack take a sequence of tensors and a dim, or tensors one by one; after the "
                            f"sequence came {', '.join(type(o).__name__ for o in others)}")
        return first[0], tuple(first[1:]), dim
    ts = tuple(o for o in others if not isinstance(o, int))
    if len(ts) != len(others):
        raise TypeError(f"cat/stack of tensors given one by one take the dim as a keyword (dim=...), got "
                        f"{', '.join(type(o).__name__ for o in others)} after the first")
    return first, ts, dim


def _fmt_pairs(pairs: Sequence[Sequence[Dim]]) -> str:
    """(start, stop) pairs as a tuple of them prints, symbolic sizes rendered (fmt's form)."""
    return "(" + ", ".join(map(fmt, pairs)) + (",)" if len(pairs) == 1 else ")")


def _count(n: Dim) -> str:
    return str(n) if isinstance(n, int) else n.render()


def _int_reshape(old: tuple[Dim, ...], args: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The shape a valid reshape of ints to ints gives (at most one -1, inferred), without the symbolic rules; None
    for anything else (symbolic sizes, bad sizes), which reshape's general path decides and words the errors of."""
    dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
    if not all_ints(dims) or not all_ints(old):
        return None
    n = math.prod(old)
    assert isinstance(n, int)  # every size of old is an int (all_ints)
    if -1 in dims:
        rest = -math.prod(dims)
        if dims.count(-1) > 1 or rest <= 0 or n % rest or any(d < -1 for d in dims):
            return None
        new = tuple(n // rest if d == -1 else d for d in dims)
    else:
        new = tuple(dims)
    return new if math.prod(new) == n and all(d >= 0 for d in new) else None


class MovementMixin:
    """Movement and indexing ops of Tensor."""

    __slots__ = ()

    def reshape(self: Tensor, *shape: Dims) -> Tensor:
        """New shape with the same number of elements; one size may be -1 (inferred). Sizes may be symbolic
        (bound variables): the counts must then be equal for every value of the variables."""
        if (new := _int_reshape(self.shape, shape)) is not None:
            return self if new == self.shape else self._new(self.uop.reshape(new))
        new = tuple(sym(d) for d in dim_args(shape))
        n = sym(numel(self.shape))
        ints = [d for d in new if isinstance(d, int)]
        if ints.count(-1) > 1 or any(d < -1 for d in ints):
            raise ShapeError(f"reshape to {fmt(new)}: sizes must be >= 0, with at most one -1")
        if -1 in ints:
            rest = sym(numel(d for d in new if not (isinstance(d, int) and d == -1)))
            if (isinstance(rest, int) and rest == 0) or not same_dim(sym(n % rest), 0):
                raise ShapeError(f"cannot reshape {fmt(self.shape)} ({_count(n)} elements) into {fmt(new)}: "
                                 f"{_count(n)} is not a multiple of {_count(rest)}")
            new = tuple(sym(n // rest) if isinstance(d, int) and d == -1 else d for d in new)
        if not same_dim(numel(new), n):
            raise ShapeError(f"cannot reshape {fmt(self.shape)} ({_count(n)} elements) into {fmt(new)} "
                             f"({_count(sym(numel(new)))} elements); the sizes must multiply to the same count")
        return self if new == self.shape else self._new(self.uop.reshape(new))

    def view(self: Tensor, *shape: int | tuple[int, ...]) -> Tensor:
        """torch's view: reshape (a lazy graph has no strides whose layout a view would have to keep)."""
        return self.reshape(*shape)

    def permute(self: Tensor, *order: int | Sequence[int]) -> Tensor:
        """Reorder the axes: result axis k is self's axis order[k] (negatives allowed)."""
        axes, nd = int_args(order), self.ndim
        if len(axes) != nd:
            raise AxisError(f"permute of a {nd}-d tensor needs {nd} axes, got {axes}")
        norm, every = axes, list(range(nd))
        if sorted(axes) != every:  # negative axes, or not a permutation: normalized, or refused by name
            norm = tuple([normalize_axis(a, nd) for a in axes])
            if sorted(norm) != every:
                raise AxisError(f"{axes} is not a permutation of the axes of {fmt(self.shape)}")
        return self if norm == tuple(every) else self._new(self._uop.permute(norm))

    def transpose(self: Tensor, a: int = -2, b: int = -1) -> Tensor:
        """Swap two axes (the last two by default)."""
        order = list(range(self.ndim))
        a, b = normalize_axis(a, self.ndim), normalize_axis(b, self.ndim)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self: Tensor) -> Tensor:
        """All axes reversed, as NumPy's .T (a plain transpose for 2-D)."""
        return self.permute(tuple(range(self.ndim))[::-1])

    def expand(self: Tensor, *shape: Dims) -> Tensor:
        """Broadcast to shape (NumPy's broadcast_to): size-1 axes grow, new axes are added on the left;
        -1 keeps a size."""
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if tuple(dims) == self.shape and all_ints(dims):  # already that shape (a gradient, assign)
            return self
        new = tuple(sym(d) for d in dim_args(shape))
        if len(new) < self.ndim:
            raise ShapeError(f"cannot expand {fmt(self.shape)} to {fmt(new)}: the target needs at least {self.ndim} "
                             "axes")
        old = (1,) * (len(new) - self.ndim) + self.shape
        new = tuple(o if isinstance(d, int) and d == -1 else d for o, d in zip(old, new))
        if any(not same_dim(o, d) and not (isinstance(o, int) and o == 1) for o, d in zip(old, new)) or \
                any(isinstance(d, int) and d < 0 for d in new):
            raise ShapeError(f"cannot expand {fmt(self.shape)} to {fmt(new)}: only size-1 axes can grow")
        return self if new == self.shape else self._new(expand_to(self.uop, new))

    def broadcast_to(self: Tensor, *shape: int | tuple[int, ...]) -> Tensor:
        return self.expand(*shape)

    def pad(self: Tensor, pad_width: Any = None, value: Any = 0, mode: Any = "constant", *,
            padding: Any = None) -> Tensor:
        """Pad widths as NumPy gives them (an int for every side, one (before, after) pair for every axis, or one
        pair per axis, None = no pad) or as torch does: a flat sequence of ints is (before, after) of the last axis,
        then of the one before it, and so on (torch.nn.functional.pad); `padding=` names them as tinygrad does.
        mode "constant" fills with `value` (OverflowError where it does not fit self's dtype); "reflect" mirrors
        without repeating the edge, "replicate" (NumPy's "edge") repeats it, "circular" ("wrap") wraps around.
        A mode given second, as torch and tinygrad order them (`pad(p, "reflect")`, `pad(p, "constant", 1.0)`),
        is read as the mode. A negative width in constant mode cuts that many elements off, as in torch."""
        if (pad_width is None) == (padding is None):
            raise TypeError("pad takes the widths once: pad_width (positional) or padding=")
        if isinstance(value, str):
            value, mode = (0 if isinstance(mode, str) else mode), value
        value = 0 if value is None else value
        pairs = self._pad_pairs(pad_width if padding is None else padding, cut=mode == "constant")
        if any(b < 0 or a < 0 for b, a in pairs):
            x = self.shrink([(max(-b, 0), d - max(-a, 0)) for (b, a), d in zip(pairs, self.shape)])
            return x.pad([(max(b, 0), max(a, 0)) for b, a in pairs], value)
        if all(p == (0, 0) for p in pairs):
            return self
        if mode != "constant":
            return self._pad_mode(pairs, {"edge": "replicate", "wrap": "circular"}.get(mode, mode))
        new = tuple(b + d + a for (b, a), d in zip(pairs, self.shape))
        out = self._new(self.uop.pad(tuple(b for b, _ in pairs), new))
        if value == 0:
            return out
        inside = self._new(const_uop(True, dtypes.bool, self.shape).pad(tuple(b for b, _ in pairs), new))
        return inside.where(out, out._const_like(value, dtypes.from_py(value, out.dtype)))

    def _pad_mode(self: Tensor, pairs: list[tuple[int, int]], mode: str) -> Tensor:
        """Padding copied from the tensor itself, one axis at a time: the pieces are slices of it, concatenated."""
        if mode not in ("reflect", "replicate", "circular"):
            raise ValueError(f"pad mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
        x = self
        for k, (b, a) in enumerate(pairs):
            if not b and not a:
                continue
            n = int_dim(x.shape[k], f"{mode} padding of axis {k}")
            limit = n - 1 if mode == "reflect" else n if mode == "circular" else None
            if limit is not None and (b > limit or a > limit):
                raise ShapeError(f"{mode} padding of ({b}, {a}) on axis {k} of size {n} must be at most {limit}")
            if mode == "replicate" and n == 0:
                raise ShapeError(f"replicate padding needs a non-empty axis {k}")

            def part(start: int, stop: int, step: int = 1, k: int = k, x: Tensor = x) -> Tensor:
                return x[(slice(None),) * k + (slice(start, stop if stop >= 0 else None, step),)]
            if mode == "reflect":
                before, after = part(b, 0, -1), part(n - 2, n - 2 - a, -1)
            elif mode == "circular":
                before, after = part(n - b, n), part(0, a)
            else:
                edge = [1] * x.ndim
                before, after = part(0, 1).repeat(*([*edge[:k], b, *edge[k + 1:]])), \
                    part(n - 1, n).repeat(*([*edge[:k], a, *edge[k + 1:]]))
            x = type(self).cat(*(p for p, w in ((before, b), (x, 1), (after, a)) if w), dim=k)
        return x

    def _pad_pairs(self: Tensor, pad_width: Any, cut: bool = False) -> list[tuple[int, int]]:
        """One (before, after) pair per axis; negative widths (cuts) only where `cut` allows them."""
        def pair(p: Any) -> tuple[int, int]:
            if p is None:
                return (0, 0)
            b, a = (p, p) if isinstance(p, int) else tuple(p)
            if not (isinstance(b, int) and isinstance(a, int)) or (not cut and (b < 0 or a < 0)):
                raise ShapeError(f"pad widths must be non-negative ints, got {p!r} (use shrink or slicing to cut)")
            return (b, a)
        if isinstance(pad_width, int):
            return [pair(pad_width)] * self.ndim
        pw = list(pad_width)
        if all(isinstance(p, int) for p in pw):  # torch's flat form, last axis first
            if len(pw) % 2 or len(pw) > 2 * self.ndim:
                raise ShapeError(f"a flat pad of {fmt(self.shape)} is (before, after) pairs of its last axes, last "
                                 f"first (torch's form): an even number of ints, at most {2 * self.ndim}, got "
                                 f"{len(pw)}")
            return [(0, 0)] * (self.ndim - len(pw) // 2) + [pair(pw[i:i + 2]) for i in range(len(pw) - 2, -1, -2)]
        if len(pw) == 1:  # NumPy's ((before, after),): the same pair for every axis
            return [pair(pw[0])] * self.ndim
        if len(pw) != self.ndim:
            raise ShapeError(f"pad of {fmt(self.shape)} needs {self.ndim} (before, after) pairs (or one for all), got "
                             f"{len(pw)}")
        return [pair(p) for p in pw]

    def shrink(self: Tensor, arg: Any) -> Tensor:
        """Keep elements start..stop-1 of each axis, from one (start, stop) pair per axis (None = all)."""
        pairs = list(arg)
        if len(pairs) != self.ndim:
            raise ShapeError(f"shrink of {fmt(self.shape)} needs {self.ndim} (start, stop) pairs, got {len(pairs)}")
        rng = [(0, d) if p is None else tuple(sym(x) for x in p) for p, d in zip(pairs, self.shape)]
        for (s, e), d in zip(rng, self.shape):  # symbolic bounds: in range for every value of their variables
            if not (at_most(0, s) and at_most(s, e) and at_most(e, d)):
                raise ShapeError(f"shrink {_fmt_pairs(rng)} of {fmt(self.shape)}: need 0 <= start <= stop <= size"
                                 + ("" if all(isinstance(x, int) for x in (s, e, d)) else
                                    " for every value the variables may take (their ranges), not only this one"))
        if all(s == 0 and e is d for (s, e), d in zip(rng, self.shape)):
            return self
        return self._new(self.uop.shrink(tuple(s for s, _ in rng), tuple(sym(e - s) for s, e in rng)))

    def shrink_to(self: Tensor, *shape: int | tuple[int, ...]) -> Tensor:
        """Keep the first shape[k] elements of each axis (SPEC's compositions use it)."""
        sizes = dim_args(shape)
        if len(sizes) != self.ndim:
            raise ShapeError(f"shrink_to of {fmt(self.shape)} needs {self.ndim} sizes, got {fmt(sizes)}")
        return self.shrink([(0, n) for n in sizes])

    def flip(self: Tensor, axis: int | tuple[int, ...] | None = None) -> Tensor:
        """Reverse the order along the given axes (all by default, as NumPy)."""
        axes = normalize_axes(axis, self.ndim)
        if not axes:
            return self
        return self._new(self.uop.flip(tuple(k in axes for k in range(self.ndim))))

    def squeeze(self: Tensor, axis: int | tuple[int, ...] | None = None) -> Tensor:
        """Remove size-1 axes: all of them, or those among the given ones (an axis of another size stays, as in
        torch)."""
        axes = tuple(k for k in (range(self.ndim) if axis is None else normalize_axes(axis, self.ndim))
                     if isinstance(d := self.shape[k], int) and d == 1)
        return self.reshape(tuple(d for k, d in enumerate(self.shape) if k not in axes))

    def unsqueeze(self: Tensor, axis: int) -> Tensor:
        """Insert a size-1 axis so that it is axis `axis` of the result."""
        k = normalize_axis(axis, self.ndim + 1)
        return self.reshape((*self.shape[:k], 1, *self.shape[k:]))

    def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Merge axes start_dim..end_dim (inclusive) into one."""
        if self.ndim == 0:
            return self.reshape(1)
        s, e = normalize_axis(start_dim, self.ndim), normalize_axis(end_dim, self.ndim)
        if s > e:
            raise AxisError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
        return self.reshape((*self.shape[:s], sym(numel(self.shape[s:e + 1])), *self.shape[e + 1:]))

    def repeat(self: Tensor, *repeats: int | tuple[int, ...]) -> Tensor:
        """Tile the tensor (torch's repeat): axis k repeated repeats[k] times; extra repeats add leading axes. Fewer
        counts than axes are refused, as torch does (NumPy's tile would pad them with 1s)."""
        reps = int_args(repeats)
        if any(r < 0 for r in reps):
            raise ShapeError(f"repeat counts must be non-negative, got {reps}")
        if len(reps) < self.ndim:
            raise ShapeError(f"repeat of {fmt(self.shape)} needs a count for each of its {self.ndim} axes (or more), "
                             f"got {reps}")
        x = self.reshape((1,) * (len(reps) - self.ndim) + self.shape)
        inter = tuple(v for d in x.shape for v in (1, d))
        tiled = tuple(v for r, d in zip(reps, x.shape) for v in (r, d))
        return x.reshape(inter).expand(tiled).reshape(tuple(r * d for r, d in zip(reps, x.shape)))

    @overload
    def cat(self: Tensor, *others: Tensor, dim: int = 0) -> Tensor: ...
    @overload
    def cat(self: list[Tensor] | tuple[Tensor, ...], dim: int = 0) -> Tensor: ...

    def cat(self: Tensors, *others: Tensor | int, dim: int = 0) -> Tensor:
        """Join tensors along an existing axis (`Tensor.cat(a, b, dim=1)` or `a.cat(b, dim=1)`): each is padded
        into place with zeros and the pieces are added (or-ed for bools)."""
        self, others, dim = _unpack(self, others, dim)
        ts = (self, *others)
        if self.ndim == 0:
            raise ShapeError("0-d tensors cannot be concatenated; stack them instead")
        d = normalize_axis(dim, self.ndim)
        for t in others:
            self._same_device(t)
            if t.ndim != self.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, self.shape)) if k != d):
                raise ShapeError(f"cat along axis {dim}: {fmt(t.shape)} does not match {fmt(self.shape)} "
                                 "outside that axis")
        dt = least_upper_dtype(*(t.dtype for t in ts))
        total = sum(t.shape[d] for t in ts)
        new = (*self.shape[:d], total, *self.shape[d + 1:])
        out: Tensor | None = None
        off: Dim = 0
        for t in ts:
            c = t.cast(dt)
            piece = c._new(c.uop.pad((0,) * d + (off,) + (0,) * (self.ndim - d - 1), new))
            out = piece if out is None else out.add(piece)
            off += t.shape[d]
        assert out is not None  # ts holds self at least
        return out

    @overload
    def stack(self: Tensor, *others: Tensor, dim: int = 0) -> Tensor: ...
    @overload
    def stack(self: list[Tensor] | tuple[Tensor, ...], dim: int = 0) -> Tensor: ...

    def stack(self: Tensors, *others: Tensor | int, dim: int = 0) -> Tensor:
        """Join tensors of one shape along a new axis (`Tensor.stack((a, b), dim=1)` or `a.stack(b, dim=1)`)."""
        self, others, dim = _unpack(self, others, dim)
        for t in others:
            if t.shape != self.shape:
                raise ShapeError(f"stack needs tensors of one shape, got {fmt(self.shape)} and {fmt(t.shape)}")
        d = normalize_axis(dim, self.ndim + 1)
        return self.unsqueeze(d).cat(*(t.unsqueeze(d) for t in others), dim=d)

    # ---------------------------------------------------------------- indexing
    def __getitem__(self: Tensor, index: Any) -> Tensor:
        """NumPy indexing: ints (negative too), slices with any step, None, Ellipsis, and integer index arrays
        (Python lists or tuples inside the index, NumPy arrays or Tensors: advanced indexing, broadcast together).

        Indices known now (ints, lists, NumPy arrays) are checked: one outside [-size, size) is an IndexError
        with NumPy's message, and negatives wrap. Index Tensors are lazy, so their values cannot be checked
        without running the graph: in them -size..-1 wrap as in NumPy, and a value outside [-size, size)
        selects nothing, so its element reads 0 (a masked read) where NumPy would raise."""
        import numpy as np
        items = list(index) if isinstance(index, tuple) else [index]
        items = [int(i) if isinstance(i, np.integer) else list(i) if isinstance(i, tuple) else i for i in items]
        if sum(i is Ellipsis for i in items) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        for i in items:
            if not (i is None or i is Ellipsis or isinstance(i, (slice, list, np.ndarray, type(self)))
                    or (isinstance(i, int) and not isinstance(i, bool)) or is_symbolic(i)):
                raise IndexError(f"only ints, slices, None, '...' and integer arrays or tensors are valid indices, "
                                 f"got {i!r}")
        used = sum(i is not None and i is not Ellipsis for i in items)
        if used > self.ndim:
            raise IndexError(f"too many indices for a tensor of shape {fmt(self.shape)}: {used} were given")
        ell = next((k for k, i in enumerate(items) if i is Ellipsis), len(items))
        items[ell:ell + 1] = [slice(None)] * (self.ndim - used)
        items = [self._index_tensor(i, _axis_at(pos, items)) if isinstance(i, (list, np.ndarray, type(self)))
                 else i for pos, i in enumerate(items)]
        if any(isinstance(i, type(self)) for i in items):  # NumPy treats ints as advanced indices too then
            items = [self._int_index(i, _axis_at(pos, items)) if isinstance(i, int) else i
                     for pos, i in enumerate(items)]
        after_basic = [slice(None) if i is None else i for i in items if not isinstance(i, int)]
        return self._basic_index(items)._advanced_index(after_basic)

    def _index_tensor(self: Tensor, i: Any, axis: int) -> Tensor:
        """Index array i for `axis` as an integer Tensor on self's device. A Python list or NumPy array is known
        now: bounds-checked (IndexError, NumPy's message) and wrapped where negative; a Tensor is taken as is."""
        if isinstance(i, type(self)):
            if not i.dtype.is_int:
                raise IndexError(f"index tensors must have an integer dtype, got {i.dtype.name} (boolean masks are "
                                 "not supported: use where)")
            self._same_device(i)
            return i
        import numpy as np
        try:
            arr = np.asarray(i)
        except ValueError:
            raise IndexError(f"an index list must be rectangular (every row the same length), got {i!r}") from None
        if arr.size == 0:
            arr = arr.astype(np.int32)
        if arr.dtype.kind not in "iu":
            raise IndexError(f"index arrays must have an integer dtype, got {arr.dtype} (boolean masks are not "
                             "supported: use where)")
        d = self.shape[axis]
        if not isinstance(d, int):  # in range for every value of the variables; negatives wrap lazily (_wrapped)
            if (bad := arr[(arr < -d.vmin) | (arr >= d.vmin)]).size:
                self._check_int(int(bad.flat[0]), axis)  # out of range at the smallest size: says so
            return type(self)(arr.astype(np.int32 if d.vmax <= np.iinfo(np.int32).max else np.int64),
                              device=self.device)
        if (bad := arr[(arr < -d) | (arr >= d)]).size:
            raise IndexError(f"index {bad.flat[0]} is out of bounds for axis {axis} with size {d}")
        small = np.int32 if d <= np.iinfo(np.int32).max + 1 else np.int64
        return type(self)((arr % max(d, 1)).astype(small), device=self.device)

    def _check_int(self: Tensor, i: int, axis: int) -> Dim:
        """An int index for `axis`, in range, made non-negative. On a symbolic axis it must be in range for every
        value the variables may take (one kernel serves them all), and a negative one counts from the end: a
        symbolic position."""
        d = self.shape[axis]
        if isinstance(d, int):
            if not -d <= i < d:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d}")
            return i % d
        at = sym(d + i) if i < 0 else i
        if not (at_most(0, at) and at_most(sym(at + 1), d)):
            raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d.render()} for some of the "
                             f"values it may take ({int(d.vmin)}..{int(d.vmax)}); an index into a symbolic axis must "
                             "be in range for all of them")
        return at

    def _int_index(self: Tensor, i: int, axis: int) -> Tensor:
        """An int index as the 0-d int32 index tensor NumPy makes of it among advanced indices."""
        at = self._check_int(i, axis)
        return self._new(const_uop(at, dtypes.int32, ()) if isinstance(at, int) else at.cast(dtypes.int32))

    def _basic_index(self: Tensor, items: list[Any]) -> Tensor:
        """Apply ints, slices and None (tensor items keep their axis whole), in one flip, shrink and reshape."""
        flips: list[bool] = []
        ranges: list[tuple[Dim, Dim]] = []
        steps: list[int] = []
        out_shape: list[Dim] = []
        k = 0
        for it in items:
            if it is None:
                out_shape.append(1)
                continue
            d = self.shape[k]
            if _symbolic_slice(it, d):
                start, stop = _symbolic_bounds(it, d)
                flips.append(False)
                ranges.append((start, stop))
                steps.append(1)
                out_shape.append(sym(stop - start))
            elif is_symbolic(it):
                flips.append(False)
                ranges.append((it, sym(it + 1)))
                steps.append(1)
            elif isinstance(it, slice):
                assert isinstance(d, int)  # a slice of a symbolic axis is a _symbolic_slice, taken above
                start, stop, step = it.indices(d)
                n = len(range(start, stop, step))
                flips.append(step < 0)
                if step < 0:
                    start, step = d - 1 - start, -step
                ranges.append((start, start + (n - 1) * step + 1) if n else (0, 0))
                steps.append(step if n > 1 else 1)
                out_shape.append(n)
            elif isinstance(it, int):
                i = self._check_int(it, k)
                flips.append(False)
                ranges.append((i, sym(i + 1)))
                steps.append(1)
            else:
                flips.append(False)
                ranges.append((0, d))
                steps.append(1)
                out_shape.append(d)
            k += 1
        x = self.flip(tuple(k for k, f in enumerate(flips) if f)).shrink(ranges)
        if any(s > 1 for s in steps):
            lens = x.shape
            x = x.pad([(0, (-n) % s) for n, s in zip(lens, steps)])
            x = x.reshape(tuple(v for n, s in zip(x.shape, steps) for v in (n // s, s)))
            x = x.shrink([(0, v) if j % 2 == 0 else (0, 1) for j, v in enumerate(x.shape)])
            x = x.reshape(tuple(x.shape[::2]))
        return x.reshape(tuple(out_shape))

    def _advanced_index(self: Tensor, items: list[Any]) -> Tensor:
        """Gather with the tensor indices among items (one item per axis of self after basic indexing), as a sum
        of a one-hot mask against the indexed axes. The sum's axes are laid out in the result's order, with the
        indexed axes where the index's axes go: its output is stored as it is read, with no transpose after the
        reduce (summed with the kept axes first, w[idx] was stored (features, ...), and every kernel reading it
        read each row as a gather across memory: the GPT's embedding read by five layernorms, 2.1 -> 0.2 ms)."""
        pos = [k for k, it in enumerate(items) if isinstance(it, type(self))]
        if not pos:
            return self
        idx: list[Tensor] = [items[k] for k in pos]
        bshape = broadcast_shapes(*(t.shape for t in idx))
        rest = [k for k in range(self.ndim) if k not in pos]
        dims = tuple(self.shape[k] for k in pos)
        nb, na = len(bshape), len(pos)
        # adjacent tensor indices keep their place among the other axes, else their axes go first
        lead = pos[0] if pos == list(range(pos[0], pos[0] + na)) else 0
        mask: Tensor | None = None
        for j, (t, d) in enumerate(zip(idx, dims)):
            t = _wrapped(t, d).expand(bshape).reshape(bshape + (1,) * na)
            ar = type(self).arange(d, dtype=t.dtype, device=self.device)
            hit = t.eq(ar.reshape((1,) * (nb + j) + (d,) + (1,) * (na - j - 1)))
            mask = hit if mask is None else mask.bitwise_and(hit)
        assert mask is not None  # pos, the indexed axes, is not empty
        mask = mask.reshape((1,) * lead + bshape + dims + (1,) * (len(rest) - lead))
        before, after = [self.shape[k] for k in rest[:lead]], [self.shape[k] for k in rest[lead:]]
        x = self.permute(rest[:lead] + pos + rest[lead:]).reshape(tuple(before) + (1,) * nb + dims + tuple(after))
        x = x.cast(dtypes.uint8) if self.dtype.is_bool else x
        red = tuple(range(lead + nb, lead + nb + na))
        out = mask.where(x, x._const_like(0))._reduce_op(Ops.ADD, red, False)
        return out.ne(0) if self.dtype.is_bool else out

    def gather(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        """torch.gather(dim, index) (also tinygrad's): out[..., i, ...] = self[..., index[..., i, ...], ...] along
        dim, index of self's dims and at most its sizes elsewhere. Called as gather(idx, axis) (an index that is
        not an int first) it is uopviz's older np.take(self, idx, axis). Both read a Tensor index lazily: out of
        [-size, size) it reads 0 (see __getitem__); a list or NumPy index is bounds-checked."""
        if "dim" in kwargs or "index" in kwargs or (len(args) >= 2 and type(args[0]) is int and
                                                    not isinstance(args[1], int)):
            return self._gather_along(*args, **kwargs)
        return self._take(*args, **kwargs)

    def _take(self: Tensor, idx: Any, axis: int = 0) -> Tensor:
        """np.take(self, idx, axis): self's axes with `axis` replaced by idx's shape."""
        ax = normalize_axis(axis, self.ndim)
        return self[(slice(None),) * ax + (self._index_tensor(idx, ax),)]

    def index_select(self: Tensor, dim: int, index: Any) -> Tensor:
        """torch.index_select: the entries of a 1-D index along dim."""
        ax = normalize_axis(dim, self.ndim)
        idx = self._index_tensor(index, ax)
        if idx.ndim != 1:
            raise ShapeError(f"index_select takes a 1-D index, got {fmt(idx.shape)}")
        return self._take(idx, ax)

    def _gather_along(self: Tensor, dim: int, index: Any) -> Tensor:
        """torch.gather's meaning, as a one-hot mask of the index against an arange summed over dim."""
        d = normalize_axis(dim, self.ndim)
        idx = self._index_tensor(index, d)
        if idx.ndim != self.ndim or any(a > b for k, (a, b) in enumerate(zip(idx.shape, self.shape)) if k != d):
            raise ShapeError(f"gather index {fmt(idx.shape)} must have the {self.ndim} dims of self "
                             f"{fmt(self.shape)}, each at most self's size outside dim {dim}")
        n = self.shape[d]
        x = self.shrink([(0, s) if k != d else None for k, s in enumerate(idx.shape)]).transpose(d, -1)
        x = x.cast(dtypes.uint8) if self.dtype.is_bool else x
        i = _wrapped(idx, n).transpose(d, -1)
        hit = i.unsqueeze(-1).eq(type(self).arange(n, dtype=i.dtype, device=self.device))     # (..., m, n)
        row = x.unsqueeze(-2)                                                                     # (..., 1, n)
        out = hit.where(row, row._const_like(0))._reduce_op(Ops.ADD, (x.ndim,), False)
        return (out.ne(0) if self.dtype.is_bool else out).transpose(d, -1)

    def scatter_add(self: Tensor, idx: Any, val: Any, axis: int = 0) -> Tensor:
        """self with val[..., i, ...] added at position idx[i] of `axis` (np.add.at; repeated indices add up).
        idx is 1-D; val has self's shape with `axis` sized len(idx). SPEC's one-hot composition. A list or NumPy
        idx is bounds-checked; a lazy Tensor idx wraps -size..-1, and a value beyond adds nothing anywhere."""
        ax = normalize_axis(axis, self.ndim)
        idx = self._index_tensor(idx, ax)
        if idx.ndim != 1:
            raise ShapeError(f"scatter_add needs a 1-D index, got shape {fmt(idx.shape)}")
        val = self._coerce(val)
        want = self.shape[:ax] + idx.shape + self.shape[ax + 1:]
        if val.shape != want:
            raise ShapeError(f"scatter_add: values of shape {fmt(val.shape)} do not fit; expected {fmt(want)} "
                             f"(self's shape with axis {axis} sized len(idx))")
        if least_upper_dtype(val.dtype, self.dtype) != self.dtype:
            raise DTypeError(f"scatter_add of {val.dtype.name} values into a {self.dtype.name} tensor would "
                             "lose precision; cast the values first")
        k, n = self.shape[ax], idx.shape[0]
        idx = _wrapped(idx, k)
        pos = type(self).arange(k, dtype=idx.dtype, device=self.device).reshape(k, 1)
        mask = pos.eq(idx.reshape(1, n))                                          # (K, D)
        v = val.cast(self.dtype).transpose(ax, -1).unsqueeze(-2)                  # (..., 1, D)
        added = mask.where(v, v._const_like(0))._reduce_op(Ops.ADD, (v.ndim - 1,), False)  # (..., K)
        return self.add(added.transpose(ax, -1))

    # ---------------------------------------------------------------- splitting, windows, rearranging
    def split(self: Tensor, split_size_or_sections: int | list[int], dim: int = 0) -> tuple[Tensor, ...]:
        """Pieces along dim: of split_size each (the last smaller), or of the given sizes (which must add up)."""
        d = normalize_axis(dim, self.ndim)
        n = int_dim(self.shape[d], f"split of axis {dim}")
        if isinstance(split_size_or_sections, int):
            if split_size_or_sections <= 0:
                raise ValueError(f"split size must be positive, got {split_size_or_sections}")
            sizes = [min(split_size_or_sections, n - k) for k in range(0, n, split_size_or_sections)] or [0]
        else:
            sizes = list(split_size_or_sections)
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise ShapeError(f"split sizes {sizes} must be non-negative and add up to {n}, the size of axis {dim}")
        starts = [sum(sizes[:k]) for k in range(len(sizes))]
        return tuple(self.shrink([None] * d + [(s, s + z)] + [None] * (self.ndim - d - 1))
                     for s, z in zip(starts, sizes))

    def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """At most `chunks` pieces of ceil(size / chunks) along dim (PyTorch's chunk)."""
        if not isinstance(chunks, int) or chunks <= 0:
            raise ValueError(f"chunk needs a positive number of chunks, got {chunks!r}")
        n = int_dim(self.shape[normalize_axis(dim, self.ndim)], f"chunk of axis {dim}")
        return self.split(max(-(-n // chunks), 1), dim)

    def unflatten(self: Tensor, dim: int, sizes: tuple[int, ...]) -> Tensor:
        """Axis dim split into sizes (one may be -1)."""
        d = normalize_axis(dim, self.ndim)
        return self.reshape(*self.shape[:d], *sizes, *self.shape[d + 1:])

    def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
        """Windows of `size` every `step` along dimension: that axis becomes the window count and a new last axis
        holds each window (PyTorch's Tensor.unfold)."""
        d = normalize_axis(dimension, max(self.ndim, 1))
        if self.ndim == 0:
            return self.reshape(1).unfold(0, size, step).reshape(1) if size == 1 else self.reshape(1).unfold(0, size,
                                                                                                         step)
        if not (isinstance(size, int) and isinstance(step, int)) or size < 0 or step <= 0 or size > self.shape[d]:
            raise ShapeError(f"unfold of axis {dimension} (size {self.shape[d]}) into windows of {size} every {step}: "
                             "need 0 <= size <= the axis' size and step > 0")
        x = self.transpose(d, -1)._pool((size,), (step,), (1,))            # (..., windows, size), d and -1 swapped
        return x.transpose(d, -2) if d != self.ndim - 1 else x

    def roll(self: Tensor, shifts: int | tuple[int, ...], dims: int | tuple[int, ...] | None = None) -> Tensor:
        """Shift elements along axes, those pushed off one end coming back at the other (None: the flattened
        tensor)."""
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        sh = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        ds = (dims,) if isinstance(dims, int) else tuple(dims)
        if len(sh) != len(ds):
            raise ArgumentError(f"roll needs one shift per dim, got shifts {shifts} and dims {dims}")
        x = self
        for s, d in zip(sh, ds):
            d = normalize_axis(d, self.ndim)
            n = int_dim(x.shape[d], f"roll of axis {d}")
            s = s % n if n else 0
            if s:
                lo, hi = x.split([n - s, s], d)
                x = hi.cat(lo, dim=d)
        return x

    def repeat_interleave(self: Tensor, repeats: int, dim: int | None = None) -> Tensor:
        """Each element repeated `repeats` times in place along dim (None: the flattened tensor)."""
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 0:
            raise ValueError(f"repeat_interleave takes a non-negative int count (per-element counts would make the "
                             f"output's size depend on values), got {repeats!r}")
        if dim is None:
            return self.flatten().repeat_interleave(repeats, 0)
        d = normalize_axis(dim, self.ndim)
        x = self.unsqueeze(d + 1)
        return x.expand(*x.shape[:d + 1], repeats, *x.shape[d + 2:]).flatten(d, d + 1)

    def _triangle(self: Tensor, diagonal: int, lower: bool) -> Tensor:
        if self.ndim < 2:
            raise ShapeError(f"tril/triu need at least 2 dims, got {fmt(self.shape)}")
        r, c = self.shape[-2:]
        rows = type(self).arange(r, device=self.device).reshape(r, 1)
        cols = type(self).arange(c, device=self.device).reshape(1, c)
        keep = cols.le(rows.add(diagonal)) if lower else cols.ge(rows.add(diagonal))
        return keep.where(self, self.zeros_like())

    def tril(self: Tensor, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two axes (elements on and below the given diagonal), zeros above."""
        return self._triangle(diagonal, True)

    def triu(self: Tensor, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two axes (elements on and above the given diagonal), zeros below."""
        return self._triangle(diagonal, False)

    def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The diagonal of axes dim1 and dim2 (above it for offset > 0), as a new last axis: every (b+1)-th
        element of the two axes flattened."""
        a1, a2 = normalize_axis(dim1, self.ndim), normalize_axis(dim2, self.ndim)
        if a1 == a2:
            raise AxisError(f"diagonal needs two different axes, got {dim1} and {dim2}")
        rest = [k for k in range(self.ndim) if k not in (a1, a2)]
        x = self.permute(*rest, a1, a2)
        a, b = x.shape[-2:]
        n = max(min(a, b - offset) if offset >= 0 else min(a + offset, b), 0)
        start = offset if offset >= 0 else -offset * b
        flat = x.flatten(-2)
        if n == 0:
            return flat.shrink([None] * (flat.ndim - 1) + [(0, 0)])
        return flat[(..., slice(start, start + (n - 1) * (b + 1) + 1, b + 1))]

    def diag(self: Tensor, diagonal: int = 0) -> Tensor:
        """A 1-D tensor's square matrix with it on the given diagonal; a 2-D tensor's diagonal (torch.diag)."""
        if self.ndim == 2:
            return self.diagonal(diagonal)
        if self.ndim != 1:
            raise ShapeError(f"diag takes a 1-D or 2-D tensor, got {fmt(self.shape)}")
        n, k = self.shape[0], diagonal
        m = n + abs(k)
        rows = type(self).arange(m, device=self.device).reshape(m, 1)
        cols = type(self).arange(m, device=self.device).reshape(1, m)
        vals = self.pad(((max(-k, 0), max(k, 0)),)).reshape(m, 1) if k < 0 else self.pad(((0, k),)).reshape(m, 1)
        return cols.sub(rows).eq(k).where(vals, vals.zeros_like())

    def meshgrid(self: Tensors, *tensors: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
        """Coordinate grids of 1-D tensors: "ij" (matrix) indexing, or "xy" (the first two axes swapped). A method,
        not a staticmethod, so x.meshgrid(y) grids x too (as tinygrad's does), as Tensor.meshgrid(x, y) and
        Tensor.meshgrid([x, y]) do."""
        ts = [*self, *tensors] if isinstance(self, (list, tuple)) else [self, *tensors]
        if indexing not in ("ij", "xy"):
            raise ValueError(f"meshgrid indexing must be 'ij' or 'xy', got {indexing!r}")
        if any(t.ndim != 1 for t in ts):
            raise ShapeError("meshgrid takes 1-D tensors")
        shape = tuple(t.shape[0] for t in ts)
        grids = [t.reshape(*(1,) * k, t.shape[0], *(1,) * (len(ts) - k - 1)).expand(shape) for k, t in enumerate(ts)]
        if indexing == "xy" and len(ts) > 1:
            grids = [g.transpose(0, 1) for g in grids]
        return tuple(grids)

    def one_hot(self: Tensor, num_classes: int = -1) -> Tensor:
        """(..., num_classes) int64 one-hot rows of an int tensor's classes; -1 reads max + 1 from the values
        (which computes them, so not inside a @function)."""
        if not self.dtype.is_int:
            raise DTypeError(f"one_hot takes an int tensor, got {self.dtype.name}")
        if num_classes == -1:
            num_classes = int(self.max().item()) + 1 if self.numel() else 0
        classes = type(self).arange(num_classes, dtype=self.dtype, device=self.device)
        return self.unsqueeze(-1).eq(classes).cast(dtypes.int64)

    def clone(self: Tensor) -> Tensor:
        """A copy with a buffer of its own once realized (gradients flow through it)."""
        return self.contiguous()

    def masked_select(self: Tensor, mask: Any, size: int | None = None, fill_value: Any = 0) -> Tensor:
        """The elements where mask (broadcast) is true, in order, as a 1-D tensor of `size` (padded with
        fill_value, cut if more are selected). Without size, the count is read from the mask (which computes it,
        so not inside a @function): a lazy graph needs its output size known."""
        m = self._coerce(mask)
        if not m.dtype.is_bool:
            raise DTypeError(f"masked_select needs a bool mask, got {m.dtype.name}")
        shape = broadcast_shapes(self.shape, m.shape)
        x, m = self.expand(shape).flatten(), m.expand(shape).flatten()
        if size is None:
            size = int(m.cast(dtypes.int32).sum().item())
        pos = m.cast(dtypes.int32).cumsum(0, dtype=dtypes.int32).sub(1)            # slot of each selected element
        slots = type(self).arange(size, dtype=dtypes.int32, device=self.device).reshape(size, 1)
        hit = m.reshape(1, -1).bitwise_and(pos.reshape(1, -1).eq(slots))          # (size, n)
        picked = hit.where(x.reshape(1, -1), x.zeros_like().reshape(1, -1)).sum(1).cast(self.dtype)
        return hit.any(1).where(picked, fill_value)

    def nonzero(self: Tensor, size: int | None = None, fill_value: int = -1) -> Tensor:
        """(count, ndim) int64 indices of the non-zero elements in row-major order (torch.nonzero), padded with
        fill_value or cut to `size`; without size the count is read from the values (see masked_select)."""
        mask = self.ne(0)
        flat = type(self).arange(max(self._size(), 1), dtype=dtypes.int64, device=self.device)
        flat = flat.shrink([(0, self._size())]).reshape(self.shape) if self.ndim else flat.reshape(())
        picked = flat.masked_select(mask, size, -1)
        strides = [numel(self.shape[k + 1:]) for k in range(self.ndim)]
        coords = [picked.floordiv(s).mod(d) for s, d in zip(strides, self.shape)]
        if not coords:  # a 0-d tensor has no coordinates: a row of none per element picked
            return type(self).zeros(picked.shape[0], 0, dtype=dtypes.int64, device=self.device)
        out = type(self).stack(coords, dim=1)
        return picked.ge(0).unsqueeze(-1).where(out, fill_value)

    def _scatter_parts(self: Tensor, dim: int, index: Any, src: Any) -> tuple[int, Tensor, Tensor]:
        """(axis, hit, values) of a scatter along dim, with dim moved last: hit (..., m, n) says that index[..., i]
        is n's target, values (..., m, 1) are src's values, both padded on the other axes to self's shape."""
        d = normalize_axis(dim, self.ndim)
        idx = self._index_tensor(index, d) if not isinstance(index, type(self)) else index
        if not idx.dtype.is_int or idx.ndim != self.ndim:
            raise IndexError(f"scatter index must be an int tensor of self's {self.ndim} dims, got "
                             f"{idx.dtype.name} {fmt(idx.shape)}")
        if isinstance(src, type(self)) and src.dtype != self.dtype:
            raise DTypeError(f"scatter of a {src.dtype.name} src into a {self.dtype.name} tensor: the dtypes must "
                             "be the same (torch's rule); cast src first")
        src_t = self._coerce(src).cast(self.dtype) if not _is_scalar_value(src) else \
            self._const_like(src).shrink([(0, s) for s in idx.shape])
        if any(a > b for k, (a, b) in enumerate(zip(idx.shape, self.shape)) if k != d) or \
                any(a > b for a, b in zip(idx.shape, src_t.shape)):
            raise ShapeError(f"scatter index {fmt(idx.shape)} must fit in self {fmt(self.shape)} (outside dim) and "
                             f"in src {fmt(src_t.shape)}")
        src_t = src_t.shrink([(0, s) for s in idx.shape])
        n = self.shape[d]
        idx_l, src_l = _wrapped(idx, n).transpose(d, -1), src_t.transpose(d, -1)
        hit = idx_l.unsqueeze(-1).eq(type(self).arange(n, dtype=idx_l.dtype, device=self.device))   # (..., m, n)
        lead = [(0, b - a) for a, b in zip(idx_l.shape[:-1], self.transpose(d, -1).shape[:-1])]
        hit = hit.pad([*lead, (0, 0), (0, 0)])
        vals = src_l.unsqueeze(-1).pad([*lead, (0, 0), (0, 0)])
        return d, hit, vals

    def scatter(self: Tensor, dim: int, index: Any, src: Any = None, reduce: str | None = None, *,
                value: Any = None) -> Tensor:
        """self with self[..., index[i], ...] = src[i] along dim (torch.scatter; index has self's dims, src at least
        index's shape, or a scalar, also given as value=). Where an index repeats, the last write (highest
        position) wins; reduce="add" or "multiply" combines the writes with self's value instead (scatter_reduce's
        "sum" and "prod")."""
        if (src is None) == (value is None):
            raise TypeError("scatter takes src or value (one of them)")
        src = value if src is None else src
        if reduce is not None:
            if reduce not in ("add", "multiply"):
                raise ArgumentError(f"scatter reduce must be 'add' or 'multiply', got {reduce!r}")
            return self.scatter_reduce(dim, index, src, "sum" if reduce == "add" else "prod")
        d, hit, vals = self._scatter_parts(dim, index, src)
        m = hit.shape[-2]
        order = type(self).arange(m, dtype=dtypes.int32, device=self.device).reshape(m, 1)
        last = hit.where(order, -1).max(-2, keepdim=True)                                       # (..., 1, n)
        pick = hit.bitwise_and(order.eq(last))
        new = pick.where(vals, vals.zeros_like()).sum(-2).cast(self.dtype)
        return hit.any(-2).where(new, self.transpose(d, -1)).transpose(d, -1)

    def scatter_reduce(self: Tensor, dim: int, index: Any, src: Any, reduce: str, include_self: bool = True) -> Tensor:
        """torch.scatter_reduce: the values scattered to each position reduced with "sum", "prod", "mean", "amax"
        or "amin", together with self's value there when include_self; positions nothing is scattered to keep
        self's value."""
        d, hit, vals = self._scatter_parts(dim, index, src)
        base = self.transpose(d, -1)
        got = hit.any(-2)
        if reduce in ("sum", "mean"):
            acc = hit.where(vals, 0).sum(-2)
            total = acc.add(base) if include_self else acc
            if reduce == "sum":
                return got.where(total.cast(self.dtype), base).transpose(d, -1)
            count = hit.sum(-2).add(1 if include_self else 0)
            mean = total.div(count.maximum(1)) if self.dtype.is_float else total.floordiv(count.maximum(1))
            return got.where(mean.cast(self.dtype), base).transpose(d, -1)
        if reduce == "prod":
            acc = hit.where(vals, 1).prod(-2)
            total = acc.mul(base) if include_self else acc
        elif reduce in ("amax", "amin"):
            lo = float("-inf") if self.dtype.is_float else self.dtype.min
            hi = float("inf") if self.dtype.is_float else self.dtype.max
            acc = hit.where(vals, lo).max(-2) if reduce == "amax" else hit.where(vals, hi).min(-2)
            total = (acc.maximum(base) if reduce == "amax" else acc.minimum(base)) if include_self else acc
        else:
            raise ArgumentError(f"scatter_reduce reduce must be 'sum', 'prod', 'mean', 'amax' or 'amin', "
                                f"got {reduce!r}")
        return got.where(total.cast(self.dtype), base).transpose(d, -1)
