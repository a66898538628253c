"""The exceptions of the cases where torch raises: each is the builtin torch raises (RuntimeError mostly), and
still the ValueError, IndexError or TypeError uopviz raised before, so either `except` keeps working."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from uopviz import Tensor, dtypes
from uopviz.dtype import DTypeError
from uopviz.tensor import ArgumentError, AxisError, ShapeError

X = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
Q = X.reshape(1, 3, 4)

CASES: dict[str, tuple[Callable[[], Any], type[Exception], tuple[type[Exception], ...]]] = {
    # name: (the call, uopviz's class, the builtins it must also be)
    "clip(None, None)": (lambda: X.clip(None, None), ArgumentError, (RuntimeError, ValueError)),
    "div rounding_mode typo": (lambda: X.div(X, rounding_mode="flor"), ArgumentError, (RuntimeError, ValueError)),
    "int ** -2": (lambda: Tensor([1, 2]) ** -2, ArgumentError, (RuntimeError, ValueError)),
    "roll shifts and dims": (lambda: X.roll((1, 2), (0,)), ArgumentError, (RuntimeError, ValueError)),
    "scatter_reduce reduce": (lambda: X.scatter_reduce(0, Tensor([[0, 1, 2, 0]]), X, reduce="foo"), ArgumentError,
                              (RuntimeError, ValueError)),
    "scatter reduce": (lambda: X.scatter(0, Tensor([[0, 1, 2, 0]]), X, reduce="max"), ArgumentError,
                       (RuntimeError, ValueError)),
    "sdpa is_causal and mask": (lambda: Q.scaled_dot_product_attention(Q, Q, attn_mask=Tensor.ones(3, 3).bool(),
                                                                       is_causal=True), ArgumentError,
                                (RuntimeError, ValueError)),
    "flip repeated dims": (lambda: X.flip((0, 0)), AxisError, (RuntimeError, ValueError, IndexError)),
    "permute repeated dims": (lambda: X.permute(0, 0), AxisError, (RuntimeError, ValueError, IndexError)),
    "diagonal dim1 = dim2": (lambda: X.diagonal(0, 1, 1), AxisError, (RuntimeError, ValueError, IndexError)),
    "axis out of range": (lambda: X.sum(2), AxisError, (IndexError, ValueError)),
    "repeat with fewer dims": (lambda: X.repeat(2), ShapeError, (RuntimeError, ValueError)),
    "scatter float32 into half": (lambda: X.half().scatter(0, Tensor([[0, 1, 2, 0]]), X), DTypeError,
                                  (RuntimeError, TypeError)),
    "stack((a, b), c)": (lambda: Tensor.stack((X, X), X), TypeError, ()),
    "cat((a, b), c)": (lambda: Tensor.cat([X, X], X), TypeError, ()),
}


@pytest.mark.parametrize("name", CASES)
def test_raises_as_torch(name: str) -> None:
    call, cls, builtins = CASES[name]
    with pytest.raises(cls) as info:
        call()
    assert all(isinstance(info.value, b) for b in builtins), type(info.value).__mro__


def test_positional_dim_after_a_sequence(device: str) -> None:
    """torch.stack(seq, 1) and torch.cat(seq, 1): an int after the sequence is the dim."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = Tensor(a, device=device)
    np.testing.assert_array_equal(Tensor.stack((x, x), 1).numpy(), np.stack((a, a), 1))
    np.testing.assert_array_equal(Tensor.cat([x, x], 1).numpy(), np.concatenate((a, a), 1))


def test_dtype_error_is_a_runtime_error() -> None:
    assert issubclass(DTypeError, RuntimeError) and issubclass(DTypeError, TypeError)
    with pytest.raises(RuntimeError):
        Tensor([1.0]).bitwise_and(1)
    assert Tensor([1], dtype=dtypes.int32).dtype == dtypes.int32
