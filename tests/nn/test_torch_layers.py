"""The layers, containers, state helpers and optimizers torch and tinygrad users reach for, each against its torch
twin (same weights: outputs, input and weight gradients) or, where torch has none or computes in bfloat16, against
the update written out in NumPy; on every device."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parents[1] / "tensor"))

from uopviz import Tensor, nn

RNG = np.random.default_rng(5)


def _twin(layer: nn.Module, peer: torch.nn.Module, x: np.ndarray, device: str,
          call: Callable[[Any, Any], Any] = lambda f, x: f(x)) -> None:
    """layer and peer (given layer's weights) agree on call(·, x) and on the gradients of sum(out·r)."""
    peer.load_state_dict({k: torch.tensor(v.numpy()) for k, v in layer.state_dict().items()}, strict=True)
    xs, xt = Tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, want = call(layer, xs), call(peer, xt)
    r = RNG.standard_normal(tuple(want.shape)).astype(np.float32)
    params = layer.parameters()
    grads = (out * Tensor(r, device=device)).sum().gradient(xs, *params)
    (want * torch.tensor(r)).sum().backward()
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[0].numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    named = dict(peer.named_parameters())
    for (name, _), g in zip(((k, t) for k, t in layer.state_dict().items() if t.requires_grad), grads[1:]):
        np.testing.assert_allclose(g.numpy(), named[name].grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=name)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_conv1d_and_conv_transpose1d(device: str) -> None:
    _twin(nn.Conv1d(3, 4, 3, stride=2, padding=1, device=device), torch.nn.Conv1d(3, 4, 3, stride=2, padding=1),
          _x(2, 3, 9), device)
    _twin(nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1, device=device),
          torch.nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1, output_padding=1), _x(2, 4, 5), device)


def test_norms(device: str) -> None:
    _twin(nn.InstanceNorm(3, device=device), torch.nn.InstanceNorm2d(3, affine=True), _x(2, 3, 4, 5), device)
    _twin(nn.InstanceNorm1d(3, device=device), torch.nn.InstanceNorm1d(3), _x(2, 3, 7), device)
    assert nn.InstanceNorm2d(3).weight is None and nn.InstanceNorm(3).weight is not None
    _twin(nn.RMSNorm((3, 5), device=device), torch.nn.RMSNorm((3, 5)), _x(2, 3, 5), device)
    _twin(nn.RMSNorm(5, eps=1e-3, device=device), torch.nn.RMSNorm(5, eps=1e-3), _x(4, 5), device)
    peer = torch.nn.LayerNorm(3)
    _twin(nn.LayerNorm2d(3, device=device), peer, _x(2, 3, 4, 5), device,
          lambda f, x: f(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2) if f is peer else f(x))


def test_lstm_cell(device: str) -> None:
    _twin(nn.LSTMCell(3, 4, device=device), torch.nn.LSTMCell(3, 4), _x(2, 3), device, lambda f, x: f(x)[0])
    h, c = _x(2, 4), _x(2, 4)

    def step(f: Any, x: Any) -> Any:
        kind = Tensor if isinstance(x, Tensor) else torch.tensor
        state = (kind(h, device=device), kind(c, device=device)) if kind is Tensor else (kind(h), kind(c))
        return f(x, state)[1]
    _twin(nn.LSTMCell(3, 4, bias=False, device=device), torch.nn.LSTMCell(3, 4, bias=False), _x(2, 3), device, step)


def test_module_list_and_state_helpers(device: str) -> None:
    layers = nn.ModuleList([nn.Linear(3, 4, device=device)]).append(nn.LayerNorm(4, device=device))
    peer = torch.nn.ModuleList([torch.nn.Linear(3, 4), torch.nn.LayerNorm(4)])
    assert list(layers.state_dict()) == list(peer.state_dict()) and len(layers) == 2
    _twin(layers, peer, _x(2, 3), device, lambda f, x: f[1](f[0](x)))

    class Plain:  # not a Module: tinygrad's helpers walk any object's attributes
        def __init__(self) -> None:
            self.layers, self.scale = layers, Tensor([2.0], device=device)
    obj = Plain()
    state = nn.get_state_dict(obj)
    assert list(state) == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias", "scale"]
    assert len(nn.get_parameters(obj)) == 5
    nn.load_state_dict(obj, {k: np.full(v.shape, 0.5, np.float32) for k, v in state.items()})
    np.testing.assert_array_equal(obj.scale.numpy(), [0.5])
    np.testing.assert_array_equal(layers[0].weight.numpy(), np.full((4, 3), 0.5, np.float32))
    with pytest.raises(nn.StateError):
        nn.load_state_dict(obj, {"scale": np.ones(1, np.float32)})


