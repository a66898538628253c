"""Gradients of Tensors: `requires_grad`, `.grad`, `backward()` and `gradient(*targets)`.

The rules are in gradient.py; this holds what a user calls. `backward()` finds the tensors that require
gradients among those the output's graph reads (a weak registry: a Tensor is a UOp plus a device, and the graph
does not point back at Tensors), adds each one's gradient to its `.grad` and realizes them with the output, in
one schedule, so the forward and backward kernels are one trace. `gradient()` only builds the graphs.

A realized tensor is known to the graph by its buffer, so a gradient reaches it through any view of that buffer
(also as a @function's closed-over argument), and parameters updated in place (assign) keep their identity.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

from uopviz.realize import PURE, Recent, Structure, schedule_cache
from uopviz.tensor.gradient import GradientError, backprop
from uopviz.tensor.util import ShapeError, fmt
from uopviz.trace import origins
from uopviz.uop.ops import Ops, UOp, toposort

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

# id -> tensor, held weakly (a WeakSet would compare Tensors with their elementwise ==)
_requiring: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()
_reads: Recent[tuple[bool, ...]] = Recent()  # cut_from_gradients' answers by structure


def cut_from_gradients(tensors: list[Tensor], found: Structure | None = None) -> list[Tensor]:
    """The tensors (about to be realized) whose graphs read a tensor that requires gradients: realizing one replaces
    its graph by its buffer, so a gradient taken through it afterwards would silently be zeros (gradient) or find
    no leaf (backward); they are marked, and both refuse them by name instead. `found`: the structure of the
    realize of these tensors, where the caller has it: which of them read a leaf is a function of it and of which
    of its Buffers are leaves, so it is kept per both (`_reads`) and not walked again."""
    if not _requiring:
        return []
    leaves = {_key(t) for t in _requiring.values()}
    buffers_only = all(u.op is Ops.BUFFER for u in leaves)  # realized leaves: a node with no Buffer below reads none
    if found is None or not buffers_only:
        read = _reading(tensors, leaves, buffers_only)
    else:
        key = (found.key, tuple(i for i, b in enumerate(found.buffers) if b in leaves))
        if (kept := _reads.get(key)) is not None:
            read = kept
        else:
            read = _reading(tensors, leaves, buffers_only)
            _reads.put(key, read)
    return [t for t, r in zip(tensors, read, strict=True) if r and id(t) not in _requiring]


def _reading(tensors: list[Tensor], leaves: set[UOp], buffers_only: bool) -> tuple[bool, ...]:
    """Whether each tensor's graph reads any of leaves (buffers_only: they are all Buffers)."""
    reads: dict[UOp, bool] = {}  # one walk for all the tensors (a backward realizes the loss and every gradient)
    read = reads.__getitem__
    for root in (t.uop for t in tensors):
        if root in reads:
            continue
        stack = [(root, iter(root.src))]  # toposort's walk, each node decided as it is left
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in reads:
                    if buffers_only and s.__dict__.get(PURE):
                        reads[s] = False
                        continue
                    stack.append((s, iter(s.src)))
                    break
            else:
                stack.pop()
                reads[node] = node in leaves or any(map(read, node.src))
    return tuple(reads[t.uop] for t in tensors)


def _not_cut(t: Tensor) -> None:
    if getattr(t, "_cut", False):
        raise GradientError("this tensor was realized (numpy, item, tolist or realize) after it was computed from "
                            "tensors that require gradients, which ends its graph: take backward() or gradient() "
                            "first, then read it (loss.backward(); loss.item())")


def _key(t: Tensor) -> UOp:
    """The node a gradient arrives at: a realized tensor's buffer, else its graph."""
    u = t.uop
    return u.src[0] if u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER else u


