"""`uopviz.nn`: layers (Linear, Conv2d, ConvTranspose2d, BatchNorm, LayerNorm, GroupNorm, Embedding, Dropout),
`Module` (state by attribute walk, train/eval, state_dict/load_state_dict), saving state (`save`/`load`:
safetensors or .npz) and `uopviz.nn.optim` (SGD, Adam, AdamW). Initialisers are Tensor constructors
(Tensor.uniform, normal, kaiming_uniform, kaiming_normal, glorot_uniform)."""

from uopviz.nn import optim
from uopviz.nn.layers import Conv2d, ConvTranspose2d, Dropout, Embedding, Linear, Sequential, parameter
from uopviz.nn.module import Module
from uopviz.nn.norm import BatchNorm, BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from uopviz.nn.state import StateError, load, save

__all__ = ["BatchNorm", "BatchNorm1d", "BatchNorm2d", "Conv2d", "ConvTranspose2d", "Dropout", "Embedding",
           "GroupNorm", "LayerNorm", "Linear", "Module", "Sequential", "StateError", "load", "optim", "parameter",
           "save"]
