"""The Tensor front-end: a lazy `Tensor` whose methods build Tensor-level UOp graphs, run by `realize()`.

tensor.py holds the class; its methods live in topic modules mixed into it: create.py (constants, arange, random
numbers), movement.py (reshape, permute, pad, indexing, ...), elementwise.py (math, comparisons, casts),
reduce.py (sum, max, softmax, cumsum, ...), nn.py (matmul, conv2d, gather, ...), and util.py (shape and dtype
helpers shared by them); function.py holds `@function`, jit.py `@jit`. A new method goes in the module of its topic.
"""

from uopviz.tensor.function import FunctionTraceError, function
from uopviz.tensor.gradient import GradientError
from uopviz.tensor.jit import JitError, jit
from uopviz.tensor.tensor import (
    ArgumentError,
    AxisError,
    DeviceMismatchError,
    ShapeError,
    Tensor,
    assign_all,
    assign_later,
)

__all__ = ["ArgumentError", "AxisError", "DeviceMismatchError", "FunctionTraceError", "GradientError", "JitError",
           "ShapeError", "Tensor", "assign_all", "assign_later", "function", "jit"]
