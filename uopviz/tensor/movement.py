"""Movement Tensor ops: reshape, permute, expand, pad, shrink, flip, concatenation and NumPy-style indexing.

All of them are SPEC movement ops on the Tensor graph (no data moves until realize). Indexing with integer
tensors is SPEC's gather composition: a one-hot mask of the index against an arange, then a sum over the
indexed axis — with `where` instead of a multiply, so a NaN or inf elsewhere in the row cannot leak in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uopviz.dtype import DTypeError, dtypes, least_upper_dtype
from uopviz.tensor.util import (
    AxisError,
    Dim,
    ShapeError,
    at_most,
    broadcast_shapes,
    const_uop,
    dim_args,
    expand_to,
    fmt,
    int_args,
    is_symbolic,
    normalize_axes,
    normalize_axis,
    numel,
    same_dim,
    sym,
)
from uopviz.uop.ops import Ops

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor


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


def _wrapped(t: Tensor, d: int) -> Tensor:
    """Lazy index t for an axis of size d, -d..-1 wrapped (an unsigned t has none), in a dtype that holds -d..d,
    so that neither the wrap nor the arange it is matched against can overflow (a uint8 index into 300 rows)."""
    dt = t.dtype if t.dtype.min <= (0 if t.dtype.is_unsigned else -d) and d <= t.dtype.max else dtypes.int64
    t = t.cast(dt)
    return t if dt.is_unsigned else t.lt(0).where(t.add(d), t)


def _count(n: Dim) -> str:
    return str(n) if isinstance(n, int) else n.render()


class MovementMixin:
    """Movement and indexing ops of Tensor."""

    __slots__ = ()

    def reshape(self: Tensor, *shape: int | tuple[int, ...]) -> Tensor:
        """New shape with the same number of elements; one size may be -1 (inferred). Sizes may be symbolic
        (bound variables): the counts must then be equal for every value of the variables."""
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

    def permute(self: Tensor, *order: int | tuple[int, ...]) -> Tensor:
        """Reorder the axes: result axis k is self's axis order[k] (negatives allowed)."""
        axes = int_args(order)
        if len(axes) != self.ndim:
            raise AxisError(f"permute of a {self.ndim}-d tensor needs {self.ndim} axes, got {axes}")
        norm = tuple(normalize_axis(a, self.ndim) for a in axes)
        if sorted(norm) != list(range(self.ndim)):
            raise AxisError(f"{axes} is not a permutation of the axes of {fmt(self.shape)}")
        return self if norm == tuple(range(self.ndim)) else self._new(self.uop.permute(norm))

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

    def expand(self: Tensor, *shape: int | tuple[int, ...]) -> Tensor:
        """Broadcast to shape (NumPy's broadcast_to): size-1 axes grow, new axes are added on the left;
        -1 keeps a size."""
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

    def pad(self: Tensor, pad_width: Any, value: bool | int | float = 0) -> Tensor:
        """NumPy-style pad: an int, one (before, after) pair for every axis, or one pair per axis (None = no pad);
        the new elements are `value` (OverflowError where it does not fit self's dtype)."""
        pairs = self._pad_pairs(pad_width)
        if all(p == (0, 0) for p in pairs):
            return self
        new = tuple(b + d + a for (b, a), d in zip(pairs, self.shape))
        out = self._new(self.uop.pad(tuple(b for b, _ in pairs), new))
        if value == 0:
            return out
        inside = self._new(const_uop(True, dtypes.bool, self.shape).pad(tuple(b for b, _ in pairs), new))
        return inside.where(out, out._const_like(value, dtypes.from_py(value, out.dtype)))

    def _pad_pairs(self: Tensor, pad_width: Any) -> list[tuple[int, int]]:
        def pair(p: Any) -> tuple[int, int]:
            if p is None:
                return (0, 0)
            b, a = (p, p) if isinstance(p, int) else tuple(p)
            if not (isinstance(b, int) and isinstance(a, int)) or b < 0 or a < 0:
                raise ShapeError(f"pad widths must be non-negative ints, got {p!r} (use shrink or slicing to cut)")
            return (b, a)
        if isinstance(pad_width, int) or (isinstance(pad_width, (tuple, list)) and len(pad_width) == 2
                                          and all(isinstance(p, int) for p in pad_width)):
            return [pair(pad_width)] * self.ndim
        pw = list(pad_width)
        if len(pw) != self.ndim:
            raise ShapeError(f"pad of {fmt(self.shape)} needs {self.ndim} (before, after) pairs, got {len(pw)}")
        return [pair(p) for p in pw]

    def shrink(self: Tensor, arg: Any) -> Tensor:
        """Keep elements start..stop-1 of each axis, from one (start, stop) pair per axis (None = all)."""
        pairs = list(arg)
        if len(pairs) != self.ndim:
            raise ShapeError(f"shrink of {fmt(self.shape)} needs {self.ndim} (start, stop) pairs, got {len(pairs)}")
        rng = [(0, d) if p is None else tuple(sym(x) for x in p) for p, d in zip(pairs, self.shape)]
        for (s, e), d in zip(rng, self.shape):  # symbolic bounds: in range for every value of their variables
            if not (at_most(0, s) and at_most(s, e) and at_most(e, d)):
                raise ShapeError(f"shrink {fmt(rng)} of {fmt(self.shape)}: need 0 <= start <= stop <= size"
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
        """Remove size-1 axes (all of them, or the given ones, which must have size 1)."""
        if axis is None:
            axes = tuple(k for k, d in enumerate(self.shape) if d == 1)
        else:
            axes = normalize_axes(axis, self.ndim)
            if any(self.shape[k] != 1 for k in axes):
                raise ShapeError(f"cannot squeeze axis {axis} of {fmt(self.shape)}: only size-1 axes can go")
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
        """Tile the tensor (NumPy's tile): axis k repeated repeats[k] times; extra repeats add leading axes."""
        reps = int_args(repeats)
        if any(r < 0 for r in reps):
            raise ShapeError(f"repeat counts must be non-negative, got {reps}")
        x = self.reshape((1,) * (len(reps) - self.ndim) + self.shape) if len(reps) > self.ndim else self
        reps = (1,) * (x.ndim - len(reps)) + reps
        inter = tuple(v for d in x.shape for v in (1, d))
        tiled = tuple(v for r, d in zip(reps, x.shape) for v in (r, d))
        return x.reshape(inter).expand(tiled).reshape(tuple(r * d for r, d in zip(reps, x.shape)))

    def cat(self: Tensor, *others: Tensor, dim: int = 0) -> Tensor:
        """Join tensors along an existing axis (`Tensor.cat(a, b, dim=1)` or `a.cat(b, dim=1)`): each is padded
        into place with zeros and the pieces are added (or-ed for bools)."""
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
        out, off = None, 0
        for t in ts:
            c = t.cast(dt)
            piece = c._new(c.uop.pad((0,) * d + (off,) + (0,) * (self.ndim - d - 1), new))
            out = piece if out is None else out.add(piece)
            off += t.shape[d]
        return out

    def stack(self: Tensor, *others: Tensor, dim: int = 0) -> Tensor:
        """Join tensors of one shape along a new axis."""
        for t in others:
            if t.shape != self.shape:
                raise ShapeError(f"stack needs tensors of one shape, got {fmt(self.shape)} and {fmt(t.shape)}")
        d = normalize_axis(dim, self.ndim + 1)
        return self.unsqueeze(d).cat(*(t.unsqueeze(d) for t in others), dim=d)

    # ---------------------------------------------------------------- indexing
    def __getitem__(self: Tensor, index: Any) -> Tensor:
        """NumPy indexing: ints (negative too), slices with any step, None, Ellipsis, and integer index arrays
        (Python lists, NumPy arrays or Tensors: advanced indexing, broadcast together).

        Indices known now (ints, lists, NumPy arrays) are checked: one outside [-size, size) is an IndexError
        with NumPy's message, and negatives wrap. Index Tensors are lazy, so their values cannot be checked
        without running the graph: in them -size..-1 wrap as in NumPy, and a value outside [-size, size)
        selects nothing, so its element reads 0 (a masked read) where NumPy would raise."""
        import numpy as np
        items = list(index) if isinstance(index, tuple) else [index]
        items = [int(i) if isinstance(i, np.integer) else i for i in items]
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
            items = [self._new(const_uop(self._check_int(i, _axis_at(pos, items)), dtypes.int32, ()))
                     if isinstance(i, int) else i for pos, i in enumerate(items)]
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
        if (bad := arr[(arr < -d) | (arr >= d)]).size:
            raise IndexError(f"index {bad.flat[0]} is out of bounds for axis {axis} with size {d}")
        small = np.int32 if d <= np.iinfo(np.int32).max + 1 else np.int64
        return type(self)((arr % max(d, 1)).astype(small), device=self.device)

    def _check_int(self: Tensor, i: int, axis: int) -> int:
        """An int index for `axis`, in range, made non-negative."""
        d = self.shape[axis]
        if not -d <= i < d:
            raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d}")
        return i % d

    def _basic_index(self: Tensor, items: list[Any]) -> Tensor:
        """Apply ints, slices and None (tensor items keep their axis whole), in one flip, shrink and reshape."""
        flips, ranges, steps, out_shape = [], [], [], []
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
                ranges.append((i, i + 1))
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
        """Gather with the tensor indices among items (one item per axis of self after basic indexing)."""
        pos = [k for k, it in enumerate(items) if isinstance(it, type(self))]
        if not pos:
            return self
        idx: list[Tensor] = [items[k] for k in pos]
        bshape = broadcast_shapes(*(t.shape for t in idx))
        rest = [k for k in range(self.ndim) if k not in pos]
        dims = [self.shape[k] for k in pos]
        nb, na = len(bshape), len(pos)
        mask = None
        for j, (t, d) in enumerate(zip(idx, dims)):
            t = _wrapped(t, d).expand(bshape).reshape(bshape + (1,) * na)
            ar = type(self).arange(d, dtype=t.dtype, device=self.device)
            hit = t.eq(ar.reshape((1,) * (nb + j) + (d,) + (1,) * (na - j - 1)))
            mask = hit if mask is None else mask.bitwise_and(hit)
        src_shape = tuple(self.shape[k] for k in rest)
        x = self.permute(rest + pos).reshape(src_shape + (1,) * nb + tuple(dims))
        x = x.cast(dtypes.uint8) if self.dtype.is_bool else x
        red = tuple(range(len(rest) + nb, len(rest) + nb + na))
        out = mask.where(x, x._const_like(0))._reduce_op(Ops.ADD, red, False)  # rest + bshape
        out = out.ne(0) if self.dtype.is_bool else out
        nr, bdims = len(rest), list(range(len(rest), len(rest) + nb))
        if pos == list(range(pos[0], pos[0] + na)):  # adjacent tensor indices keep their place, else they go first
            return out.permute(list(range(pos[0])) + bdims + list(range(pos[0], nr)))
        return out.permute(bdims + list(range(nr)))

    def gather(self: Tensor, idx: Any, axis: int = 0) -> Tensor:
        """np.take(self, idx, axis): the result has self's axes with `axis` replaced by idx's shape. A list or
        NumPy idx is bounds-checked; a Tensor idx is lazy, so out of [-size, size) it reads 0 (see __getitem__)."""
        ax = normalize_axis(axis, self.ndim)
        return self[(slice(None),) * ax + (self._index_tensor(idx, ax),)]

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