def _steps(opt_cls: type, kwargs: dict[str, Any], w0: np.ndarray, x: np.ndarray, device: str) -> np.ndarray:
    w = nn.parameter(Tensor(w0, device=device))
    opt = opt_cls([w], **kwargs)
    for _ in range(3):
        opt.zero_grad()
        (Tensor(x, device=device) @ w).square().sum().backward()
        opt.step()
    return w.numpy()


@pytest.mark.parametrize("adam", [False, True])
def test_lamb(adam: bool, device: str) -> None:
    w, x = _x(4, 3), _x(5, 4)
    got = _steps(nn.optim.LAMB, dict(lr=0.05, weight_decay=0.1, adam=adam), w, x, device)
    w = w.astype(np.float64)
    m = v = np.zeros_like(w)
    for t in range(1, 4):
        g = 2 * x.T @ (x @ w)
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        up = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-6) + 0.1 * w
        trust = 1.0 if adam else np.linalg.norm(w) / np.linalg.norm(up)
        w = w - 0.05 * trust * up
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("shape", "nesterov"), [((4, 6), True), ((6, 4), False)])
def test_muon(shape: tuple[int, int], nesterov: bool, device: str) -> None:
    w, x = _x(*shape), _x(5, shape[0])
    got = _steps(nn.optim.Muon, dict(lr=0.02, nesterov=nesterov), w, x, device)
    w, b = w.astype(np.float64), np.zeros(shape)
    for _ in range(3):
        g = 2 * x.T @ (x @ w)
        b = 0.95 * b + 0.05 * g
        s = g + 0.95 * (b - g) if nesterov else b
        s = s.T if shape[0] > shape[1] else s
        s = s / max(np.linalg.norm(s), 1e-7)
        for _ in range(5):
            a = s @ s.T
            s = 3.4445 * s + (-4.775 * a + 2.0315 * a @ a) @ s
        s = s.T if shape[0] > shape[1] else s
        w = w * (1 - 0.02 * 0.1) - 0.02 * max(1, shape[0] / shape[1]) ** 0.5 * s
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5)
    peer = torch.nn.Parameter(torch.tensor(_x(*shape)))  # torch's (Newton–Schulz in bfloat16): close, not equal
    start = peer.detach().clone()
    mine = nn.parameter(Tensor(start.numpy(), device=device))
    for p, opt in ((peer, torch.optim.Muon([peer], lr=0.02, nesterov=nesterov)),
                   (mine, nn.optim.Muon([mine], lr=0.02, nesterov=nesterov))):
        for _ in range(3):
            opt.zero_grad()
            xt = torch.tensor(x) if p is peer else Tensor(x, device=device)
            (xt @ p).square().sum().backward()
            opt.step()
    np.testing.assert_allclose(mine.numpy() - start.numpy(), (peer.detach() - start).numpy(), rtol=0.05, atol=2e-3)


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (6, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm_gradients_match_torch_in_float64(shape: tuple[int, ...], affine: bool, device: str) -> None:
    """BatchNorm's gradient rule of its own (nn.norm._batch_norm_grads) against torch's autograd in float64, on
    inputs of a large mean (the centring must not cancel), with x also used outside the norm and an uneven g."""
    x = 100 + 3 * RNG.standard_normal(shape)
    r = RNG.standard_normal(shape)
    layer = nn.BatchNorm(3, affine=affine, device=device)
    peer = torch.nn.BatchNorm2d(3, affine=affine, dtype=torch.float64) if len(shape) == 4 else \
        torch.nn.BatchNorm1d(3, affine=affine, dtype=torch.float64)
    if affine:
        w, b = 1 + RNG.standard_normal(3), RNG.standard_normal(3)
        layer.weight, layer.bias = (Tensor(v, device=device, requires_grad=True) for v in (w, b))
        peer.load_state_dict({**peer.state_dict(), "weight": torch.tensor(w), "bias": torch.tensor(b)})
    xs, xt = Tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, want = layer(xs) * xs, peer(xt) * xt
    params = [layer.weight, layer.bias] if affine else []
    grads = (out * Tensor(r, device=device)).sum().gradient(xs, *params)
    (want * torch.tensor(r)).sum().backward()
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-9)
    peers = [xt.grad, peer.weight.grad, peer.bias.grad] if affine else [xt.grad]
    for g, p in zip(grads, peers, strict=True):
        np.testing.assert_allclose(g.numpy(), p.numpy(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(layer.running_mean.numpy(), peer.running_mean.numpy(), rtol=1e-6)  # kept in float32
