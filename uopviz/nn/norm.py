"""Normalisation layers: BatchNorm (over the batch and spatial axes), LayerNorm (over the trailing axes), LayerNorm2d
(over the channels of (N, C, H, W)), GroupNorm (over channel groups), InstanceNorm (over each sample's channel) and
RMSNorm (by the root mean square of the trailing axes), each with a learned affine transform, as in PyTorch."""

from __future__ import annotations

import functools
import math

import numpy as np

from uopviz.dtype import dtypes
from uopviz.nn.layers import parameter
from uopviz.nn.module import Module
from uopviz.tensor import Tensor, assign_later
from uopviz.tensor.gradient import own_gradient
from uopviz.tensor.template import templated
from uopviz.tensor.util import Dim, int_dims, numel


class BatchNorm(Module):
    """Normalise each channel (axis 1) over the batch and any spatial axes: with the batch's statistics while
    training (then updating the running ones, with the unbiased variance, in place), with the running ones in
    eval. Works for (N, C), (N, C, L) and (N, C, H, W) inputs."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: str | None = None) -> None:
        self.eps, self.momentum, self.track_running_stats = eps, momentum, track_running_stats
        self.weight = parameter(Tensor.ones(num_features, device=device)) if affine else None
        self.bias = parameter(Tensor.zeros(num_features, device=device)) if affine else None
        if track_running_stats:
            self.running_mean = Tensor.zeros(num_features, device=device).contiguous().realize()
            self.running_var = Tensor.ones(num_features, device=device).contiguous().realize()

    def forward(self, x: Tensor) -> Tensor:
        axes = (0, *range(2, x.ndim))
        shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        if self.training or not self.track_running_stats:
            y, mean, var = _batch_normalized(x, axes, self.weight, self.bias, self.eps)
            if self.training and self.track_running_stats:
                dims = int_dims(x.shape, "BatchNorm's running statistics")
                n = math.prod(dims) // dims[1]
                m = self.momentum
                unbiased = var.reshape(-1).detach() * (n / max(n - 1, 1))
                assign_later([self.running_mean, self.running_var],  # with the step's realize: one forward
                           [self.running_mean * (1 - m) + mean.reshape(-1).detach() * m,
                            self.running_var * (1 - m) + unbiased * m])
            return y
        y = (x - self.running_mean.reshape(shape)) * (self.running_var.reshape(shape) + self.eps).rsqrt()
        return _affine(y, self.weight, self.bias, shape)


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None, shape: tuple[Dim, ...]) -> Tensor:
    if weight is None:
        return y
    assert bias is not None  # affine: weight and bias, or neither
    return y * weight.reshape(shape) + bias.reshape(shape)


def _statistics(x: Tensor, axes: tuple[int, ...], eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(mean, biased variance, 1/√(var + eps)) of x over axes, the axes kept."""
    mean = x.mean(axes, keepdim=True)
    var = (x - mean).square().mean(axes, keepdim=True)
    return mean, var, (var + eps).rsqrt()


