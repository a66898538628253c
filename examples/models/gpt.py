"""A GPT-2-style decoder in uopviz, in nanoGPT's layout (and state-dict names), trained on a byte-level toy text.

    python examples/models/gpt.py                      # train the small config for 50 AdamW steps, then sample
    python examples/models/gpt.py --steps 200 --device CL

Token and position embeddings, `n_layer` pre-norm blocks of causal multi-head attention and a GELU MLP, a final
LayerNorm, and a head tied to the token embedding. The weights have nanoGPT's names (`transformer.h.0.attn.c_attn.
weight`, ...), so a state dict moves to and from a PyTorch nanoGPT as it is (Linear weights are (out, in) in both).
The training step is a `@uopviz.jit` function; `generate` decodes greedily with a symbolic length under `@jit`, so
one compiled set of kernels serves every length up to the context.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import uopviz
from uopviz import Tensor, nn


@dataclass(frozen=True)
class GPTConfig:
    """The model's sizes; the defaults are the small model of the examples and tests."""

    vocab_size: int = 256
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, device: str | None = None) -> None:
        self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, device=device)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, device=device)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x: (B, T, C); mask: (T, T) bool, True where query i may attend to key j."""
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = q.scaled_dot_product_attention(k, v, attn_mask=mask)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig, device: str | None = None) -> None:
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, device=device)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, device=device)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(self.c_fc(x).gelu())


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, device: str | None = None) -> None:
        self.ln_1 = nn.LayerNorm(cfg.n_embd, device=device)
        self.attn = CausalSelfAttention(cfg, device)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, device=device)
        self.mlp = MLP(cfg, device)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """The decoder; `forward(idx)` gives (B, T, vocab) logits for (B, T) int token ids."""

    def __init__(self, cfg: GPTConfig, device: str | None = None, seed: int = 0) -> None:
        self.cfg = cfg
        self.transformer = {
            "wte": nn.Embedding(cfg.vocab_size, cfg.n_embd, device=device),
            "wpe": nn.Embedding(cfg.block_size, cfg.n_embd, device=device),
            "h": [Block(cfg, device) for _ in range(cfg.n_layer)],
            "ln_f": nn.LayerNorm(cfg.n_embd, device=device),
        }
        self._init_weights(seed)

    def _init_weights(self, seed: int) -> None:
        """nanoGPT's initialisation: N(0, 0.02) weights, zero biases, the residual projections scaled by
        1/√(2·n_layer), so a freshly built model trains like nanoGPT's. Drawn by NumPy from `seed`, so a model is
        reproducible and its torch twin gets the same weights. Each drawn tensor replaces the layer's own (the model
        is being built: nothing holds those yet) as a parameter made from the array, which runs no kernel: loading
        the arrays into the layers' tensors (load_state_dict) compiled a copy kernel per shape, 17 on a cold cache."""
        rng = np.random.default_rng(seed)
        for name, t in self.state_dict().items():
            if ".ln_" in name:  # LayerNorms start as the identity, as built
                continue
            shape = tuple(int(d) for d in t.shape)
            std = 0.02 / math.sqrt(2 * self.cfg.n_layer) if name.endswith("c_proj.weight") else 0.02
            value = (np.zeros(shape) if name.endswith("bias") else rng.normal(0, std, shape)).astype(np.float32)
            *path, attr = name.split(".")
            layer: Any = self
            for part in path:  # a module's attribute, the transformer's dict, or the list of blocks
                layer = layer[int(part)] if isinstance(layer, list) else \
                    layer[part] if isinstance(layer, dict) else getattr(layer, part)
            setattr(layer, attr, Tensor(value, device=t.device).realize().requires_grad_())

    def forward(self, idx: Tensor) -> Tensor:
        T = idx.shape[1]
        tr = self.transformer
        pos = Tensor.arange(T, device=idx.device)
        x = tr["wte"](idx) + tr["wpe"](pos)
        mask = Tensor.ones(T, T, dtype="bool", device=idx.device).tril()
        for block in tr["h"]:
            x = block(x, mask)
        x = tr["ln_f"](x)
        return x @ tr["wte"].weight.T  # the head tied to the token embedding

    def loss(self, idx: Tensor, targets: Tensor) -> Tensor:
        """The mean cross-entropy of next-token prediction."""
        logits = self(idx)
        return logits.reshape(-1, self.cfg.vocab_size).cross_entropy(targets.reshape(-1))


