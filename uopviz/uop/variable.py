"""Symbolic sizes: `Variable(name, lo, hi)` is an integer known only to lie in [lo, hi], and `.bind(value)` gives
it a value for one call. A Tensor whose dims are bound variables compiles its kernels once for the whole range
(the kernels read the value as an argument) and runs for each bound value without compiling again.

    n = uopviz.Variable("n", 1, 1024)
    x = Tensor.ones(n.bind(37), 8)          # shape (n, 8), n = 37 for this tensor
    (x * 2).sum(0).numpy()                  # a kernel over 0..n-1, compiled once for every n in 1..1024
"""

from __future__ import annotations

from uopviz.uop.ops import Ops, UOp, VarArg
from uopviz.uop.spec import ArgError, check_arg


def Variable(name: str, lo: int, hi: int) -> UOp:
    """A symbolic integer named `name` (an identifier: it becomes a kernel argument) in lo..hi inclusive."""
    try:
        check_arg(Ops.DEFINE_VAR, VarArg(name, lo, hi))
    except ArgError as e:
        raise ValueError(f"Variable({name!r}, {lo!r}, {hi!r}): {e}") from None
    if lo < 0:
        raise ValueError(f"Variable({name!r}, {lo}, {hi}): a size cannot be negative; give lo >= 0")
    return UOp.variable(name, lo, hi)
