"""Multi-device tensors: a Tensor on a tuple of devices, sharded along its `axis` or replicated (axis None).

The Tensor-level graph of a multi-device tensor is one global graph in SPEC's terms: its nodes have a tuple
device, their `axis` is the derived shard axis (uopviz/uop/props.py), Copy moves values between devices (to a
tuple it reshards along axis 0, to one device it gathers) and Replicated marks a value every device holds. Every
Tensor op builds that graph as it builds any other.

To run it, `lower` (the `shard` pass, recorded in a context of that name) turns the global graph into one graph
per device: each node on a tuple device becomes one node per device (its shard: the device's slice along the
shard axis, or the whole value where replicated), elementwise ops and reductions apply per shard, a reduction over
the shard axis ends in an allreduce (SPEC's reduce-scatter then allgather, on the shards' partial results), and
each Copy becomes single-device Copies of the slices that move. The kernel split makes each such Copy a copy step,
and a schedule over several devices runs each device's steps on its own thread (uopviz/realize.py).

Shards split an axis of size S over n devices in order, ceil(S/n) elements each, the last ones shorter (or empty)
where n does not divide S. A realized multi-device tensor keeps its shards as one realized buffer per device; its
graph is a view of a Buffer on the tuple device (SPEC's multi-device leaf) that `lower` maps back to the shards.

The collectives are SPEC's compositions of these ops, as Tensor methods (MultiMixin): broadcast, scatter_to,
gather_to, reduce_to, allgather, reduce_scatter and allreduce (scatter, gather and reduce with `_to`, since Tensor's
scatter and gather are PyTorch's indexing ops).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from uopviz.runtime import buffer
from uopviz.runtime.device import canonical_devices
from uopviz.trace.recorder import context, stage
from uopviz.uop.ops import Built, GroupOp, Ops, UOp, prod, toposort
from uopviz.uop.pattern import function_pass

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

Devices = tuple[str, ...]
T = TypeVar("T")


class ShardError(ValueError):
    """An op on a multi-device tensor that cannot run per shard (the message says why and what to do instead)."""


# realized multi-device value (its graph) -> its shards, one realized value per device
_REALIZED: weakref.WeakKeyDictionary[UOp, tuple[UOp, ...]] = weakref.WeakKeyDictionary()


def is_multi(u: UOp) -> bool:
    return isinstance(u.device, tuple)


def is_realized(u: UOp) -> bool:
    """Whether u is a realized multi-device value (its shards in memory)."""
    return u in _REALIZED


def needs_lowering(roots: Sequence[UOp]) -> bool:
    """Whether any of these graphs holds a multi-device node (so the shard pass must run before scheduling). The
    answer is kept per node, so a walk stops at nodes asked about before (an eager step's weights and constants); no
    walk at all while no node naming several devices was ever built."""
    if not Built.several_devices:
        return False
    for root in roots:  # a walk of its own (toposort's gate is a call per node): every node realized is met here
        if _HOLDS_MULTI in root.__dict__:
            continue
        stack = [(root, iter(root.src))]
        while stack:
            node, it = stack[-1]
            for s in it:
                if _HOLDS_MULTI not in s.__dict__:
                    stack.append((s, iter(s.src)))
                    break
            else:
                stack.pop()
                node.__dict__[_HOLDS_MULTI] = _multi_here(node) or any(s.__dict__[_HOLDS_MULTI] for s in node.src)
    return any(r.__dict__[_HOLDS_MULTI] for r in roots)


_HOLDS_MULTI = "_holds_multi_device"  # in a UOp's __dict__: whether its graph holds a multi-device node


def _multi_here(u: UOp) -> bool:
    """Whether u names several devices itself: a node's device is its own arg's (a Buffer, Param, Copy, Load) or a
    source's, so a graph holds a multi-device node exactly when it holds one of these (no device is derived)."""
    op = u.op
    if op in (Ops.BUFFER, Ops.PARAM):
        return isinstance(u.arg.device, tuple)
    if op is Ops.COPY:
        return isinstance(u.arg, tuple)
    return op is Ops.LOAD and u.arg is not None and isinstance(u.arg.device, tuple)


def bounds(size: int, n: int) -> list[tuple[int, int]]:
    """(start, end) of each of n shards of an axis of `size`: ceil(size/n) each, in order, the last ones shorter."""
    c = -(-size // n)
    return [(min(i * c, size), min((i + 1) * c, size)) for i in range(n)]


# ---------------------------------------------------------------- the shard pass
def lower(roots: Sequence[UOp]) -> list[UOp | tuple[UOp, ...]]:
    """Each root as per-device graphs: a tuple of shards (one per device) for a multi-device root, else one graph
    whose multi-device parts were lowered. Recorded as the `shard` pass."""
    out: list[UOp | tuple[UOp, ...]] = []

    def run(tup: UOp) -> UOp:
        memo: dict[UOp, Any] = {}
        for u in toposort(roots, gate=lambda x: x not in _REALIZED):
            memo[u] = _lower(u, memo)
        out.extend(memo[r] for r in roots)
        return UOp(Ops.TUPLE, tuple(x for r in out for x in (r if isinstance(r, tuple) else (r,))))

    with context("shard", "schedule"), stage("Callify"):
        function_pass(run, UOp(Ops.TUPLE, tuple(roots)), "shard", origin=lower)
    return out


def _lower(u: UOp, memo: dict[UOp, Any]) -> Any:
    if u in _REALIZED:
        return _REALIZED[u]
    dev = u.device
    if not isinstance(dev, tuple):
        if u.op is Ops.COPY and is_multi(u.src[0]) and isinstance(dev, str):  # a Copy has its device
            return _gather(u.src[0], memo[u.src[0]], dev)
        if any(isinstance(memo[s], tuple) for s in u.src):
            raise ShardError(f"{u.op.value} on {dev} reads a tensor on several devices: copy it to {dev} first "
                             f"(.to({dev!r}))")
        return u.replace(src=tuple(memo[s] for s in u.src))
    _dims(u)
    op, ax = u.op, u.axis
    if op is Ops.COPY:
        return _reshard(u, memo)
    if op is Ops.REPLICATED:
        return tuple(_take_first(p, u.arg) for p in memo[u.src[0]])
    if op in GroupOp.Elementwise or op in GroupOp.Marker or op is Ops.BITCAST:
        return _elementwise(u, memo)
    src, parts = u.src[0], memo[u.src[0]]
    if op is Ops.REDUCE and len(u.src) == 1:
        axes = tuple(a % len(src.shape) for a in u.arg.axes)
        partial = tuple(p.reduce(u.arg.op, axes=axes) for p in parts)
        return _allreduce(partial, u.arg.op, _devs(u)) if src.axis in axes else partial
    if op is Ops.PERMUTE:
        return tuple(p.permute(u.arg) for p in parts)
    if op is Ops.RESHAPE:
        return _reshape(u, parts, memo)
    if op is Ops.EXPAND:
        return tuple(p.expand(_local(_dims(u), ax, _dims(p))) for p in parts)
    if op in (Ops.PAD, Ops.SHRINK, Ops.FLIP):
        return _window(u, parts)
    return _on_first(u, memo)


def _dims(x: UOp) -> tuple[int, ...]:
    """x's shape as ints: ShardError for a symbolic size (the shard pass splits concrete sizes only; it asks this of
    every multi-device node before lowering it, so the nodes it builds from them are concrete too)."""
    dims = tuple(d for d in x.shape if isinstance(d, int))
    if len(dims) != len(x.shape):
        raise ShardError(f"{x.op.value}: a tensor on several devices needs concrete sizes, got a symbolic shape")
    return dims


def _one(u: UOp) -> str:
    """The one device of a shard (the shard pass puts each on one device)."""
    dev = u.device
    if not isinstance(dev, str):
        raise ShardError(f"{u.op.value}: a shard is on one device, this one is on {dev}")
    return dev


def _devs(u: UOp) -> Devices:
    """The devices of a multi-device node (the shard pass meets no other where it asks)."""
    dev = u.device
    if not isinstance(dev, tuple):
        raise ShardError(f"{u.op.value} on {dev} is not on several devices")
    return dev


def _local(shape: tuple[int, ...], ax: int | None, like: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` with the shard axis at the size a shard has there (`like`'s)."""
    return shape if ax is None else _with(shape, ax, like[ax])


def _with(shape: tuple[T, ...], ax: int, size: T) -> tuple[T, ...]:
    """`shape` (or a Flip's flags) with axis ax of `size`."""
    return tuple(size if k == ax else d for k, d in enumerate(shape))


def _spans(parts: Sequence[UOp], ax: int) -> list[tuple[int, int]]:
    """(start, end) along the shard axis of each shard, from their sizes."""
    out, off = [], 0
    for p in parts:
        out.append((off, off + _dims(p)[ax]))
        off += _dims(p)[ax]
    return out


def _slice(x: UOp, ax: int, lo: int, hi: int) -> UOp:
    """x's elements lo..hi along axis ax (x itself when that is all of them)."""
    dims = _dims(x)
    if (lo, hi) == (0, dims[ax]):
        return x
    return x.shrink(_with((0,) * len(dims), ax, lo), _with(dims, ax, hi - lo))


def _take_first(x: UOp, axes: tuple[int, ...]) -> UOp:
    """Replicated's shard: a value every device holds, its replicated axes collapsed to their first element."""
    for a in axes:
        x = _slice(x, a, 0, 1)
    return x


def _elementwise(u: UOp, memo: dict[UOp, Any]) -> tuple[UOp, ...]:
    """The op per shard; a source replicated or without a device is sliced to each shard of the sharded ones
    (one without a device that needs a kernel is copied to each device, see _computed)."""
    ax, dev = u.axis, _devs(u)
    ref = next((memo[s] for s in u.src if isinstance(memo[s], tuple) and s.axis == ax), None)
    spans = _spans(ref, ax) if ax is not None and ref is not None else None
    out = []
    for i in range(len(dev)):
        srcs = []
        for s in u.src:
            x = memo[s]
            if isinstance(x, tuple):
                if s.device != dev:
                    raise ShardError(f"{u.op.value} of tensors on {s.device} and {dev}: move one with .to()")
                if s.axis is not None and s.axis != ax:  # sharded on another axis: resharded along ax
                    if ax is None or spans is None:
                        raise ShardError(f"{u.op.value}: a source sharded on axis {s.axis} has no shard axis to "
                                         "meet")  # (the axis rule, props.py, derives none only where no source has one)
                    x = _across(x, s.axis, ax, *spans[i], dev[i])
                else:
                    x = x[i] if s.axis == ax or spans is None or ax is None else _slice(x[i], ax, *spans[i])
            else:
                x = _slice(x, ax, *spans[i]) if spans is not None and ax is not None and x.shape else x
                x = x.copy_to(dev[i]) if s.device is None and _computed(s) else x
            srcs.append(x)
        out.append(u.replace(src=tuple(srcs)))
    return tuple(out)


def _computed(u: UOp) -> bool:
    """Whether a graph without a device (made of constants) gets a kernel of its own (a reduction in it): then
    each shard reads it from memory, so it is computed once and copied to every device that reads it."""
    return any(x.op in (Ops.REDUCE, Ops.CONTIGUOUS) for x in u.toposort())


def _reshape(u: UOp, parts: tuple[UOp, ...], memo: dict[UOp, Any]) -> tuple[UOp, ...]:
    """Reshape per shard where every shard holds whole rows of the new shape (then resplit as a Copy splits, if
    the new axis divides unevenly); otherwise the value is gathered first (_on_first)."""
    src, ax = u.src[0], u.axis
    if src.axis is None or ax is None:
        return tuple(p.reshape(u.shape) for p in parts)
    old, new = _dims(src), _dims(u)
    inner_old, inner_new = prod(old[src.axis + 1:]), prod(new[ax + 1:])
    counts = [_dims(p)[src.axis] * inner_old for p in parts]
    if prod(new[:ax]) != prod(old[:src.axis]) or any(c % inner_new for c in counts):
        return _on_first(u, memo)
    local = tuple(p.reshape(_with(new, ax, c // inner_new)) for p, c in zip(parts, counts, strict=True))
    return _resplit(local, ax, _devs(u))


def _window(u: UOp, parts: tuple[UOp, ...]) -> tuple[UOp, ...]:
    """Pad, Shrink or Flip: per shard along the other axes; along the shard axis, each device gathers the source
    elements its slice of the result needs (copies from the devices holding them) and pads or flips them."""
    ax, src, shape, dev = u.axis, u.src[0], _dims(u), _devs(u)
    if u.op is Ops.FLIP:
        flags: tuple[bool, ...] = u.arg
        parts = tuple(p.flip(_with(flags, ax, False) if ax is not None else flags) for p in parts)
        if ax is None or not flags[ax]:
            return parts
        size = _dims(src)[ax]
        return tuple(_gather_range(parts, ax, size - hi, size - lo, d).flip(_with((False,) * len(shape), ax, True))
                     for (lo, hi), d in zip(bounds(size, len(parts)), dev, strict=True))
    offsets = tuple(int(o.arg.value) for o in u.src[1].src)
    make = UOp.pad if u.op is Ops.PAD else UOp.shrink
    if ax is None or (offsets[ax] == 0 and shape[ax] == _dims(src)[ax]):
        return tuple(make(p, offsets, _local(shape, ax, _dims(p))) for p in parts)
    parts = tuple(make(p, _with(offsets, ax, 0), _with(shape, ax, _dims(p)[ax])) for p in parts)
    out = []
    for (lo, hi), d in zip(bounds(shape[ax], len(parts)), dev, strict=True):
        if u.op is Ops.SHRINK:
            out.append(_gather_range(parts, ax, offsets[ax] + lo, offsets[ax] + hi, d))
            continue
        before, size = offsets[ax], _dims(src)[ax]  # padded position p holds source element p - before
        a, b = min(max(lo - before, 0), size), max(min(hi - before, size), 0)
        piece = _gather_range(parts, ax, a, max(a, b), d)
        lead = min(max(before - lo, 0), hi - lo)
        out.append(piece.pad(_with((0,) * len(shape), ax, lead), _with(_dims(piece), ax, hi - lo)))
    return tuple(out)


def _move(x: UOp, d: str) -> UOp:
    """x on device d: itself if it is there, else a Copy."""
    return x if x.device == d else x.copy_to(d)


def _gather_range(parts: Sequence[UOp], ax: int, lo: int, hi: int, d: str) -> UOp:
    """Elements lo..hi along ax of the value the shards `parts` hold (in order), joined on device d: the
    overlapping slice of each shard, copied to d where it lives elsewhere."""
    pieces = [_move(_slice(p, ax, max(lo, slo) - slo, min(hi, shi) - slo), d)
              for p, (slo, shi) in zip(parts, _spans(parts, ax), strict=True) if max(lo, slo) < min(hi, shi)]
    return _concat(pieces, ax, _empty_on(parts, ax, d))


def _empty_on(parts: Sequence[UOp], ax: int, d: str) -> UOp:
    """No elements along ax, on device d: a slice of d's own shard where it holds one, else a view of an empty
    buffer there (a Copy of nothing would have no step to run it)."""
    own = next((p for p in parts if p.device == d), None)
    if own is not None:
        return _slice(own, ax, 0, 0)
    return _nothing(_with(_dims(parts[0]), ax, 0), parts[0].dtype, d)


def _nothing(shape: tuple[int, ...], dtype: Any, d: str) -> UOp:
    """A value of no elements on device d: a view of none of a fresh buffer's."""
    return buffer.new_buffer(0, dtype, d).shrink((0,), (0,)).reshape(shape)


def _resplit(parts: tuple[UOp, ...], ax: int, dev: Devices) -> tuple[UOp, ...]:
    """Shards along ax of any sizes moved to the sizes a Copy splits into (parts themselves where they are)."""
    size = sum(_dims(p)[ax] for p in parts)
    want = bounds(size, len(dev))
    if _spans(parts, ax) == want:
        return parts
    return tuple(_gather_range(parts, ax, lo, hi, d) for (lo, hi), d in zip(want, dev, strict=True))


def _on_first(u: UOp, memo: dict[UOp, Any]) -> tuple[UOp, ...]:
    """An op that does not run per shard: its sources gathered onto the first device, the op run there, and the
    result split along u's axis as a Copy splits (or copied whole to every device where replicated). The
    Copies show in the trace's shard pass."""
    dev, ax = _devs(u), u.axis
    whole = u.replace(src=tuple(_gather(s, memo[s], dev[0]) if isinstance(memo[s], tuple) else memo[s]
                                for s in u.src))
    if ax is None:
        return tuple(_move(whole, d) for d in dev)
    return tuple(_gather_range((whole,), ax, lo, hi, d) for (lo, hi), d in zip(bounds(_dims(u)[ax], len(dev)), dev,
                                                                                strict=True))


def _reshard(u: UOp, memo: dict[UOp, Any]) -> tuple[UOp, ...]:
    """Copy to a tuple device: the value split along axis 0, each device getting its slice copied in."""
    src, dev = u.src[0], _devs(u)
    if not src.shape:
        raise ShardError("a 0-d tensor has no axis to shard: reshape it to (1,) or replicate it (.shard(devices))")
    x, targets = memo[src], bounds(_dims(src)[0], len(dev))
    if not isinstance(x, tuple):
        return tuple(_gather_range((x,), 0, lo, hi, d) for (lo, hi), d in zip(targets, dev, strict=True))
    sax = src.axis
    if sax is None:  # replicated: the slice from the device itself where it holds one
        held = _devs(src)
        return tuple(_gather_range((x[held.index(d)] if d in held else x[0],), 0, lo, hi, d)
                     for (lo, hi), d in zip(targets, dev, strict=True))
    if sax == 0:
        return tuple(_gather_range(x, 0, lo, hi, d) for (lo, hi), d in zip(targets, dev, strict=True))
    return tuple(_across(x, sax, 0, lo, hi, d) for (lo, hi), d in zip(targets, dev, strict=True))


def _across(parts: Sequence[UOp], sax: int, ax: int, lo: int, hi: int, d: str) -> UOp:
    """Elements lo..hi along ax, whole along sax, of the value `parts` hold sharded along sax: every shard's
    slice along ax, moved to d and joined along sax (a tensor sharded on sax resharded on ax)."""
    pieces = [_move(_slice(p, ax, lo, hi), d) for p in parts if _dims(p)[sax] and hi > lo]
    if pieces:
        return _concat(pieces, sax, pieces[0])
    empty = _empty_on(parts, ax, d)
    full = sum(_dims(p)[sax] for p in parts)
    return empty.pad((0,) * len(empty.shape), _with(_dims(empty), sax, full))


def _gather(src: UOp, parts: tuple[UOp, ...], device: str) -> UOp:
    """Copy to one device: the shards copied there and joined along the shard axis (one of them if replicated)."""
    if src.axis is None:
        held = _devs(src)
        return (parts[held.index(device)] if device in held else parts[0]).copy_to(device)
    pieces = [p.copy_to(device) for p in parts if _dims(p)[src.axis]]
    return _concat(pieces, src.axis, parts[0].copy_to(device))


def _concat(pieces: list[UOp], ax: int, empty: UOp) -> UOp:
    """The pieces (on one device) joined along ax with Tensor.cat; `empty` where there are none."""
    from uopviz.tensor.tensor import Tensor
    if not pieces:
        return empty
    if len(pieces) == 1:
        return pieces[0]
    return Tensor.cat(*(Tensor(p) for p in pieces), dim=ax).uop


def _allreduce(partial: tuple[UOp, ...], op: Ops, dev: Devices) -> tuple[UOp, ...]:
    """Every device's partial results combined on every device, as SPEC composes allreduce: a reduce-scatter
    (device k combines chunk k of every partial) then an allgather (every device joins the combined chunks)."""
    shape = _dims(partial[0])
    flat = tuple(p.reshape((math.prod(shape),)) for p in partial)
    combined = []
    for k, ((lo, hi), d) in enumerate(zip(bounds(math.prod(shape), len(dev)), dev, strict=True)):
        acc = _slice(flat[k], 0, lo, hi)  # an empty chunk (more devices than elements) stays empty
        for j, p in enumerate(flat if hi > lo else ()):
            if j != k:
                acc = acc.alu(op, _move(_slice(p, 0, lo, hi), d))
        combined.append(acc)
    return tuple(_gather_range(combined, 0, 0, math.prod(shape), d).reshape(shape) for d in dev)


# ---------------------------------------------------------------- realizing
def realize(tensors: Sequence[Tensor]) -> None:
    """Compute tensors whose graphs hold multi-device nodes: the shard pass, then one schedule over every device;
    a multi-device tensor then holds its shards, the others their buffer."""
    from uopviz.realize import realize as run
    lowered = lower([t.uop for t in tensors])
    flat = [x for r in lowered for x in (r if isinstance(r, tuple) else (r,)) if prod(x.shape)]
    done = iter(run(flat))
    for t, r in zip(tensors, lowered, strict=True):
        if not isinstance(r, tuple):
            t._uop = next(done)
            continue
        shards = tuple(next(done) if prod(x.shape) else _nothing(_dims(x), x.dtype, _one(x)) for x in r)
        t._uop = _realized_view(t.uop, shards)


def assign(pairs: Sequence[tuple[Tensor, Tensor]]) -> None:
    """Write each value into its realized multi-device target in place: the value resharded as the target is
    (its axis), run through the shard pass, and each shard written into the target's shard on its device, all in
    one schedule."""
    from uopviz.realize import assign as write
    values = [v if v.axis == t.axis else v.shard(t.device, t.axis) for t, v in pairs]
    lowered = [x for r in lower([v.uop for v in values]) for x in (r if isinstance(r, tuple) else (r,))]
    targets = [s for t, _ in pairs for s in _REALIZED[t.uop]]
    kept = [(s, x) for s, x in zip(targets, lowered, strict=True) if prod(s.shape)]  # an empty shard holds nothing
    write([s for s, _ in kept], [x for _, x in kept])


def buffers_of(u: UOp) -> list[UOp]:
    """The Buffers a realized value's data lives in: one per shard for a multi-device value (empty shards have
    none), else its own."""
    return [s.src[0] for s in _REALIZED[u] if prod(s.shape)] if u in _REALIZED else [u.src[0]]


def _realized_view(u: UOp, shards: tuple[UOp, ...]) -> UOp:
    """A graph of u's shape, dtype, device and axis over a Buffer on the tuple device, standing for the shards
    (the shard pass maps it back to them): the shards one after another, viewed in the global shape."""
    dev, ax, shape = _devs(u), u.axis, _dims(u)
    n = len(dev)
    if ax is None:
        buf = buffer.new_buffer(max(math.prod(shape), 1), u.dtype, dev)
        view = buf.reshape((n, *shape)).replicated((0,)).reshape(shape)
    else:
        if [_dims(s)[ax] for s in shards] != [hi - lo for lo, hi in bounds(shape[ax], n)]:
            raise ShardError(f"shards of sizes {[_dims(s)[ax] for s in shards]} along axis {ax} do not split "
                             f"{shape[ax]} as a Copy does ({[hi - lo for lo, hi in bounds(shape[ax], n)]})")
        c = -(-shape[ax] // n)
        local = _with(shape, ax, c)
        buf = buffer.new_buffer(max(math.prod(local), 1), u.dtype, dev)
        order = (*range(1, ax + 1), 0, *range(ax + 1, len(shape) + 1))
        view = buf.reshape((n, *local)).permute(order).reshape(_with(shape, ax, n * c))
        if n * c != shape[ax]:
            view = _slice(view, ax, 0, shape[ax])
    _REALIZED[view] = shards
    return view


def over(u: UOp, new: Mapping[UOp, UOp]) -> UOp:
    """A realized multi-device value like u whose shards' Buffers are new's where new maps them (a @jit replay's
    results, each call in memory of its own)."""
    return _realized_view(u, tuple(new.get(s.src[0], s.src[0]).reshape(s.shape) for s in _REALIZED[u]))


def shards_of(u: UOp) -> tuple[UOp, ...]:
    """The realized shards of a realized multi-device value."""
    return _REALIZED[u]


# ---------------------------------------------------------------- the Tensor methods
class MultiMixin:
    """Sharding and SPEC's seven collectives. D is the tuple of devices, n its length."""

    @property
    def axis(self: Tensor) -> int | None:
        """The shard axis of a multi-device tensor (None: replicated, or on one device)."""
        return self.uop.axis

    def shard(self: Tensor, devices: Sequence[str], axis: int | None = None) -> Tensor:
        """This tensor on the devices: split along `axis` (device i holding the i-th slice, ceil(size/n) each,
        the last ones shorter), or replicated on each with axis None."""
        from uopviz.tensor.util import normalize_axis
        dev = _devices(devices)
        if axis is None:
            return self.broadcast(dev)
        a = normalize_axis(axis, self.ndim)
        order = (a, *(k for k in range(self.ndim) if k != a))
        back = tuple(order.index(k) for k in range(self.ndim))
        return self.permute(order).scatter_to(dev).permute(back)

    def shard_(self: Tensor, devices: Sequence[str], axis: int | None = None) -> Tensor:
        """shard in place (tinygrad's): self becomes its shards, so the tensors a model holds (its parameters, the
        state_dict's values) are sharded where they are, without rebuilding the model. Returns self."""
        s = self.shard(devices, axis)
        self._uop, self._device = s.uop, s.device
        return self

    def broadcast(self: Tensor, devices: Sequence[str]) -> Tensor:
        """SPEC's broadcast: T.reshape(1, *s).expand(n, *s).copy(D).replicated(0), shape s on D, axis None."""
        dev = _devices(devices)
        s = self.shape
        x = self.uop.reshape((1, *s)).expand((len(dev), *s)).copy_to(dev).replicated((0,)).reshape(s)
        return self._on(x)

    def scatter_to(self: Tensor, devices: Sequence[str]) -> Tensor:
        """SPEC's scatter: T.copy(D), the same shape on D split along axis 0."""
        dev = _devices(devices)
        if not self.shape:
            raise ShardError("a 0-d tensor has no axis to scatter: reshape it to (1,) or broadcast it")
        return self._on(self.uop.copy_to(dev))

    def gather_to(self: Tensor, device: str | None = None) -> Tensor:
        """SPEC's gather: T.copy(D[0]) (or another device), the whole value on one device."""
        dev = _multi(self, "gather_to")
        return self._on(self.uop.copy_to(canonical_devices(device) if device is not None else dev[0]))

    def reduce_to(self: Tensor) -> Tensor:
        """SPEC's reduce: gather(T).reshape(n, s, ...).sum(0), the sum of the devices' shards on D[0]. Shards of
        uneven sizes (n not dividing the axis) are summed as if zero-padded to the longest, c = ceil(size/n)."""
        n, c = _split(self, "reduce_to")
        g = self.gather_to()
        g = g.pad([(0, n * c - self.shape[0])] + [None] * (self.ndim - 1))
        return g.reshape(n, c, *self.shape[1:]).sum(0)

    def allgather(self: Tensor) -> Tensor:
        """SPEC's allgather: T.reshape(1, *s).expand(n, *s).copy(D).replicated(0), the whole value on every
        device (axis None)."""
        return self.broadcast(_multi(self, "allgather"))

    def reduce_scatter(self: Tensor) -> Tensor:
        """SPEC's reduce_scatter of T (n*s,) on D (axis 0): T.reshape(n, n, s//n).permute(1, 0, 2).copy(D).sum(1)
        .reshape(s); device i holds chunk i of the sum of the shards, (s,) on D with axis 0. Where n does not
        divide s (or the shards: see reduce_to), each shard is zero-padded to n chunks of ceil(s/n) and the sum
        cut back to s, so device i holds the chunk a Copy would give it."""
        n, c = _split(self, "reduce_scatter")
        if self.ndim != 1:
            raise ShardError(f"reduce_scatter takes a 1-d tensor (SPEC's (n*s,) on D), got shape {self.shape}")
        t = -(-c // n)
        x = self.pad([(0, n * c - self.shape[0])]).reshape(n, c).pad([None, (0, n * t - c)])
        x = self._on(x.reshape(n, n, t).permute(1, 0, 2).uop.copy_to(self.device))
        return x.sum(1).reshape(n * t).shrink([(0, c)])

    def allreduce(self: Tensor) -> Tensor:
        """SPEC's allreduce: allgather(reduce_scatter(T)), the sum of the shards on every device."""
        return self.reduce_scatter().allgather()

    def _on(self: Tensor, u: UOp) -> Tensor:
        from uopviz.tensor.tensor import Tensor
        return Tensor(u)


def _devices(devices: Sequence[str]) -> Devices:
    dev = canonical_devices(tuple(devices) if not isinstance(devices, str) else devices)
    if not isinstance(dev, tuple):
        raise ShardError(f"shard and the collectives take a tuple of devices, got {devices!r}")
    return dev


def _multi(t: Tensor, what: str) -> Devices:
    if not isinstance(t.device, tuple):
        raise ShardError(f"{what} needs a tensor on several devices (shard it first), this one is on {t.device}")
    return t.device


def _split(t: Tensor, what: str) -> tuple[int, int]:
    """(n, c) for a tensor sharded along axis 0 (SPEC's (n*s,) on D with axis 0): c = ceil(size/n) elements
    per shard, the last ones shorter where n does not divide the size."""
    n = len(_multi(t, what))
    if t.axis != 0:
        raise ShardError(f"{what} takes a tensor sharded along axis 0 (SPEC's (n*s,) on D), got shape {t.shape} "
                         f"with shard axis {t.axis}")
    return n, -(-_dims(t.uop)[0] // n)
