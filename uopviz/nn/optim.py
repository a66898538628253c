"""Optimizers: SGD (momentum, Nesterov, weight decay), Adam and AdamW.

A step computes every parameter's and every state tensor's new value from the gradients and writes them all in
place with one `assign_all` (one schedule per device), so the parameters stay the same buffers: models, @jit
captures and state dicts that hold them see the update. The learning rate and Adam's bias-correction powers are
tensors on the device, not Python numbers baked into the kernels, so a @jit-captured step replays correctly and
`opt.lr.assign(0.01)` changes the rate between steps.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np

from uopviz.dtype import DType
from uopviz.tensor import Tensor, assign_all


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
        targets, values = self._updates([(k, p) for k, p in enumerate(self.params) if p.grad is not None])
        assign_all(targets, values)

    @abstractmethod
    def _updates(self, live: list[tuple[int, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        """The tensors to write and their new values, for the parameters (index, tensor) that have gradients."""


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

    def _updates(self, live: list[tuple[int, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        targets, values = [], []
        for k, p in live:
            g = p.grad.add(p.mul(self.weight_decay)) if self.weight_decay else p.grad
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

    def _updates(self, live: list[tuple[int, Tensor]]) -> tuple[list[Tensor], list[Tensor]]:
        b1_t, b2_t = self.b1_t.mul(self.b1), self.b2_t.mul(self.b2)
        targets, values = [self.b1_t, self.b2_t], [b1_t, b2_t]
        corrections = b1_t.sub(1, reverse=True), b2_t.sub(1, reverse=True), self.lr
        scalars: dict[DType, list[Tensor]] = {}  # cast once per dtype, not once per parameter
        for k, p in live:
            g = p.grad
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
