"""Recurrent cells: LSTMCell, one step of an LSTM, with torch.nn.LSTMCell's weights, gate order and names."""

from __future__ import annotations

from uopviz.nn.layers import fan_in_uniform
from uopviz.nn.module import Module
from uopviz.tensor import Tensor


class LSTMCell(Module):
    """(h, c) ← one LSTM step of x: gates i, f, g, o = split(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh),
    c ← σ(f)·c + σ(i)·tanh(g), h ← σ(o)·tanh(c). Weights start uniform in ±1/√hidden_size, as torch's; hc None
    starts from zeros."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: str | None = None) -> None:
        self.hidden_size = hidden_size
        self.weight_ih = fan_in_uniform((4 * hidden_size, input_size), hidden_size, device)
        self.weight_hh = fan_in_uniform((4 * hidden_size, hidden_size), hidden_size, device)
        self.bias_ih = fan_in_uniform((4 * hidden_size,), hidden_size, device) if bias else None
        self.bias_hh = fan_in_uniform((4 * hidden_size,), hidden_size, device) if bias else None

    def forward(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if hc is None:
            z = Tensor.zeros(*x.shape[:-1], self.hidden_size, dtype=x.dtype, device=x.device)
            hc = (z, z)
        h, c = hc
        gates = x.linear(self.weight_ih.T, self.bias_ih).add(h.linear(self.weight_hh.T, self.bias_hh))
        i, f, g, o = gates.chunk(4, -1)
        c = f.sigmoid().mul(c).add(i.sigmoid().mul(g.tanh()))
        return o.sigmoid().mul(c.tanh()), c
