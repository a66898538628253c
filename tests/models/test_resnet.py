"""The example ResNet (examples/models/resnet.py) against its PyTorch twin with identical weights: every parameter's
gradient, 50 SGD steps with momentum under @jit and BatchNorm's running statistics, on every runtime (PYTHON at a
smaller size)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from model_testing import DEVICES, STEPS, TorchResNet, example, train_both, twin_of

from uopviz import Tensor, nn


def digits(n: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n random images (N, 1, size, size) and labels of 10 classes."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 1, size, size)).astype(np.float32), rng.integers(0, 10, n).astype(np.int32)


@pytest.mark.parametrize("device", DEVICES)
def test_resnet_gradients_and_sgd_steps_match_torch(device: str) -> None:
    resnet = example("resnet")
    widths, size = ((2, 4), 4) if device == "PYTHON" else ((8, 16), 12)
    Tensor.manual_seed(3)
    model = resnet.ResNet(in_channels=1, widths=widths, device=device)
    twin = twin_of(TorchResNet(1, widths, 10), model.state_dict())
    opts = (nn.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
            torch.optim.SGD(twin.parameters(), lr=0.05, momentum=0.9))
    batches = [digits(8, size, seed % 2) for seed in range(STEPS[device])]
    train_both(model, twin, lambda m, x, y: m(x).cross_entropy(y), lambda m, x, y: F.cross_entropy(m(x.double()), y),
               batches, opts, device)
    for name, t in twin.state_dict().items():  # BatchNorm's running statistics were updated alike
        if "running" in name:
            np.testing.assert_allclose(model.state_dict()[name].numpy(), t.numpy(), rtol=1e-3, atol=1e-4)