def _batch_normalized(x: Tensor, axes: tuple[int, ...], weight: Tensor | None, bias: Tensor | None,
                      eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """(y, mean, var): x normalised by its own statistics over axes, then the affine transform; y is differentiated
    as a whole (_batch_norm_grads). Through its parts its gradient took 4 reductions a layer, each re-deriving the
    incoming gradient from its producers' inputs (up to 4 tensors read per element): the example ResNet's step
    moved 152 MB, 115 MB this way (bench/kernel_profile.py --model resnet)."""
    mean, var, rstd = _statistics(x, axes, eps)
    y = _affine((x - mean) * rstd, weight, bias, mean.shape)
    inputs = (x,) if weight is None or bias is None else (x, weight, bias)
    return own_gradient(y, inputs, functools.partial(_batch_norm_grads, axes=axes, eps=eps)), mean, var


def _batch_norm_grads(g: Tensor, xs: tuple[Tensor, ...], need: tuple[bool, ...], axes: tuple[int, ...],
                      eps: float) -> tuple[Tensor | None, ...]:
    """With x̂ = (x − mean)·rstd over n values a channel: dx = w·rstd·(g − Σg/n − x̂·Σ(g·x̂)/n), dw = Σ(g·x̂),
    db = Σg. Two reductions; g is stored first, as all three read it (else each re-derives it)."""
    x = xs[0]
    mean, _, rstd = _statistics(x, axes, eps)  # the forward's nodes again: nothing recomputed
    n = numel(x.shape[k] for k in axes)
    g = g.contiguous()
    xhat = (x - mean) * rstd
    sg, sgx = g.sum(axes, keepdim=True), (g * xhat).sum(axes, keepdim=True)
    scale = rstd if len(xs) == 1 else rstd * xs[1].reshape(mean.shape)
    dx = scale * (g - sg / n - xhat * (sgx / n)) if need[0] else None
    if len(xs) == 1:
        return (dx,)
    return dx, sgx.reshape(-1) if need[1] else None, sg.reshape(-1) if need[2] else None


BatchNorm1d = BatchNorm2d = BatchNorm


class LayerNorm(Module):
    """Normalise over the last len(normalized_shape) axes, then scale and shift elementwise."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True,
                 device: str | None = None) -> None:
        self.shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = parameter(Tensor.ones(self.shape, device=device)) if elementwise_affine else None
        self.bias = parameter(Tensor.zeros(self.shape, device=device)) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return _layer_norm(x, len(self.shape), self.eps, self.weight, self.bias)


@templated
def _layer_norm(x: Tensor, axes: int, eps: float, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    """x normalized over its last `axes` axes, then scaled and shifted: a function of the signatures (templated)."""
    y = x.layernorm(tuple(range(-axes, 0)), eps)
    return y if weight is None else y * weight + bias


class GroupNorm(Module):
    """Normalise each group of num_channels/num_groups channels over it and the spatial axes; per-channel affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: str | None = None) -> None:
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: {num_channels} channels do not split into {num_groups} groups")
        self.num_groups, self.eps = num_groups, eps
        self.weight = parameter(Tensor.ones(num_channels, device=device)) if affine else None
        self.bias = parameter(Tensor.zeros(num_channels, device=device)) if affine else None

    def forward(self, x: Tensor) -> Tensor:
        n, c = x.shape[:2]
        y = x.reshape(n, self.num_groups, -1).layernorm(-1, self.eps).reshape(x.shape)
        if self.weight is None:
            return y
        assert self.bias is not None  # affine: weight and bias, or neither
        shape = (1, c) + (1,) * (x.ndim - 2)
        return y * self.weight.reshape(shape) + self.bias.reshape(shape)


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channel axis of (N, C, H, W) inputs (tinygrad's and ConvNeXt's)."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class InstanceNorm(GroupNorm):
    """Normalise each channel of each sample over its spatial axes (GroupNorm with a group per channel), with a
    per-channel affine transform (tinygrad's InstanceNorm: affine by default)."""

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True, device: str | None = None) -> None:
        super().__init__(num_features, num_features, eps, affine, device)


class _TorchInstanceNorm(InstanceNorm):
    """torch.nn.InstanceNorm1d/2d/3d: without the affine transform unless asked for (running statistics are not
    kept: torch's track_running_stats=False)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
                 device: str | None = None) -> None:
        super().__init__(num_features, eps, affine, device)


InstanceNorm1d = InstanceNorm2d = InstanceNorm3d = _TorchInstanceNorm


class RMSNorm(Module):
    """x / √(mean(x²) + eps) over the last len(normalized_shape) axes, times a learned weight (torch.nn.RMSNorm;
    eps None is the machine epsilon of x's dtype, as there)."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float | None = None,
                 elementwise_affine: bool = True, device: str | None = None) -> None:
        self.shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = parameter(Tensor.ones(self.shape, device=device)) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        x = x if x.dtype.is_float else x.float()
        eps = self.eps if self.eps is not None else float(np.finfo(dtypes.to_numpy(x.dtype)).eps)
        y = x * x.square().mean(tuple(range(-len(self.shape), 0)), keepdim=True).add(eps).rsqrt()
        return y if self.weight is None else y * self.weight
