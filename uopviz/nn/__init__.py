"""`uopviz.nn`: layers (Linear, Conv1d/2d/3d, ConvTranspose1d/2d/3d, BatchNorm, LayerNorm, LayerNorm2d, GroupNorm,
InstanceNorm, RMSNorm, Embedding, Dropout, LSTMCell), containers (ModuleList, Sequential), `Module` (state by
attribute walk, train/eval, state_dict/load_state_dict), state helpers for any object (get_state_dict,
get_parameters, load_state_dict), saving state (`save`/`load`: safetensors or .npz) and `uopviz.nn.optim` (SGD,
Adam, AdamW, LAMB, Muon). Initialisers are Tensor constructors (Tensor.uniform, normal, kaiming_uniform,
kaiming_normal, glorot_uniform, scaled_uniform)."""

from uopviz.nn import optim
from uopviz.nn.layers import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
    Dropout,
    Embedding,
    Linear,
    ModuleList,
    Sequential,
    parameter,
)
from uopviz.nn.module import Module
from uopviz.nn.norm import (
    BatchNorm,
    BatchNorm1d,
    BatchNorm2d,
    GroupNorm,
    InstanceNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    LayerNorm,
    LayerNorm2d,
    RMSNorm,
)
from uopviz.nn.recurrent import LSTMCell
from uopviz.nn.state import StateError, get_parameters, get_state_dict, load, load_state_dict, save

__all__ = ["BatchNorm", "BatchNorm1d", "BatchNorm2d", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
           "ConvTranspose2d", "ConvTranspose3d", "Dropout", "Embedding", "GroupNorm", "InstanceNorm",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LSTMCell", "LayerNorm", "LayerNorm2d", "Linear",
           "Module", "ModuleList", "RMSNorm", "Sequential", "StateError", "get_parameters", "get_state_dict", "load",
           "load_state_dict", "optim", "parameter", "save"]