def eager_step(model: GPT, opt: nn.optim.Optimizer) -> Callable[[Tensor, Tensor], Tensor]:
    """One training step (loss, backward, AdamW) run as it is called; returns the loss."""
    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = model.loss(x, y).backward()
        opt.step()
        return loss
    return step


def train_step(model: GPT, opt: nn.optim.Optimizer) -> Callable[[Tensor, Tensor], Tensor]:
    """One training step as a @jit function: traced on its first calls, then replayed."""
    return uopviz.jit(eager_step(model, opt))


def generate(model: GPT, prompt: list[int], new_tokens: int) -> list[int]:
    """Greedy decoding: each next token is the argmax of the last position's logits. The model reads the tokens so
    far as a slice of symbolic length of a context buffer, so under @jit every length replays the same kernels."""
    cfg, device = model.cfg, model.transformer["wte"].weight.device
    if not prompt or len(prompt) + new_tokens > cfg.block_size:
        raise ValueError(f"a prompt of 1 or more tokens and the new ones must fit the context of {cfg.block_size}, "
                         f"got {len(prompt)} + {new_tokens}")
    n = uopviz.Variable("n", 1, cfg.block_size)

    @uopviz.jit
    def next_token(idx: Tensor) -> Tensor:
        return model(idx)[:, -1].argmax(-1)

    tokens = list(prompt)
    ctx = np.zeros((1, cfg.block_size), dtype=np.int32)
    for _ in range(new_tokens):
        ctx[0, :len(tokens)] = tokens
        idx = Tensor(ctx, device=device)[:, :n.bind(len(tokens))].realize()
        tokens.append(int(next_token(idx).item()))
    return tokens


def text_batches(text: bytes, cfg: GPTConfig, batch: int, seed: int = 0) -> Callable[[], tuple[np.ndarray, ...]]:
    """Random (x, y) windows of the byte text, y shifted by one."""
    data = np.frombuffer(text, dtype=np.uint8).astype(np.int32)
    rng = np.random.default_rng(seed)

    def draw() -> tuple[np.ndarray, ...]:
        at = rng.integers(0, len(data) - cfg.block_size - 1, size=batch)
        x = np.stack([data[i:i + cfg.block_size] for i in at])
        y = np.stack([data[i + 1:i + 1 + cfg.block_size] for i in at])
        return x, y
    return draw


TEXT = (b"uopviz lowers a tensor program through named rewrites: callify, rangeify, optimize, expand, instruction "
        b"selection, linearize, register and memory plan, render. every step can be seen, changed and tuned. " * 8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args()
    Tensor.manual_seed(0)
    cfg = GPTConfig()
    model = GPT(cfg, args.device)
    step = train_step(model, nn.optim.AdamW(model.parameters(), lr=args.lr))
    draw = text_batches(TEXT, cfg, args.batch)
    for i in range(args.steps):
        t0 = time.perf_counter()
        x, y = draw()
        loss = step(Tensor(x, device=args.device), Tensor(y, device=args.device)).item()
        if i % 10 == 0 or i == args.steps - 1:
            print(f"step {i:4d}  loss {loss:.4f}  {1e3 * (time.perf_counter() - t0):8.1f} ms")
    prompt = list(b"uopviz lowers")
    print(bytes(generate(model, prompt, 24)).decode("latin-1"))


if __name__ == "__main__":
    main()
