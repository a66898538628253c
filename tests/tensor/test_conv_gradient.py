"""Convolution's gradients (its own rule: a transposed convolution for the input, a correlation for the weight)
against torch in float64 on every device, over strides, paddings, dilations, groups and odd sizes; the rule
through conv_transpose, a second derivative and a @function body; and `own_gradient`, the hook the rule uses."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_peer import same_as_torch

import uopviz
from uopviz import Tensor
from uopviz.tensor.gradient import own_gradient

CONVS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}

# (input shape, weight shape, stride, padding, dilation, groups, bias)
CASES: list[tuple[Any, ...]] = [
    ((2, 3, 9, 11), (5, 3, 3, 3), 1, 1, 1, 1, True),             # a ResNet's 3x3
    ((2, 4, 9, 10), (6, 4, 3, 3), 2, 1, 1, 1, False),            # stride 2: a row of the padded input unread
    ((1, 4, 8, 7), (6, 2, 3, 2), 2, 1, 1, 2, True),              # groups, a non-square kernel
    ((2, 4, 7, 9), (4, 4, 1, 1), 2, 0, 1, 1, False),             # a ResNet's 1x1 downsample
    ((1, 3, 11, 10), (2, 3, 3, 3), 3, 2, 2, 1, True),            # stride 3 with dilation 2
    ((2, 2, 6, 9), (3, 2, 2, 3), (2, 1), ((1, 0), (2, 1)), (1, 2), 1, False),  # per-axis, asymmetric padding
    ((1, 6, 7, 7), (6, 1, 3, 3), 1, "same", 1, 6, True),         # depthwise, "same"
    ((2, 3, 13), (4, 3, 4), 3, 1, 1, 1, True),                   # conv1d
    ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), (1, 2, 2), 1, 1, 1, False),  # conv3d
]


def _torch_padding(padding: Any) -> tuple[Any, tuple[int, ...]]:
    """torch's padding argument, and the (before, after) pairs F.pad takes where torch has no such argument."""
    if isinstance(padding, (str, int)):
        return padding, ()
    return 0, tuple(v for b, a in reversed(padding) for v in (b, a))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{len(c[0]) - 2}d-s{c[2]}-p{c[3]}-d{c[4]}-g{c[5]}")
def test_conv_gradients_match_torch(case: tuple[Any, ...], device: str) -> None:
    xs, ws, stride, padding, dilation, groups, bias = case
    rng = np.random.default_rng(len(xs) + ws[0])
    arrays = [rng.standard_normal(xs), rng.standard_normal(ws)] + ([rng.standard_normal(ws[0])] if bias else [])
    nd = len(ws) - 2
    tpad, pre = _torch_padding(padding)

    def ours(x: Tensor, w: Tensor, *b: Tensor) -> Tensor:
        return x.conv(w, b[0] if b else None, stride, padding, dilation, groups)

    def theirs(x: torch.Tensor, w: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        return CONVS[nd](F.pad(x, pre) if pre else x, w, b[0] if b else None, stride, tpad, dilation, groups)

    same_as_torch(ours, theirs, arrays, device, rtol=1e-9)


TRANSPOSES = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}

# (input shape, weight shape, stride, padding, output_padding, dilation, groups): strided ones run phase by phase
TRANSPOSE_CASES: list[tuple[Any, ...]] = [
    ((2, 4, 5, 6), (4, 3, 3, 3), 1, 0, 0, 1, 1),
    ((2, 4, 5, 6), (4, 3, 3, 3), 2, 1, 1, 1, 1),
    ((1, 4, 5, 4), (4, 2, 3, 2), 3, 2, 0, 1, 2),             # groups; a phase no tap reaches
    ((1, 2, 4, 5), (2, 3, 3, 3), 2, 1, 1, 2, 1),             # gcd(stride, dilation) 2: odd phases are zeros
    ((1, 2, 4, 5), (2, 3, 3, 2), (3, 2), (4, 1), (1, 0), (2, 3), 1),  # padding that cuts whole phases off
    ((2, 3, 7), (3, 2, 4), 3, 1, 2, 1, 1),                   # 1-D
    ((2, 3, 1), (3, 2, 2), 2, 1, 1, 1, 1),                   # a phase whose every row the padding cuts off
    ((1, 2, 3, 2, 3), (2, 2, 2, 3, 2), 2, (0, 1, 1), 1, 1, 1),  # 3-D
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=lambda c: f"{len(c[0]) - 2}d-s{c[2]}-p{c[3]}-o{c[4]}-d{c[5]}")
def test_conv_transpose_matches_torch(case: tuple[Any, ...], device: str) -> None:
    """conv_transpose (a strided one as stride-1 ones per phase, each a conv whose own rule gives its gradients)."""
    xs, ws, stride, padding, output_padding, dilation, groups = case
    rng = np.random.default_rng(len(xs) + ws[1])
    arrays = [rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[1] * groups)]
    same_as_torch(lambda x, w, b: x.conv_transpose(w, b, stride, padding, output_padding, dilation, groups),
                  lambda x, w, b: TRANSPOSES[len(xs) - 2](x, w, b, stride, padding, output_padding, groups, dilation),
                  arrays, device, rtol=1e-9)


def test_second_derivative_matches_torch(device: str) -> None:
    """The rule's gradients are convolutions again, so they differentiate (gradient penalties, double backward)."""
    rng = np.random.default_rng(7)
    x, w, r = rng.standard_normal((2, 3, 7, 8)), rng.standard_normal((4, 3, 3, 3)), rng.standard_normal((2, 4, 4, 4))
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    (tgx,) = torch.autograd.grad((F.conv2d(tx, tw, stride=2, padding=1) * torch.tensor(r)).sum(), tx,
                                 create_graph=True)
    (tgx.square().sum()).backward()
    ux, uw = (Tensor(a, device=device, requires_grad=True) for a in (x, w))
    (gx,) = (ux.conv2d(uw, stride=2, padding=1) * Tensor(r, device=device)).sum().gradient(ux)
    (gw,) = gx.square().sum().gradient(uw)
    np.testing.assert_allclose(gx.numpy(), tgx.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gw.numpy(), tw.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_conv_in_a_function_body(device: str) -> None:
    """A @function's body is differentiated by backprop over its Params: the conv rule applies there too."""
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((2, 3, 9, 9)), rng.standard_normal((4, 3, 3, 3))

    @uopviz.function
    def block(x: Tensor, w: Tensor) -> Tensor:
        return x.conv2d(w, stride=2, padding=1).relu()

    same_as_torch(block, lambda x, w: F.conv2d(x, w, stride=2, padding=1).relu(), [x, w], device, rtol=1e-9)


def test_own_gradient_replaces_the_chain_rule(device: str) -> None:
    """The rule given is what backprop uses (here one that differs from the chain rule, so the test can tell), it
    is told which inputs need gradients, and an input that needs none gets none built."""
    asked: list[tuple[bool, ...]] = []

    def rule(g: Tensor, inputs: tuple[Tensor, ...], need: tuple[bool, ...]) -> tuple[Tensor | None, ...]:
        asked.append(need)
        return tuple(g * 10 if n else None for n in need)

    a = Tensor(np.array([1.0, 2.0]), device=device, requires_grad=True)
    b = Tensor(np.array([3.0, 4.0]), device=device)
    out = own_gradient(a * b, (a, b), rule)
    (ga,) = (out * 2).sum().gradient(a)
    np.testing.assert_allclose(ga.numpy(), [20.0, 20.0])
    assert asked == [(True, False)]
