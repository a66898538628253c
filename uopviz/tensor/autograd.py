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
from typing import TYPE_CHECKING, Any

from uopviz.realize import PURE
from uopviz.tensor.gradient import GradientError, backprop
from uopviz.tensor.util import ShapeError, fmt
from uopviz.uop.ops import Ops, UOp, toposort

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

# id -> tensor, held weakly (a WeakSet would compare Tensors with their elementwise ==)
_requiring: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


def cut_from_gradients(tensors: list[Tensor]) -> list[Tensor]:
    """The tensors (about to be realized) whose graphs read a tensor that requires gradients: realizing one replaces
    its graph by its buffer, so a gradient taken through it afterwards would silently be zeros (gradient) or find
    no leaf (backward); they are marked, and both refuse them by name instead."""
    if not _requiring:
        return []
    leaves = {_key(t) for t in _requiring.values()}
    buffers_only = all(u.op is Ops.BUFFER for u in leaves)  # realized leaves: a node with no Buffer below reads none
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
    return [t for t in tensors if id(t) not in _requiring and reads[t.uop]]


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
        gradients together with self. Returns self."""
        _not_cut(self)
        order = toposort([self.uop])
        nodes = set(order)
        leaves = [t for t in list(_requiring.values()) if _key(t) in nodes]
        if not leaves:
            raise GradientError("backward: no tensor this output depends on requires a gradient "
                                "(set requires_grad=True on the parameters)")
        grads = self._gradient(tuple(leaves), gradient, order)
        for t, g in zip(leaves, grads):
            t.grad = g if t.grad is None else t.grad.add(g)
        self.realize(*(t.grad for t in leaves))
        return self
