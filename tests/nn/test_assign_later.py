"""assign_later (BatchNorm's running statistics): written by the next realize, in its schedule, so a training step
computes the network once; every read sees the new values, as after assign_all. Against NumPy on every device."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tensor"))
from tensor_testing import check

from uopviz import Tensor, nn
from uopviz.realize import capture
from uopviz.tensor import assign_all, assign_later

RNG = np.random.default_rng(3)
X = RNG.standard_normal((4, 3, 5, 5)).astype(np.float32)


def _stats(x: np.ndarray, mean: np.ndarray, var: np.ndarray, m: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    n = x.size // x.shape[1]
    return (1 - m) * mean + m * x.mean((0, 2, 3)), (1 - m) * var + m * x.var((0, 2, 3)) * n / (n - 1)


def test_a_training_step_runs_each_convolution_once(device: str) -> None:
    """conv -> BN -> conv -> BN -> loss: the statistics are computed with the loss, not by schedules of their own
    that computed the convolutions again."""
    Tensor.manual_seed(0)
    convs = [nn.Conv2d(3, 3, 3, padding=1, device=device) for _ in range(2)]
    bns = [nn.BatchNorm(3, device=device) for _ in range(2)]
    x = Tensor(X, device=device)
    with capture() as launches:
        h = x
        for conv, bn in zip(convs, bns, strict=True):
            h = bn(conv(h)).relu()
        loss = h.square().mean()
        loss.realize()
    windows = [launch for launch in launches if launch.kernel.name.count("R3") >= 2]  # a 3x3 convolution's sums
    assert len(windows) == 2
    h1 = convs[0](Tensor(X, device=device)).numpy()
    mean, var = _stats(h1, np.zeros(3, np.float32), np.ones(3, np.float32))
    check(bns[0].running_mean, mean, rtol=1e-4, atol=1e-5)
    check(bns[0].running_var, var, rtol=1e-4, atol=1e-5)


def test_reading_a_target_or_a_value_built_from_it_sees_the_new_statistics(device: str) -> None:
    bn = nn.BatchNorm(3, device=device)
    out = bn(Tensor(X, device=device))  # nothing realized yet: the update waits
    mean, var = _stats(X, np.zeros(3, np.float32), np.ones(3, np.float32))
    check(bn.running_mean, mean, rtol=1e-5, atol=1e-6)  # a read writes it first
    bn2 = nn.BatchNorm(3, device=device)
    bn2(Tensor(X, device=device))
    shifted = bn2.running_var + 1  # built from the target before the update ran: reads the new values
    check(shifted, var + 1, rtol=1e-5, atol=1e-6)
    check(out, (X - X.mean((0, 2, 3), keepdims=True)) / np.sqrt(X.var((0, 2, 3), keepdims=True) + 1e-5),
          rtol=1e-4, atol=1e-5)


def test_two_updates_before_a_realize_compose(device: str) -> None:
    bn = nn.BatchNorm(3, device=device)
    bn(Tensor(X, device=device))
    bn(Tensor(X * 2, device=device))  # reads the first update's result
    mean, var = _stats(X, np.zeros(3, np.float32), np.ones(3, np.float32))
    mean, var = _stats(X * 2, mean, var)
    check(bn.running_mean, mean, rtol=1e-5, atol=1e-6)
    check(bn.running_var, var, rtol=1e-5, atol=1e-6)


def test_an_assign_to_what_a_waiting_value_reads_writes_it_first(device: str) -> None:
    """An optimizer's step after a BN forward: the statistics are of the weights the forward used."""
    w = Tensor(np.ones(3, np.float32), device=device).contiguous().realize()
    target = Tensor(np.zeros(3, np.float32), device=device).contiguous().realize()
    assign_later([target], [w * 2])
    assign_all([w], [Tensor(np.full(3, 5, np.float32), device=device)])
    check(target, np.full(3, 2, np.float32))
    check(w, np.full(3, 5, np.float32))
