"""A GPT-style greedy decode under @uopviz.jit with a symbolic length: the sequence grows by one token a step, the
kernels are compiled once for every length, and the tokens are torch's, on every device.

The decoder is tiny (vocab 16, width 8, one head, one block) and built from uopviz.nn layers whose weights are
copied from a NumPy generator into a torch twin. What a step needs on an axis of symbolic length: an embedding
lookup of tokens[:n], positions by arange(n), a causal mask (ones(n, n).tril(), or an arange comparison), softmax
over it, and the last position's logits, logits[:, -1].argmax().
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import uopviz
from uopviz import Tensor, nn
from uopviz.dtype import dtypes

VOCAB, D, CTX = 16, 8, 24
PROMPT, STEPS = [3, 1, 4], 9


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(27)

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32) * (1 / math.sqrt(shape[-1]) if len(shape) > 1 else 0.3)
    return {"wte.weight": w(VOCAB, D) * 3, "wpe.weight": w(CTX, D) * 3,
            "ln1.weight": 1 + w(D), "ln1.bias": w(D), "ln2.weight": 1 + w(D), "ln2.bias": w(D),
            **{f"{k}.weight": w(D, D) for k in ("q", "k", "v", "proj")}, **{f"{k}.bias": w(D) for k in "qkv"},
            "proj.bias": w(D), "fc.weight": w(2 * D, D), "fc.bias": w(2 * D), "out.weight": w(D, 2 * D),
            "out.bias": w(D), "lnf.weight": 1 + w(D), "lnf.bias": w(D), "head.weight": w(VOCAB, D) * 4,
            "head.bias": w(VOCAB)}


class Decoder(nn.Module):
    """One pre-norm transformer block with a single attention head, then the logits of the last position."""

    def __init__(self, mask: str, device: str) -> None:
        self.mask = mask
        self.wte, self.wpe = nn.Embedding(VOCAB, D, device=device), nn.Embedding(CTX, D, device=device)
        self.ln1, self.ln2, self.lnf = (nn.LayerNorm(D, device=device) for _ in range(3))
        self.q, self.k, self.v, self.proj = (nn.Linear(D, D, device=device) for _ in range(4))
        self.fc, self.out = nn.Linear(D, 2 * D, device=device), nn.Linear(2 * D, D, device=device)
        self.head = nn.Linear(D, VOCAB, device=device)

    def forward(self, tokens: Tensor) -> Tensor:
        n = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(Tensor.arange(n, device=tokens.device))
        h = self.ln1(x)
        scores = self.q(h) @ self.k(h).transpose(-2, -1) / math.sqrt(D)
        if self.mask == "tril":
            keep = Tensor.ones(n, n, device=tokens.device).tril().eq(1)
        else:
            pos = Tensor.arange(n, device=tokens.device)
            keep = pos.reshape(n, 1).ge(pos.reshape(1, n))
        x = x + self.proj(keep.where(scores, float("-inf")).softmax(-1) @ self.v(h))
        x = x + self.out(self.fc(self.ln2(x)).relu())
        return self.head(self.lnf(x))[:, -1].argmax(-1)


def _torch_tokens(w: dict[str, np.ndarray]) -> list[int]:
    """The same greedy decode in torch, the whole sequence run again each step."""
    t = {k: torch.tensor(v) for k, v in w.items()}
    F = torch.nn.functional

    def lin(x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, t[f"{name}.weight"], t[f"{name}.bias"])

    def ln(x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (D,), t[f"{name}.weight"], t[f"{name}.bias"])

    tokens = list(PROMPT)
    for _ in range(STEPS):
        ids = torch.tensor([tokens])
        n = ids.shape[1]
        x = t["wte.weight"][ids] + t["wpe.weight"][torch.arange(n)]
        h = ln(x, "ln1")
        scores = lin(h, "q") @ lin(h, "k").transpose(-2, -1) / math.sqrt(D)
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
        x = x + lin(scores.softmax(-1) @ lin(h, "v"), "proj")
        x = x + lin(lin(ln(x, "ln2"), "fc").relu(), "out")
        tokens.append(int(lin(ln(x, "lnf"), "head")[:, -1].argmax(-1)))
    return tokens


@pytest.mark.parametrize("mask", ["tril", "arange"])
def test_a_jitted_decode_loop_compiles_once_for_every_length(mask: str, device: str, compiles: list[str]) -> None:
    w = _weights()
    model = Decoder(mask, device)
    model.load_state_dict(w)
    step = uopviz.jit(model)
    n = uopviz.Variable("n", 1, CTX)
    buf = np.zeros((1, CTX), np.int32)
    buf[0, :len(PROMPT)] = PROMPT
    tokens, compiled = list(PROMPT), []
    for _ in range(STEPS):
        length = n.bind(len(tokens))
        prefix = Tensor(buf, device=device)[:, :length].realize()
        nxt = step(prefix)
        assert nxt.shape == (1,) and nxt.dtype == dtypes.int32
        tokens.append(int(nxt.item()))
        buf[0, len(tokens) - 1] = tokens[-1]
        compiled.append(len(compiles))
    assert tokens == _torch_tokens(w)
    assert step.captures == 1  # type: ignore[attr-defined]
    assert compiled[0] > 0 and compiled == [compiled[0]] * STEPS, (compiled, compiles)  # no length compiled again
