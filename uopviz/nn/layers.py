"""The usual layers: Linear, Conv1d/2d/3d, ConvTranspose1d/2d/3d, Embedding, Dropout, a ModuleList to hold layers
and a Sequential to chain them.

Weights start as PyTorch's defaults do (kaiming_uniform with a = √5: uniform in ±1/√fan_in, the bias too), and
are realized at construction, so each parameter is a buffer of its own that optimizers update in place.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from uopviz.nn.module import Module
from uopviz.tensor import Tensor
from uopviz.tensor.nn import conv_padding
from uopviz.tensor.template import templated


def parameter(t: Tensor) -> Tensor:
    """t realized into a buffer of its own, requiring gradients."""
    return t.contiguous().realize().requires_grad_()


def fan_in_uniform(shape: tuple[int, ...], fan_in: int, device: str | None) -> Tensor:
    """A parameter uniform in ±1/√fan_in: PyTorch's default for layers' weights and biases (kaiming_uniform, a = √5)."""
    bound = 1 / math.sqrt(max(fan_in, 1))
    return parameter(Tensor.uniform(shape, low=-bound, high=bound, device=device))


class Linear(Module):
    """y = x·Wᵀ + b, W of shape (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: str | None = None) -> None:
        self.weight = fan_in_uniform((out_features, in_features), in_features, device)
        self.bias = fan_in_uniform((out_features,), in_features, device) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return _linear(x, self.weight, self.bias)


@templated
def _linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """x·weightᵀ + bias: a function of the signatures (templated)."""
    return x.linear(weight.T, bias)


def _with_dims(base: type, nd: int) -> Any:
    """base for nd spatial axes, named as torch names it (Conv1d, ConvTranspose2d, ...)."""
    name = f"{base.__name__.lstrip('_')}{nd}d"
    return type(name, (base,), {"nd": nd, "__module__": __name__, "__doc__": f"{base.__doc__} Here nd = {nd}."})


def _kernel(kernel_size: int | tuple[int, ...], nd: int) -> tuple[int, ...]:
    return (kernel_size,) * nd if isinstance(kernel_size, int) else tuple(kernel_size)


class _Conv(Module):
    """Convolution of (N, C, *spatial) inputs over `nd` spatial axes; weight (out_channels, in_channels/groups,
    *kernel)."""

    nd = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 device: str | None = None) -> None:
        k = _kernel(kernel_size, self.nd)
        conv_padding(padding, k, _kernel(stride, self.nd), _kernel(dilation, self.nd))  # a bad string fails here
        fan_in = in_channels // groups * math.prod(k)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = fan_in_uniform((out_channels, in_channels // groups, *k), fan_in, device)
        self.bias = fan_in_uniform((out_channels,), fan_in, device) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return x.conv(self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


Conv1d, Conv2d, Conv3d = (_with_dims(_Conv, n) for n in (1, 2, 3))


class _ConvTranspose(Module):
    """The gradient of a convolution with respect to its input, as a layer, over `nd` spatial axes; weight
    (in_channels, out_channels/groups, *kernel)."""

    nd = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...], stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 device: str | None = None) -> None:
        k = _kernel(kernel_size, self.nd)
        fan_in = out_channels // groups * math.prod(k)
        self.stride, self.padding, self.output_padding = stride, padding, output_padding
        self.dilation, self.groups = dilation, groups
        self.weight = fan_in_uniform((in_channels, out_channels // groups, *k), fan_in, device)
        self.bias = fan_in_uniform((out_channels,), fan_in, device) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return x.conv_transpose(self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                self.dilation, self.groups)


ConvTranspose1d, ConvTranspose2d, ConvTranspose3d = (_with_dims(_ConvTranspose, n) for n in (1, 2, 3))


class Embedding(Module):
    """Rows of a (num_embeddings, embedding_dim) table, N(0, 1) at the start, picked by integer indices."""

    def __init__(self, num_embeddings: int, embedding_dim: int, device: str | None = None) -> None:
        self.weight = parameter(Tensor.randn(num_embeddings, embedding_dim, device=device))

    def forward(self, idx: Tensor) -> Tensor:
        """The rows of the table at idx (negative indices wrap, others out of range read zeros, as indexing)."""
        return _rows(self.weight, idx) if isinstance(idx, Tensor) else self.weight[idx]


@templated
def _rows(table: Tensor, idx: Tensor) -> Tensor:
    """table[idx] for an index Tensor: a function of the signatures of both (templated)."""
    return table[idx]


class Dropout(Module):
    """Zero each element with probability p while training (the rest scaled by 1/(1 − p)); identity in eval."""

    def __init__(self, p: float = 0.5) -> None:
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return x.dropout(self.p) if self.training else x


class ModuleList(Module):
    """Layers (or any callables) held as attributes "0", "1", … as torch.nn.ModuleList holds them, so their state
    is named "0.weight", "1.bias", … and a state dict moves between the two as it is."""

    def __init__(self, modules: Iterable[Any] = ()) -> None:
        self._count = 0
        self.extend(modules)

    def append(self, module: Any) -> ModuleList:
        setattr(self, str(self._count), module)
        self._count += 1
        return self

    def extend(self, modules: Iterable[Any]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> Any:
        return getattr(self, str(range(self._count)[i]))

    def __iter__(self) -> Iterator[Any]:
        return (getattr(self, str(i)) for i in range(self._count))


class Sequential(ModuleList):
    """Layers (or any callables) applied in order, named as in torch.nn.Sequential ("0.weight", …)."""

    def __init__(self, *layers: Any) -> None:
        super().__init__(layers)

    def forward(self, x: Tensor) -> Tensor:
        for f in self:
            x = f(x)
        return x
