"""Optimizers: SGD (momentum, Nesterov, weight decay), Adam, AdamW, LAMB and Muon.

A step computes every parameter's and every state tensor's new value from the gradients and writes them all in
place with one `assign_all` (one schedule per device), so the parameters stay the same buffers: models, @jit
captures and state dicts that hold them see the update. The learning rate and Adam's bias-correction powers are
tensors on the device, not Python numbers baked into the kernels, so a @jit-captured step replays correctly and
`opt.lr.assign(0.01)` changes the rate between steps.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import numpy as np

from uopviz.dtype import DType
from uopviz.realize import Recent, Structure, assign, schedule_cache
from uopviz.tensor import Tensor, assign_all
from uopviz.tensor.function import tracing
from uopviz.tensor.tensor import _later
from uopviz.tensor.util import concrete
from uopviz.uop.ops import Ops, UOp
from uopviz.uop.pattern import recording

_steps: Recent[tuple[tuple[Any, ...], tuple[int, ...], int]] = Recent()
"""A step's plan key (Optimizer._plan) -> how it ran: its assign's structure key, each of that realize's Buffers as a
number into the plan's sources, and its node count."""


class Optimizer(ABC):
    """Holds the parameters (each made to require gradients) and the learning rate; `step()` updates the
    parameters that have a gradient, `zero_grad()` clears the gradients."""

    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        self.params = list(dict.fromkeys(params))
        if not self.params:
            raise ValueError("an optimizer needs at least one parameter")
        for p in self.params:
            p.requires_grad = True
        self.lr = self._scalar(lr)

    def _scalar(self, v: float) -> Tensor:
        """A realized 0-d float32 tensor on the parameters' device."""
        return Tensor(np.asarray(v, dtype=np.float32), device=self.params[0].device)

    def _state(self) -> list[Tensor]:
        """A zero tensor per parameter, realized (the optimizer's per-parameter state)."""
        return [Tensor.zeros(p.shape, dtype=p.dtype, device=p.device).contiguous().realize() for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Update the parameters that have gradients. A step of the structure of an earlier one (`_plan`) runs that
        one's schedule on this one's buffers, without building the update's graph."""
        live = [(k, p, p.grad) for k, p in enumerate(self.params) if p.grad is not None]
        plan = self._plan(live)
        if plan is not None and (kept := _steps.get(plan[0])) is not None:
            key, refs, nodes = kept
            if schedule_cache.run(Structure(key, [plan[1][i] for i in refs], {}, nodes)) is not None:
                return
        targets, values = self._updates(live)
        device = self.params[0].device
        if plan is None or not all(
                v.device == device and v.shape == t.shape and v.dtype == t.dtype and v.uop is not t.uop
                for t, v in zip(targets, values, strict=True)):
            assign_all(targets, values)
            return
        # assign_all of realized targets on one device, values of their shapes and dtypes and nothing pending is
        # this one assign (the plan found every target realized and on the device)
        found = assign([t.uop for t in targets], [v.uop for v in values])
        number = {b: i for i, b in enumerate(plan[1])}
        if found is not None and not found.values and all(b in number for b in found.buffers):
            _steps.put(plan[0], (found.key, tuple(number[b] for b in found.buffers), found.nodes))

    def _plan(self, live: list[tuple[int, Tensor, Tensor]]) -> tuple[tuple[Any, ...], list[UOp]] | None:
        """A step's structure, found without building its graph: the optimizer's class (its update rule), its
        settings (every attribute that is a Python value, spelled exactly: -0.0 is not 0.0), which parameters have
        gradients, and every tensor it reads (its attributes' tensors, then the gradients) as its shape and its
        buffer's description, or the number of the tensor whose buffer it shares; with those buffers (`sources`).
        The update's graph is a function of that, so a kept step's schedule (`_steps`) runs on another step's
        sources. None (built as always) for a class defined elsewhere (its rule may read anything), an attribute of
        another kind, a tensor not realized, on another device or of size 0, a pending assign_later, a trace
        recording, a function trace or a schedule cache that is off."""
        if type(self).__module__ != __name__ or _later or recording() or tracing() is not None or \
                not schedule_cache.enabled:
            return None
        device = self.params[0].device
        if not isinstance(device, str):
            return None
        parts: list[Any] = [type(self), tuple(k for k, _, _ in live)]
        tensors: list[Tensor] = []
        for name, value in vars(self).items():
            if isinstance(value, Tensor):
                tensors.append(value)
            elif isinstance(value, list) and all(isinstance(t, Tensor) for t in value):
                tensors += value
                parts.append((name, len(value)))
            elif value is None or isinstance(value, (bool, int, float, str)) or (
                    isinstance(value, tuple) and all(isinstance(x, (bool, int, float, str)) for x in value)):
                parts.append((name, repr(value)))
            else:
                return None
        tensors += [g for _, _, g in live]
        number: dict[UOp, int] = {}
        sources: list[UOp] = []
        for t in tensors:
            u = t.uop
            if u.op is not Ops.RESHAPE or u.src[0].op is not Ops.BUFFER or t.device != device or not t._size():
                return None
            b = u.src[0]
            if (k := number.get(b)) is None:
                number[b] = k = len(sources)
                sources.append(b)
                a = b.arg
                parts.append((u.shape, a.size, a.dtype, a.device, a.addrspace))
            else:
                parts.append((u.shape, k))
        return tuple(parts), sources

    @abstractmethod
    def _updates(self, live: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        """The tensors to write and their new values, for the parameters (index, tensor, gradient) that have
        gradients."""


class SGD(Optimizer):
    """p ← p − lr·d, with g = grad + weight_decay·p and, with momentum μ, the buffer b ← μ·b + g and d = b (or
    g + μ·b with Nesterov); d = g without momentum. PyTorch's update."""

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        super().__init__(params, lr)
        if nesterov and momentum <= 0:
            raise ValueError("Nesterov momentum needs momentum > 0")
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov
        self.buffers = self._state() if momentum else []

    def _updates(self, live: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        targets, values = [], []
        for k, p, g in live:
            if self.weight_decay:
                g = g.add(p.mul(self.weight_decay))
            if self.momentum:
                b = self.buffers[k].mul(self.momentum).add(g)
                targets.append(self.buffers[k])
                values.append(b)
                g = g.add(b.mul(self.momentum)) if self.nesterov else b
            targets.append(p)
            values.append(p.sub(g.mul(self.lr.cast(p.dtype))))
        return targets, values


class Adam(Optimizer):
    """Adam: m ← β1·m + (1−β1)·g, v ← β2·v + (1−β2)·g², p ← p − lr·m̂ / (√v̂ + ε) with the bias-corrected m̂, v̂.
    weight_decay adds weight_decay·p to g (L2, as torch.optim.Adam); AdamW decouples it."""

    decoupled = False

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        self.b1, self.b2 = betas
        self.eps, self.weight_decay = eps, weight_decay
        self.m, self.v = self._state(), self._state()
        self.b1_t, self.b2_t = self._scalar(1.0), self._scalar(1.0)  # β1^t and β2^t after t steps

    def _updates(self, live: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        b1_t, b2_t = self.b1_t.mul(self.b1), self.b2_t.mul(self.b2)
        targets, values = [self.b1_t, self.b2_t], [b1_t, b2_t]
        corrections = b1_t.sub(1, reverse=True), b2_t.sub(1, reverse=True), self.lr
        scalars: dict[DType, list[Tensor]] = {}  # cast once per dtype, not once per parameter
        for k, p, g in live:
            if self.weight_decay and not self.decoupled:
                g = g.add(p.mul(self.weight_decay))
            if p.dtype not in scalars:
                scalars[p.dtype] = [t.cast(p.dtype) for t in corrections]
            c1, c2, lr = scalars[p.dtype]
            m = self.m[k].mul(self.b1).add(g.mul(1 - self.b1))
            v = self.v[k].mul(self.b2).add(g.square().mul(1 - self.b2))
            mhat, vhat = m.div(c1), v.div(c2)
            d = mhat.div(vhat.sqrt().add(self.eps))
            if self.weight_decay and self.decoupled:
                d = d.add(p.mul(self.weight_decay))
            targets += [self.m[k], self.v[k], p]
            values += [m, v, p.sub(d.mul(lr))]
        return targets, values


class AdamW(Adam):
    """Adam with decoupled weight decay: p ← p − lr·(m̂ / (√v̂ + ε) + weight_decay·p) (torch.optim.AdamW)."""

    decoupled = True

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


class LAMB(Adam):
    """LAMB (tinygrad's; torch has none): Adam's step u = m̂ / (√v̂ + ε) + weight_decay·p scaled per parameter by
    the trust ratio ‖p‖ / ‖u‖ (1 where either norm is 0); adam=True leaves the ratio out."""

    def __init__(self, params: Iterable[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-6, weight_decay: float = 0.0, adam: bool = False) -> None:
        super().__init__(params, lr, (b1, b2), eps, weight_decay)
        self.adam = adam

    def _updates(self, live: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        b1_t, b2_t = self.b1_t.mul(self.b1), self.b2_t.mul(self.b2)
        targets, values = [self.b1_t, self.b2_t], [b1_t, b2_t]
        for k, p, g in live:
            c1, c2, lr = (t.cast(p.dtype) for t in (b1_t.sub(1, reverse=True), b2_t.sub(1, reverse=True), self.lr))
            m = self.m[k].mul(self.b1).add(g.mul(1 - self.b1))
            v = self.v[k].mul(self.b2).add(g.square().mul(1 - self.b2))
            up = m.div(c1).div(v.div(c2).sqrt().add(self.eps)).add(p.mul(self.weight_decay))
            if not self.adam:
                r1, r2 = p.square().sum().sqrt(), up.square().sum().sqrt()
                up = up.mul(r1.gt(0).bitwise_and(r2.gt(0)).where(r1.div(r2), 1.0))
            targets += [self.m[k], self.v[k], p]
            values += [m, v, p.sub(up.mul(lr))]
        return targets, values


class Muon(Optimizer):
    """Muon (torch.optim.Muon's update) for 2-D parameters: b ← μ·b + (1−μ)·g, the step g + μ·(b − g) with
    Nesterov (else b) orthogonalised by ns_steps Newton–Schulz iterations X ← aX + (bA + cA²)X, A = XXᵀ, from
    X = step/‖step‖ (the wide orientation), then p ← p·(1 − lr·weight_decay) − lr·√max(1, rows/cols)·X. The
    iterations run in the parameter's dtype (torch's in bfloat16)."""

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple[float, float, float] = (3.4445, -4.775, 2.0315),
                 eps: float = 1e-7, ns_steps: int = 5) -> None:
        super().__init__(params, lr)
        if any(p.ndim != 2 for p in self.params):
            raise ValueError("Muon updates 2-D parameters (matrices) only; give the others to another optimizer")
        self.weight_decay, self.momentum, self.nesterov = weight_decay, momentum, nesterov
        self.ns_coefficients, self.eps, self.ns_steps = ns_coefficients, eps, ns_steps
        self.buffers = self._state()

    def _orthogonal(self, g: Tensor) -> Tensor:
        a, b, c = self.ns_coefficients
        tall = g.shape[0] > g.shape[1]
        x = g.T if tall else g
        x = x.div(x.square().sum().sqrt().maximum(self.eps))
        for _ in range(self.ns_steps):
            gram = x.matmul(x.T)
            x = x.mul(a).add(gram.mul(b).add(gram.matmul(gram).mul(c)).matmul(x))
        return x.T if tall else x

    def _updates(self, live: list[tuple[int, Tensor, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        targets, values = [], []
        for k, p, g in live:
            buf = self.buffers[k].mul(self.momentum).add(g.mul(1 - self.momentum))
            step = g.add(buf.sub(g).mul(self.momentum)) if self.nesterov else buf
            lr = self.lr.cast(p.dtype)
            rows, cols = concrete(p.shape)
            scale = max(1.0, rows / cols) ** 0.5
            new = p.mul(lr.mul(self.weight_decay).sub(1, reverse=True)).sub(self._orthogonal(step).mul(lr.mul(scale)))
            targets += [self.buffers[k], p]
            values += [buf, new]
        return targets, values
