"""`Module`: a layer or model as a plain Python object whose Tensor attributes are its state.

A module's state is found by walking its attributes (Tensors, sub-modules, and lists, tuples and dicts of them),
in attribute order, under dotted names ("blocks.0.weight"), as PyTorch names them, so state dicts carry over.
Parameters are the state tensors that require gradients; buffers (BatchNorm's running statistics) are the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from uopviz.tensor import Tensor


class Module:
    """Base of the layers: call it to run `forward`; `training` switches Dropout and BatchNorm."""

    training: bool = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def named_tensors(self) -> Iterator[tuple[str, Tensor]]:
        """Every state tensor (parameters and buffers) with its dotted name."""
        yield from walk(vars(self), "")

    def state_dict(self) -> dict[str, Tensor]:
        return dict(self.named_tensors())

    def parameters(self) -> list[Tensor]:
        """The state tensors that require gradients (what an optimizer updates)."""
        return [t for _, t in self.named_tensors() if t.requires_grad]

    def modules(self) -> Iterator[Module]:
        """This module and every module under it."""
        yield self
        for v in vars(self).values():
            for m in _submodules(v):
                yield from m.modules()

    def train(self, mode: bool = True) -> Module:
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> Module:
        return self.train(False)

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> Module:
        """Copy each named array or Tensor into the tensor of that name, in place (assign), so optimizers and
        @jit captures that hold the tensors see the new values. With strict, names must match both ways."""
        from uopviz.nn.state import load_into
        load_into(self.state_dict(), state, strict)
        return self


def _submodules(v: Any) -> Iterator[Module]:
    if isinstance(v, Module):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _submodules(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _submodules(x)


def walk(v: Any, prefix: str) -> Iterator[tuple[str, Tensor]]:
    if isinstance(v, Tensor):
        yield prefix[:-1], v
    elif isinstance(v, Module):
        yield from walk(vars(v), prefix)
    elif isinstance(v, dict):
        for k, x in v.items():
            if isinstance(k, str) and not k.startswith("_"):
                yield from walk(x, f"{prefix}{k}.")
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            yield from walk(x, f"{prefix}{i}.")
