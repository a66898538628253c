"""The example GPT (examples/models/gpt.py) against its PyTorch twin with identical weights: every parameter's gradient
and 50 AdamW steps under @jit, and greedy decoding with a symbolic length under @jit, on every runtime (PYTHON at a
smaller size). Its attention gradients were wrong while its loss was right (the memory plan's missed reader, issue
27), so each parameter's gradient is checked, not only the loss."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from model_testing import DEVICES, STEPS, TorchGPT, example, train_both, twin_of

from uopviz import nn
from uopviz.runtime import device as devices


def gpt_config(device: str) -> Any:
    gpt = example("gpt")
    if device == "PYTHON":  # the interpreter runs every element in Python
        return gpt.GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8)
    return gpt.GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)


def tokens(cfg: Any, batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, cfg.vocab_size, (batch, cfg.block_size)).astype(np.int32)
    return x, np.roll(x, -1, axis=1)


@pytest.mark.parametrize("device", DEVICES)
def test_gpt_gradients_and_adamw_steps_match_torch(device: str) -> None:
    gpt = example("gpt")
    cfg = gpt_config(device)
    model = gpt.GPT(cfg, device, seed=1)
    twin = twin_of(TorchGPT(cfg), model.state_dict())
    opts = (nn.optim.AdamW(model.parameters(), lr=3e-3), torch.optim.AdamW(twin.parameters(), lr=3e-3))
    batches = [tokens(cfg, 4, seed % 2) for seed in range(STEPS[device])]  # two batches in turn: the loss must fall
    train_both(model, twin, lambda m, x, y: m.loss(x, y), lambda m, x, y: m.loss(x.long(), y), batches, opts, device)


@pytest.mark.parametrize("device", DEVICES)
def test_greedy_decoding_of_a_symbolic_length_matches_torch(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    gpt = example("gpt")
    cfg = gpt_config(device)
    model = gpt.GPT(cfg, device, seed=4)
    twin = twin_of(TorchGPT(cfg), model.state_dict())
    prompt, new = [1, 5, 2], cfg.block_size - 3
    compiled: list[str] = []
    rt = devices.get(device)
    real = rt.compile
    monkeypatch.setattr(rt, "compile", lambda k: compiled.append(k.name) or real(k))
    tokens = gpt.generate(model, prompt, new)
    want = list(prompt)
    with torch.no_grad():
        for _ in range(new):
            want.append(int(twin(torch.tensor([want])).argmax(-1)[0, -1]))
    assert tokens == want
    first = len(compiled)
    gpt.generate(model, prompt[:1], 2)  # other lengths: the same kernels
    assert len(compiled) == first, "a new length compiled kernels again"


def test_the_drawn_weights_become_the_parameters_with_no_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """_init_weights makes each NumPy draw a parameter as it is: loading the draws into the layers' own tensors
    (load_state_dict) compiled a copy kernel per shape (17 of a cold GPT build's 31)."""
    import uopviz.realize as realize
    gpt = example("gpt")
    cfg = gpt_config("CPU")
    during: list[bool] = []
    scheduled: list[Any] = []
    real_compile_all, real_init = realize.compile_all, gpt.GPT._init_weights

    def init(self: Any, seed: int) -> None:
        during.append(True)
        try:
            real_init(self, seed)
        finally:
            during.pop()
    def compile_all(keys: Any, *a: Any, **k: Any) -> None:
        keys = list(keys)  # an iterator (realize makes each key as its turn comes)
        if during:
            scheduled.extend(keys)
        real_compile_all(keys, *a, **k)
    monkeypatch.setattr(gpt.GPT, "_init_weights", init)
    monkeypatch.setattr(realize, "compile_all", compile_all)
    model = gpt.GPT(cfg, "CPU", seed=5)
    assert scheduled == []
    rng = np.random.default_rng(5)
    first = model.state_dict()["transformer.wte.weight"]  # the first drawn
    np.testing.assert_array_equal(first.numpy(), rng.normal(0, 0.02, first.shape).astype(np.float32))
    assert all(p.requires_grad for p in model.parameters()) and len(model.parameters()) == len(model.state_dict())
