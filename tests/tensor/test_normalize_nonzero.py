"""normalize for every p torch.norm takes (0 counts non-zeros, ±inf the largest or smallest magnitude) and nonzero of
a 0-d tensor, both against torch on every device."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uopviz import Tensor

X = np.array([[1.5, 0.0, -2.0, 0.25], [0.0, 0.0, 0.0, 0.0], [-3.0, 1.0, 0.0, 4.0]], np.float32)


@pytest.mark.parametrize("p", [0, 1, 2, 3, 0.5, -1, float("inf"), float("-inf")])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_normalize_takes_torchs_p(p: float, dim: int, device: str) -> None:
    want = torch.nn.functional.normalize(torch.tensor(X), p=p, dim=dim).numpy()
    got = Tensor(X, device=device).normalize(p=p, dim=dim).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("value", [3.0, 0.0, -1.0])
def test_nonzero_of_a_0d_tensor(value: float, device: str) -> None:
    want = torch.tensor(value).nonzero()
    got = Tensor(value, device=device).nonzero()
    assert got.shape == tuple(want.shape) and got.numpy().dtype == np.int64
    assert Tensor(value, device=device).nonzero(size=2).shape == (2, 0)
