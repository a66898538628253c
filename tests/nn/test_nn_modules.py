"""uopviz.nn: layers, Module state, saving and loading, and the optimizers' updates (PyTorch's formulas written out
in NumPy), on every device."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "tensor"))
from tensor_testing import check

from uopviz import Tensor, nn


class Net(nn.Module):
    def __init__(self, device: str) -> None:
        self.conv = nn.Conv2d(2, 3, 3, padding=1, device=device)
        self.norm = nn.BatchNorm(3, device=device)
        self.fc = [nn.Linear(12, 5, device=device), nn.Linear(5, 2, bias=False, device=device)]

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.conv(x)).relu().max_pool2d(2).flatten(1)
        return self.fc[1](self.fc[0](x).relu())


def test_module_state_names_and_parameters(device: str) -> None:
    net = Net(device)
    names = list(net.state_dict())
    assert names == ["conv.weight", "conv.bias", "norm.weight", "norm.bias", "norm.running_mean", "norm.running_var",
                     "fc.0.weight", "fc.0.bias", "fc.1.weight"]
    assert len(net.parameters()) == 7 and all(p.requires_grad and p.is_realized for p in net.parameters())
    assert net(Tensor(np.ones((2, 2, 4, 4), np.float32), device=device)).shape == (2, 2)
    assert not net.eval().norm.training


def test_sequential_names_its_layers_as_torch_does() -> None:
    import torch
    seq = nn.Sequential(nn.Linear(3, 4), nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm(2)))
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3),
                                                                        torch.nn.BatchNorm2d(2)))
    want = [k for k in twin.state_dict() if not k.endswith("num_batches_tracked")]
    assert list(seq.state_dict()) == want
    assert len(seq) == 2 and seq[-1][0] is list(seq)[1][0] and len(list(seq.modules())) == 5


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_save_load_round_trip(suffix: str, tmp_path: Path, device: str) -> None:
    a, b = Net(device), Net(device)
    path = tmp_path / f"net{suffix}"
    nn.save(a.state_dict(), path)
    loaded = nn.load(path)
    assert set(loaded) == set(a.state_dict())
    b.load_state_dict(loaded)
    for k, t in b.state_dict().items():
        check(t, a.state_dict()[k].numpy())
    with pytest.raises(nn.StateError, match="missing"):
        b.load_state_dict({"conv.weight": loaded["conv.weight"]})
    b.load_state_dict({"conv.weight": loaded["conv.weight"]}, strict=False)
    with pytest.raises(nn.StateError, match="format"):
        nn.save(a.state_dict(), tmp_path / "net.pkl")


def test_linear_and_norms_match_numpy(device: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    lin = nn.Linear(5, 2, device=device)
    check(lin(Tensor(x, device=device)), x @ lin.weight.numpy().T + lin.bias.numpy(), rtol=1e-5, atol=1e-6)
    ln = nn.LayerNorm(5, device=device)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    check(ln(Tensor(x, device=device)), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    gn = nn.GroupNorm(1, 3, device=device)
    g = x.reshape(4, -1)
    check(gn(Tensor(x, device=device)), ((g - g.mean(1, keepdims=True)) / np.sqrt(g.var(1, keepdims=True) + 1e-5)
                                         ).reshape(x.shape), rtol=1e-4, atol=1e-5)
    bn = nn.BatchNorm(3, device=device)
    out = bn(Tensor(x, device=device))
    m, v = x.mean((0, 2)), x.var((0, 2))
    check(out, (x - m[:, None]) / np.sqrt(v[:, None] + 1e-5), rtol=1e-4, atol=1e-5)
    check(bn.running_mean, 0.1 * m, rtol=1e-5, atol=1e-6)
    check(bn.running_var, 0.9 + 0.1 * v * 20 / 19, rtol=1e-5)
    bn.eval()
    check(bn(Tensor(x, device=device)), (x - 0.1 * m[:, None]) / np.sqrt(0.9 + 0.1 * v[:, None] * 20 / 19 + 1e-5),
          rtol=1e-4, atol=1e-5)


def test_embedding_dropout_convtranspose(device: str) -> None:
    emb = nn.Embedding(7, 3, device=device)
    idx = np.array([[1, 6], [0, 1]], np.int32)
    check(emb(Tensor(idx, device=device)), emb.weight.numpy()[idx])
    drop = nn.Dropout(0.5)
    x = Tensor(np.ones(400, np.float32), device=device)
    kept = drop(x).numpy()
    assert set(np.unique(kept)) <= {0.0, 2.0} and 100 < (kept > 0).sum() < 300
    check(drop.eval()(x), np.ones(400))
    ct = nn.ConvTranspose2d(2, 3, 3, stride=2, device=device)
    assert ct(Tensor(np.ones((1, 2, 4, 4), np.float32), device=device)).shape == (1, 3, 9, 9)


def _run(opt_cls: type, kwargs: dict, device: str, steps: int = 3) -> tuple[np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((3, 2)).astype(np.float32)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = nn.parameter(Tensor(w0, device=device))
    opt = opt_cls([w], **kwargs)
    grads = []
    for _ in range(steps):
        opt.zero_grad()
        (Tensor(x, device=device) @ w).square().sum().backward()
        grads.append(w.grad.numpy())
        opt.step()
    return w.numpy(), [w0, x]


def _sgd_ref(w: np.ndarray, x: np.ndarray, lr: float, momentum: float, wd: float, nesterov: bool) -> np.ndarray:
    b = np.zeros_like(w)
    for _ in range(3):
        g = 2 * x.T @ (x @ w) + wd * w
        if momentum:
            b = momentum * b + g
            g = g + momentum * b if nesterov else b
        w = w - lr * g
    return w


@pytest.mark.parametrize("momentum,wd,nesterov", [(0.0, 0.0, False), (0.9, 0.0, False), (0.9, 0.1, True)])
def test_sgd(momentum: float, wd: float, nesterov: bool, device: str) -> None:
    got, (w0, x) = _run(nn.optim.SGD, dict(lr=0.01, momentum=momentum, weight_decay=wd, nesterov=nesterov), device)
    np.testing.assert_allclose(got, _sgd_ref(w0, x, 0.01, momentum, wd, nesterov), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("cls,wd", [(nn.optim.Adam, 0.0), (nn.optim.Adam, 0.1), (nn.optim.AdamW, 0.1)])
def test_adam(cls: type, wd: float, device: str) -> None:
    got, (w, x) = _run(cls, dict(lr=0.05, weight_decay=wd), device)
    m = v = np.zeros_like(w)
    for t in range(1, 4):
        g = 2 * x.T @ (x @ w)
        if cls is nn.optim.Adam:
            g = g + wd * w
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        d = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        w = w - 0.05 * (d + (wd * w if cls is nn.optim.AdamW else 0))
    np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6)


def test_optimizer_keeps_buffers_and_skips_params_without_grads(device: str) -> None:
    a = nn.parameter(Tensor(np.ones(3, np.float32), device=device))
    b = nn.parameter(Tensor(np.ones(2, np.float32), device=device))
    buf = a.uop.src[0]
    opt = nn.optim.SGD([a, b], lr=0.5)
    (a * 2).sum().backward()
    opt.step()
    assert a.uop.src[0] is buf
    check(a, [0.0, 0.0, 0.0])
    check(b, [1.0, 1.0])
    opt.lr.assign(0.25)
    opt.step()
    check(a, [-0.5, -0.5, -0.5])
