"""SPEC's "Common ops as compositions", written exactly as SPEC writes them, run on Tensor against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from tensor_testing import check, skip_big

from uopviz import Tensor


# ---- SPEC.md, verbatim except for the device argument of Tensor(1) ----
def gemm(A, B):
  M,K = A.shape; _,N = B.shape  # noqa: E702
  return (A.reshape(M,K,1) * B.reshape(1,K,N)).sum(1)

def prefix_sum(T):
  n = T.shape[0]
  x = T.pad((n-1, 0))                                  # (2n-1,)
  x = x.reshape(1,2*n-1).expand(n+1,2*n-1)             # tile
  x = x.reshape((n+1)*(2*n-1)).shrink_to(2*n*n)        # trim
  x = x.reshape(n,2*n).shrink_to(n,n)                  # windows
  return x.sum(-1)                                     # reduce

def arange(n, device): return prefix_sum(Tensor(1, device=device).reshape(1).expand(n)) - 1

def gather(T, idx):
  K = T.shape[0]
  pos = arange(K, T.device).reshape(K, 1)                    # (K, 1)
  mask = (pos == idx.reshape(1, -1)).cast(T.dtype)           # (K, D)
  return (T.reshape(K, 1) * mask).sum(0)                     # (D,)

def scatter_add(T, idx, val):
  K, D = T.shape[0], idx.shape[0]
  pos = arange(K, T.device).reshape(K, 1)                    # (K, 1)
  mask = (pos == idx.reshape(1, D)).cast(T.dtype)            # (K, D)
  return T + (mask * val.reshape(1, D)).sum(1)               # (K,)
# ---- end of SPEC ----


RNG = np.random.default_rng(5)


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (3, 7, 5), (33, 17, 9), (100, 100, 100)])
def test_gemm(m: int, k: int, n: int, device: str) -> None:
    skip_big(device, m, k, n)
    a, b = RNG.random((m, k), np.float32), RNG.random((k, n), np.float32)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    check(gemm(ta, tb), a @ b, rtol=1e-5)
    check(ta @ tb, a @ b, rtol=1e-5)


@pytest.mark.parametrize("n", [1, 7, 33, 1000])
def test_prefix_sum_and_arange(n: int, device: str) -> None:
    skip_big(device, n)
    a = RNG.integers(-9, 9, n).astype(np.int32)
    check(prefix_sum(Tensor(a, device=device)), np.cumsum(a))
    check(arange(n, device), np.arange(n))
    check(Tensor.arange(n, device=device), np.arange(n))


@pytest.mark.parametrize(("k", "d"), [(1, 1), (7, 5), (33, 40)])
def test_gather_and_scatter_add(k: int, d: int, device: str) -> None:
    t = RNG.random(k).astype(np.float32)
    idx = RNG.integers(0, k, d).astype(np.int32)
    val = RNG.random(d).astype(np.float32)
    tt, ti, tv = Tensor(t, device=device), Tensor(idx, device=device), Tensor(val, device=device)
    check(gather(tt, ti), t[idx])
    check(tt.gather(ti), t[idx])
    want = t.copy()
    np.add.at(want, idx, val)
    check(scatter_add(tt, ti, tv), want, rtol=1e-6)
    check(tt.scatter_add(ti, tv), want, rtol=1e-6)
