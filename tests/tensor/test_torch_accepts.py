"""Forms torch accepts that uopviz refused: sequence indices, squeeze of a larger axis, int linspace, bitwise ops
with a Python int of the tensor's width but the other signedness; each against torch on every device."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_peer import same_as_torch

from uopviz import Tensor, dtypes
from uopviz.dtype import DTypeError

A = np.random.default_rng(0).standard_normal((3, 5))


def test_list_and_tuple_indices(device: str) -> None:
    same_as_torch(lambda x: x[[0]], lambda x: x[[0]], [A], device)
    same_as_torch(lambda x: x[(0,),], lambda x: x[(0,),], [A], device)
    same_as_torch(lambda x: x[(2, 0, 2), 1:4], lambda x: x[(2, 0, 2), 1:4], [A], device)
    idx = np.array([0, 4])
    same_as_torch(lambda x: x[[1, 1], Tensor(idx, device=device)], lambda x: x[[1, 1], torch.tensor(idx)], [A],
                  device)


def test_squeeze_keeps_larger_axes(device: str) -> None:
    a = A.reshape(3, 1, 5)
    same_as_torch(lambda x: x.squeeze(0), lambda x: x.squeeze(0), [a], device)
    same_as_torch(lambda x: x.squeeze((0, 1)), lambda x: x.squeeze((0, 1)), [a], device)
    same_as_torch(lambda x: x.squeeze(-1), lambda x: x.squeeze(-1), [a], device)


def test_int_linspace(device: str) -> None:
    for args in [(5, 10, 3), (-1.5, 3, 4), (0, 100, 7), (10, -10, 6)]:
        got = Tensor.linspace(*args, dtype=dtypes.int32, device=device)
        want = torch.linspace(*args, dtype=torch.int32)
        assert got.dtype == dtypes.int32
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_bitwise_with_an_int_of_the_other_signedness(device: str) -> None:
    a = np.array([1, -2, 0x7FFFFFFF, -(2 ** 31)], np.int32)
    x, t = Tensor(a, device=device), torch.tensor(a)
    for k in [0xFFFFFFFF, 0x80000000, 0xF0F0F0F0]:
        for got, want in [(x | k, t | k), (x & k, t & k), (x ^ k, t ^ k), (k | x, k | t)]:
            assert got.dtype == dtypes.int32
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    u = np.array([1, 200], np.uint8)
    np.testing.assert_array_equal((Tensor(u, device=device) | -1).numpy(), (torch.tensor(u) | -1).numpy())


def test_sdpa_grouped_query_heads(device: str) -> None:
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((2, 4, 3, 5)), rng.standard_normal((2, 2, 6, 5)), rng.standard_normal((2, 2, 6, 5))
    same_as_torch(lambda q, k, v: q.scaled_dot_product_attention(k, v, enable_gqa=True),
                  lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                  [q, k, v], device)


def test_size_changing_bitcast(device: str) -> None:
    a = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    x = Tensor(a, device=device)
    for dt, np_dt in [(dtypes.uint8, np.uint8), (dtypes.int16, np.int16)]:
        got = x.add(1).bitcast(dt)
        assert got.shape == (2, 3 * 4 // np.dtype(np_dt).itemsize)
        np.testing.assert_array_equal(got.numpy(), (a + 1).view(np_dt))
        np.testing.assert_array_equal(got.bitcast(dtypes.float32).numpy(), a + 1)
    b = np.arange(8, dtype=np.int32).reshape(2, 4)
    np.testing.assert_array_equal(Tensor(b, device=device).bitcast(dtypes.int64).numpy(), b.view(np.int64))
    with pytest.raises(DTypeError):
        x.bitcast(dtypes.float64)  # 12 bytes a row do not make 8-byte items


def test_sum_and_pow_dtypes_as_torch(device: str) -> None:
    for dt, tdt in [(dtypes.int8, torch.int8), (dtypes.int32, torch.int32), (dtypes.bool, torch.bool)]:
        a = np.array([[100, 27, 1], [120, 99, 1]])
        x, t = Tensor(a, device=device).cast(dt), torch.tensor(a).to(tdt)
        for f in (lambda v: v.sum(), lambda v: v.sum(1), lambda v: v.prod(0), lambda v: v.cumsum(1)):
            got, want = f(x), f(t)
            assert got.dtype == dtypes.int64 and want.dtype == torch.int64
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    i = Tensor([1, 2, 3], dtype=dtypes.int32, device=device)
    ti = torch.tensor([1, 2, 3], dtype=torch.int32)
    for e in (2.0, 2.5, 2, 0.5):
        got, want = i ** e, ti ** e
        assert got.dtype == dtypes.from_numpy(want.numpy().dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