class AutogradMixin:
    """requires_grad, grad, backward and gradient of Tensor."""

    __slots__ = ()

    @property
    def requires_grad(self: Tensor) -> bool:
        """Whether backward() computes this tensor's .grad (set it on the leaves you train)."""
        return getattr(self, "_requires_grad", False)

    @requires_grad.setter
    def requires_grad(self: Tensor, value: bool) -> None:
        if value and not self.dtype.is_float:
            raise GradientError(f"only float tensors can require gradients, this one is {self.dtype.name}")
        self._requires_grad = bool(value)
        if value:
            _requiring[id(self)] = self
        else:
            _requiring.pop(id(self), None)

    def requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self: Tensor) -> Tensor | None:
        """The gradient backward() accumulated into this tensor (None before the first)."""
        return getattr(self, "_grad", None)

    @grad.setter
    def grad(self: Tensor, value: Tensor | None) -> None:
        if value is not None and value.shape != self.shape:
            raise ShapeError(f"a grad of shape {fmt(value.shape)} does not fit a tensor of shape {fmt(self.shape)}")
        self._grad = value

    def gradient(self: Tensor, *targets: Tensor, gradient: Any = None) -> list[Tensor]:
        """d self / d target for each target, as lazy Tensors; nothing is mutated. self must be a scalar unless
        `gradient` (d loss / d self, self's shape) is given. A target self does not depend on gets zeros."""
        _not_cut(self)
        return self._gradient(targets, gradient, None)

    def _gradient(self: Tensor, targets: tuple[Tensor, ...], gradient: Any, order: list[UOp] | None) -> list[Tensor]:
        """gradient(), given the toposort of self's graph where the caller has it (backward: one walk, not two)."""
        seed = self._seed(gradient)
        for t in targets:
            if not t.dtype.is_float:
                raise GradientError(f"gradients are taken with respect to float tensors, not {t.dtype.name}")
        grads = backprop({self.uop: seed}, [_key(t) for t in targets], order)
        out = []
        for t in targets:
            g = grads.get(_key(t))
            out.append(t.zeros_like() if g is None else g.cast(t.dtype).reshape(t.shape))
        return out

    def _seed(self: Tensor, gradient: Any) -> Tensor:
        if not self.dtype.is_float:
            raise GradientError(f"only a float output can be differentiated, this one is {self.dtype.name}")
        if gradient is None:
            if self._size() != 1:
                raise GradientError(f"backward of a non-scalar output (shape {fmt(self.shape)}) needs `gradient`, "
                                    "the gradient of the loss with respect to it; or reduce it to a scalar first")
            return self.ones_like()
        g = self._coerce(gradient)
        if g.shape != self.shape:
            raise ShapeError(f"gradient of shape {fmt(g.shape)} does not fit the output's shape {fmt(self.shape)}")
        return g.cast(self.dtype)

    def backward(self: Tensor, gradient: Any = None) -> Tensor:
        """Add d self / d t to t.grad for every tensor t with requires_grad that self depends on, and realize the
        gradients together with self. Returns self. A backward of the structure of an earlier one runs that one's
        schedule on this one's buffers without building the gradients' graphs (`_Plan`)."""
        _not_cut(self)
        plan = _Plan.of(self) if gradient is None else None
        if plan is not None and plan.replay(self):
            return self
        order = toposort([self.uop])
        nodes = set(order)
        leaves = [t for t in list(_requiring.values()) if _key(t) in nodes]
        if not leaves:
            raise GradientError("backward: no tensor this output depends on requires a gradient "
                                "(set requires_grad=True on the parameters)")
        grads = self._gradient(tuple(leaves), gradient, order)
        roots = [self]
        for t, g in zip(leaves, grads):
            t.grad = total = g if t.grad is None else t.grad.add(g)
            roots.append(total)
        found = plan.realized(roots) if plan is not None and _same(plan.leaves, leaves) else None
        self.realize(*roots[1:])
        if found is not None and plan is not None:
            plan.keep(found, roots)
        return self


