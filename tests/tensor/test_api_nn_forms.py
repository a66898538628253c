"""nn functional forms of torch and tinygrad (issue 32): interpolate's linear modes over 1-3 spatial dims with
align_corners both ways and "nearest-exact"; conv2d and avg/max_pool2d over 1 or 3 spatial dims (tinygrad's are
N-d); 4-int (l, r, t, b) and negative padding (tinygrad's: a negative pad crops); padding strings refused as torch
refuses them. Each against torch in float64 on every device, gradients included, at odd sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch_peer import same_as_torch

import uopviz.nn as nn
from uopviz import Tensor
from uopviz.tensor import ArgumentError, ShapeError

RNG = np.random.default_rng(32)
TORCH_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}
SPATIAL = {1: (7,), 2: (5, 7), 3: (3, 5, 4)}
SIZES = {1: (11,), 2: (8, 3), 3: (5, 2, 7)}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_linear_modes(nd: int, align_corners: bool, device: str) -> None:
    """bilinear/trilinear as torch, and "linear" over any number of spatial dims (torch's takes 1 only, tinygrad's
    is N-d), up and down at once."""
    x = RNG.standard_normal((2, 3, *SPATIAL[nd]))
    size = SIZES[nd]
    want = lambda t: F.interpolate(t, size=size, mode=TORCH_LINEAR[nd], align_corners=align_corners)  # noqa: E731
    for mode in {TORCH_LINEAR[nd], "linear"}:
        same_as_torch(
            lambda t, m=mode: t.interpolate(size=size, mode=m, align_corners=align_corners), want, [x], device
        )


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_interpolate_scale_factor_linear(nd: int, device: str) -> None:
    x = RNG.standard_normal((1, 2, *SPATIAL[nd]))
    same_as_torch(
        lambda t: t.interpolate(scale_factor=1.7, mode="linear"),
        lambda t: F.interpolate(t, scale_factor=1.7, mode=TORCH_LINEAR[nd]),
        [x],
        device,
    )


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_interpolate_nearest_exact(nd: int, device: str) -> None:
    """The source pixel floor((o + 0.5)·in/out), where "nearest" takes floor(o·in/out): they differ here."""
    x = RNG.standard_normal((2, 2, *SPATIAL[nd]))
    for kw in ({"size": SIZES[nd]}, {"scale_factor": 0.6}):
        same_as_torch(
            lambda t, kw=kw: t.interpolate(mode="nearest-exact", **kw),
            lambda t, kw=kw: F.interpolate(t, mode="nearest-exact", **kw),
            [x],
            device,
        )
    got = Tensor(x).interpolate(size=SIZES[nd], mode="nearest-exact").numpy()
    assert not np.array_equal(got, Tensor(x).interpolate(size=SIZES[nd]).numpy())


def test_interpolate_int_nearest_exact_keeps_dtype(device: str) -> None:
    x = RNG.integers(-9, 9, (1, 1, 5, 3)).astype(np.int32)
    got = Tensor(x, device=device).interpolate(size=(3, 7), mode="nearest-exact")
    want = F.interpolate(torch.tensor(x, dtype=torch.float64), size=(3, 7), mode="nearest-exact")
    assert got.dtype.name == "int32"
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_interpolate_refusals() -> None:
    x = Tensor.ones(1, 1, 4, 4)
    with pytest.raises(ArgumentError, match="bilinear for 2"):
        x.interpolate(size=(2, 2), mode="trilinear")
    with pytest.raises(ArgumentError, match="does not fit"):
        x.interpolate(size=(2, 2), mode="bicubic")
    with pytest.raises(ArgumentError, match="align_corners"):
        x.interpolate(size=(2, 2), mode="nearest-exact", align_corners=True)


@pytest.mark.parametrize("nd", [1, 3])
def test_conv2d_over_other_spatial_dims(nd: int, device: str) -> None:
    """conv2d with a 3-D or 5-D weight is conv1d or conv3d (tinygrad's conv2d is N-d)."""
    x = RNG.standard_normal((2, 4, *SPATIAL[nd]))
    w = RNG.standard_normal((4, 2, *(2,) * nd))
    b = RNG.standard_normal(4)
    torch_conv = {1: F.conv1d, 3: F.conv3d}[nd]
    same_as_torch(
        lambda t, u, c: t.conv2d(u, c, stride=1, padding=1, groups=2),
        lambda t, u, c: torch_conv(t, u, c, stride=1, padding=1, groups=2),
        [x, w, b],
        device,
    )


def test_conv2d_weight_and_input_dims_must_agree() -> None:
    with pytest.raises(ShapeError, match="3-D weight"):
        Tensor.ones(1, 3, 5, 5).conv2d(Tensor.ones(2, 3, 3))


@pytest.mark.parametrize("pad", [(1, 0, 2, 1), (-1, 2, 0, -2), (0, -1, -1, 0)])
def test_conv2d_four_int_and_negative_padding(pad: tuple, device: str) -> None:
    """(l, r, t, b): W gets (l, r), H (t, b), F.pad's order; a negative one crops, as F.pad (and tinygrad)."""
    x = RNG.standard_normal((2, 3, 6, 7))
    w = RNG.standard_normal((4, 3, 3, 2))
    same_as_torch(
        lambda t, u: t.conv2d(u, stride=(2, 1), padding=pad),
        lambda t, u: F.conv2d(F.pad(t, pad), u, stride=(2, 1)),
        [x, w],
        device,
    )


def test_conv_negative_padding_per_axis(device: str) -> None:
    """One negative int per axis crops each side."""
    x = RNG.standard_normal((1, 2, 7, 6))
    w = RNG.standard_normal((2, 2, 2, 2))
    same_as_torch(
        lambda t, u: t.conv2d(u, padding=(-1, 1)), lambda t, u: F.conv2d(F.pad(t, (1, 1, -1, -1)), u), [x, w], device
    )


@pytest.mark.parametrize("pad", [(1, 0, 1, 1), (-1, 1, 0, -2)])
def test_pool2d_four_int_and_negative_padding(pad: tuple, device: str) -> None:
    """max_pool2d pads with -inf and avg_pool2d with zeros that count (count_include_pad), as F.pad would."""
    x = RNG.standard_normal((2, 3, 7, 6))
    same_as_torch(
        lambda t: t.max_pool2d(3, 2, padding=pad),
        lambda t: F.max_pool2d(F.pad(t, pad, value=float("-inf")), 3, 2),
        [x],
        device,
    )
    same_as_torch(lambda t: t.avg_pool2d(3, 2, padding=pad), lambda t: F.avg_pool2d(F.pad(t, pad), 3, 2), [x], device)


def test_max_pool2d_indices_with_cropping(device: str) -> None:
    """With a negative padding the indices still point into the uncropped input."""
    x = RNG.standard_normal((1, 1, 6, 6))
    vals, idx = Tensor(x, device=device).max_pool2d(2, padding=(-1, -1, -2, 0), return_indices=True)
    np.testing.assert_array_equal(x.reshape(-1)[idx.numpy().reshape(-1)], vals.numpy().reshape(-1))
    np.testing.assert_array_equal(vals.numpy(), F.max_pool2d(torch.tensor(x)[..., 2:, 1:5], 2).numpy())


@pytest.mark.parametrize("nd", [1, 3])
def test_pool2d_over_other_spatial_dims(nd: int, device: str) -> None:
    """A kernel_size tuple of 1 or 3 ints pools that many trailing axes (tinygrad's *_pool2d)."""
    x = RNG.standard_normal((2, 3, *SPATIAL[nd]))
    k = (2,) * nd
    torch_max, torch_avg = {1: (F.max_pool1d, F.avg_pool1d), 3: (F.max_pool3d, F.avg_pool3d)}[nd]
    same_as_torch(lambda t: t.max_pool2d(k, 1), lambda t: torch_max(t, k, 1), [x], device)
    same_as_torch(lambda t: t.avg_pool2d(k, padding=1), lambda t: torch_avg(t, k, padding=1), [x], device)


def test_padding_strings_as_torch(device: str) -> None:
    x = RNG.standard_normal((1, 2, 5, 6))
    w = RNG.standard_normal((3, 2, 3, 2))
    same_as_torch(
        lambda t, u: t.conv2d(u, padding="same", dilation=2),
        lambda t, u: F.conv2d(t, u, padding="same", dilation=2),
        [x, w],
        device,
    )
    same_as_torch(
        lambda t, u: t.conv2d(u, padding="valid"), lambda t, u: F.conv2d(t, u, padding="valid"), [x, w], device
    )
    with pytest.raises(ArgumentError, match="strided"):
        Tensor(x).conv2d(Tensor(w), stride=2, padding="same")
    with pytest.raises(ArgumentError, match="invalid padding string 'full'"):
        Tensor(x).conv2d(Tensor(w), padding="full")


def test_conv_layers_refuse_bad_padding_strings_when_built() -> None:
    """nn.Conv2d(padding="same", stride > 1) and unknown strings fail at construction, as torch's ValueError (a
    RuntimeError too)."""
    for layer in (nn.Conv1d, nn.Conv2d, nn.Conv3d):
        with pytest.raises(ValueError, match="strided"):
            layer(2, 3, 3, stride=2, padding="same")
        with pytest.raises(RuntimeError, match="invalid padding string"):
            layer(2, 3, 3, padding="zeros")
    assert nn.Conv2d(2, 3, 3, stride=(1, 1), padding="same")(Tensor.ones(1, 2, 5, 4)).shape == (1, 3, 5, 4)


def test_padding_refusals() -> None:
    x = Tensor.ones(1, 1, 4, 4)
    with pytest.raises(ShapeError, match="crops all"):
        x.conv2d(Tensor.ones(1, 1, 1, 1), padding=(-2, -2, 0, 0))
    with pytest.raises(ShapeError, match="none below 0"):
        x.conv_transpose2d(Tensor.ones(1, 1, 2, 2), padding=-1)
    with pytest.raises(ShapeError, match="padding must be"):
        x.conv2d(Tensor.ones(1, 1, 2, 2), padding=(1, 2, 3))
