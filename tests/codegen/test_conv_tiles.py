"""The heuristic's tile of a convolution whose rows no tile of 8, 4 or 2 divides (heuristic._odd_conv_rows): an RGB
stem's weight gradient tiles its 3 input channels and a kernel-window axis beside them, and its values stay
torch's (float64) at odd sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uopviz import Tensor
from uopviz.codegen.opt import OptOps
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.realize import capture
from uopviz.runtime import device as devices
from uopviz.uop.ops import AxisType, UOp


def weight_grad(n: int, cin: int, cout: int, h: int, w: int,
                stride: int = 1) -> tuple[np.ndarray, np.ndarray, list[UOp]]:
    """conv2d's weight gradient (3x3, padding 1) of sum(out * g) in uopviz, the kernels that computed it, and
    torch's in float64."""
    rng = np.random.default_rng(cin * 100 + cout)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float32)
    wt = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
    ww = Tensor(wt, requires_grad=True)
    out = Tensor(x).conv2d(ww, padding=1, stride=stride)
    g = rng.standard_normal(out.shape).astype(np.float32)
    with capture() as launches:
        (out * Tensor(g)).sum().backward()
        assert ww.grad is not None
        got = ww.grad.numpy()
    tw = torch.tensor(wt, dtype=torch.float64, requires_grad=True)
    tout = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), tw, padding=1, stride=stride)
    (tout * torch.tensor(g, dtype=torch.float64)).sum().backward()
    return got, tw.grad.numpy(), [launch.key[0] for launch in launches if launch.key is not None]


def test_a_stem_weight_gradient_tiles_its_channels_and_window():
    _, _, asts = weight_grad(2, 3, 16, 8, 8)
    target = devices.get("CPU").target
    tiles = []
    for ast in asts:
        s = scheduler_of(ast, target)
        if [k for t, k in s.shape() if t is not AxisType.REDUCE] == [3, 3, 3, 16]:  # (kh, kw, cin, cout)
            tiles.append([o.arg[0] for o in heuristic_opts(s)
                          if o.op is OptOps.SPLIT and o.arg[1] is AxisType.UPCAST])
    assert tiles == [[16, 3, 3]]  # the output channels' vector, then 3 input channels x 3 window columns


@pytest.mark.parametrize("n, cin, cout, h, w, stride", [
    (2, 3, 16, 8, 8, 1), (3, 3, 5, 9, 11, 1), (2, 1, 7, 7, 5, 2), (1, 5, 16, 6, 9, 2), (2, 16, 16, 6, 6, 1)])
def test_weight_gradients_match_torch_float64(n, cin, cout, h, w, stride):
    got, want, _ = weight_grad(n, cin, cout, h, w, stride)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