def _same(a: list[Tensor], b: list[Tensor]) -> bool:
    """Whether two lists hold the same tensors in the same order (== on Tensors compares their elements)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class _Replay(NamedTuple):
    """How a backward ran: the structure key of its realize (the loss and the leaves' gradients), each of that
    realize's Buffers as a number into the plan's sources, its node count, and which of the roots it cut."""

    key: tuple[Any, ...]
    buffers: tuple[int, ...]
    nodes: int
    cut: tuple[bool, ...]


_replays: Recent[_Replay] = Recent()  # a backward's _Plan.key -> how it ran


class _Plan:
    """A backward's structure, found without building its gradients: the structure of the loss's graph (ops,
    shapes, dtypes, devices, which reads are of one buffer: the schedule cache's key), which of its Buffers are the
    leaves that require gradients, in the order backward takes them, with their shapes and dtypes, and each leaf's
    gradient so far (none, or a realized one: its buffer's description and which other buffer it is). Gradients
    are a function of that (the rules read ops, args and shapes, never buffers' contents), so two backwards of one
    plan key differ only in their buffers and bound values: a kept _Replay runs the first one's schedule on the
    second's (the loss's Buffers, then the gradients' own, as `sources`).

    Assigns pending from assign_later (BatchNorm's running statistics) are part of it: backward's realize computes
    their values with the loss and gradients (_assign_now), so the plan's structure is of the values and the loss,
    with each target's buffer among the sources, and a replay writes the values it ran into the targets as
    _assign_now does.

    Only the plain case is planned (else backward builds as it always does): backward() with no output gradient,
    one device, every tensor that requires gradients realized, no trace recording or origins noting, no function
    trace, and a schedule cache that is on."""

    __slots__ = ("device", "key", "leaves", "pending", "sources", "values")

    def __init__(self, key: tuple[Any, ...], leaves: list[Tensor], sources: list[UOp], values: dict[str, int],
                 device: str, pending: list[tuple[Tensor, Tensor]]) -> None:
        self.key, self.leaves, self.sources, self.values, self.device = key, leaves, sources, values, device
        self.pending = pending

    @staticmethod
    def of(loss: Tensor) -> _Plan | None:
        from uopviz.tensor.function import tracing
        from uopviz.tensor.multi import needs_lowering
        from uopviz.tensor.tensor import _later
        device = loss._device
        pending = list(_later)
        if not isinstance(device, str) or tracing() is not None or origins.active() or \
                needs_lowering([loss._uop]) or any(t._device != device or v._device != device for t, v in pending):
            return None
        found = schedule_cache.structure_of([*(v._uop for _, v in pending), loss._uop], {}, device)
        if found is None:
            return None
        number = {b: i for i, b in enumerate(found.buffers)}
        sources = list(found.buffers)
        grads: dict[UOp, int] = {}  # a gradient's or a target's buffer -> its number in sources
        targets = []
        for t, _ in pending:  # realized: assign_later assigns at once to any other
            b = t._uop.src[0]
            if (j := grads.get(b, number.get(b))) is None:
                grads[b] = j = len(sources)
                sources.append(b)
            targets.append((j, t._uop.shape, b.arg.size, b.arg.dtype, b.arg.addrspace))
        leaves, parts = [], []
        for t in list(_requiring.values()):
            u = t._uop
            if u.op is not Ops.RESHAPE or u.src[0].op is not Ops.BUFFER:
                return None  # a tensor not realized may be a node of the graph: backward finds it by walking it
            k = number.get(u.src[0])
            if k is None:
                continue
            if t._device != device:
                return None
            g, part = t.grad, None
            if g is not None:
                gu = g._uop
                if gu.op is not Ops.RESHAPE or gu.src[0].op is not Ops.BUFFER or g._device != device:
                    return None
                b = gu.src[0]
                if (j := grads.get(b, number.get(b))) is None:
                    grads[b] = j = len(sources)
                    sources.append(b)
                part = (j, gu.shape, b.arg.size, b.arg.dtype, b.arg.device, b.arg.addrspace)
            leaves.append(t)
            parts.append((k, u.shape, u.dtype, part))
        if not leaves:
            return None
        return _Plan((found.key, tuple(parts), tuple(targets)), leaves, sources, found.values, device, pending)

    def replay(self, loss: Tensor) -> bool:
        """Run the schedule kept for this plan's key, set the loss's buffer and the leaves' gradients; False where
        none is kept or the schedule cache no longer keeps its schedule (nothing done)."""
        kept = _replays.get(self.key)
        if kept is None:
            return False
        src = self.sources
        ran = schedule_cache.run(Structure(kept.key, [src[i] for i in kept.buffers], self.values, kept.nodes))
        written = [b for b in ran if b is not None] if ran is not None else []
        if ran is None or len(written) != len(ran):  # a root of size 0 has no buffer: build it as before
            return False
        values = [v for _, v in self.pending]
        for v, b in zip(values, written, strict=False):
            v._uop = b.reshape(v.shape)
        n = len(values)
        loss._uop = written[n].reshape(loss.shape)
        roots = [*values, loss]
        for t, b in zip(self.leaves, written[n + 1:], strict=True):
            t.grad = g = t._new(b.reshape(t.shape))
            roots.append(g)
        for r, cut in zip(roots, kept.cut, strict=True):
            if cut:
                r._cut = True
        if self.pending:  # what _assign_now does after its realize
            from uopviz.tensor.tensor import _later, assign_all
            _later.clear()
            assign_all([t for t, _ in self.pending], values)
        return True

    def realized(self, roots: list[Tensor]) -> Structure | None:
        """The structure of the realize backward is about to run on roots (the loss and the gradients) and the
        pending assigns' values (_assign_now realizes them with the roots, unless a root reads a target), where it
        is one realize of all of them on this device: what a replay runs."""
        from uopviz.realize import reads_any
        from uopviz.tensor.tensor import _later
        if len(_later) != len(self.pending) or any(a is not b for a, b in zip(_later, self.pending)):
            return None
        every = [*(v for _, v in self.pending), *roots]
        if any(r.is_realized or r._device != self.device or r._size() == 0 for r in every):
            return None
        if self.pending and reads_any([r._uop for r in roots], {t._uop.src[0] for t, _ in self.pending}):
            return None  # _assign_now realizes the values first, then the roots: two realizes
        found = schedule_cache.structure_of([r._uop for r in every], {}, self.device)
        number = {b: i for i, b in enumerate(self.sources)}
        if found is None or found.values != self.values or any(b not in number for b in found.buffers):
            return None
        return found

    def keep(self, found: Structure, roots: list[Tensor]) -> None:
        """Note how the backward of this plan ran: its realize's structure (`realized`) and the roots it cut."""
        number = {b: i for i, b in enumerate(self.sources)}
        every = [*(v for _, v in self.pending), *roots]
        _replays.put(self.key, _Replay(found.key, tuple(number[b] for b in found.buffers), found.nodes,
                                       tuple(getattr(r, "_cut", False) for r in every)))
