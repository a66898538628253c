"""The kernel zoo: named tensor programs with default and small sizes, NumPy references, and work counts.

Each entry is a function of named sizes (M, K, N, ...): `inputs` says what arrays it reads, `program` builds
the lazy Tensor result from them, `reference` computes the same with NumPy, and `flops`/`bytes` count the
useful work (multiply-adds as 2 FLOPs; bytes of the inputs read once and the output written once), which
turn times into GFLOP/s and GB/s. Default sizes are benchmark-sized; small ones suit the PYTHON interpreter
and the tests (odd sizes, so no kernel relies on powers of two).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uopviz.tensor import Tensor

Sizes = dict[str, int]


@dataclass(frozen=True)
class Input:
    """An input array: its shape from the sizes, its dtype, and for integer inputs the exclusive upper bound."""

    shape: Callable[[Sizes], tuple[int, ...]]
    dtype: str = "float32"
    high: Callable[[Sizes], int] | None = None


@dataclass(frozen=True)
class ZooKernel:
    name: str
    doc: str
    default: Sizes
    small: Sizes
    inputs: tuple[Input, ...]
    program: Callable[..., Tensor]
    reference: Callable[..., np.ndarray]
    flops: Callable[[Sizes], int]
    bytes: Callable[[Sizes], int]
    rtol: float = 1e-4
    tags: tuple[str, ...] = field(default=())

    def sizes(self, small: bool = False, **override: int) -> Sizes:
        base = dict(self.small if small else self.default)
        unknown = set(override) - set(base)
        if unknown:
            raise ValueError(f"{self.name} has sizes {', '.join(base)}; unknown: {', '.join(sorted(unknown))}")
        return {**base, **override}

    def arrays(self, sizes: Sizes, seed: int = 0) -> list[np.ndarray]:
        """Random inputs (floats in [-1, 1), integers in [0, high))."""
        rng = np.random.default_rng(seed)
        out = []
        for inp in self.inputs:
            shape = inp.shape(sizes)
            if inp.high is not None:
                out.append(rng.integers(0, inp.high(sizes), size=shape, dtype=np.dtype(inp.dtype)))
            else:
                out.append((rng.random(shape, dtype=np.float32) * 2 - 1).astype(inp.dtype))
        return out

    def tensors(self, arrays: list[np.ndarray], device: str | None = None) -> list[Tensor]:
        return [Tensor(a, device=device).realize() for a in arrays]

    def build(self, sizes: Sizes, device: str | None = None, seed: int = 0) -> tuple[Tensor, list[np.ndarray]]:
        """The lazy result on device and the input arrays it was built from."""
        arrays = self.arrays(sizes, seed)
        return self.program(*self.tensors(arrays, device)), arrays

    def describe(self, sizes: Sizes) -> dict[str, Any]:
        return {"name": self.name, "doc": self.doc, "sizes": sizes, "flops": self.flops(sizes),
                "bytes": self.bytes(sizes), "inputs": [list(i.shape(sizes)) for i in self.inputs]}


def _f32(*dims: int) -> int:
    n = 1
    for d in dims:
        n *= d
    return 4 * n


def _softmax_np(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layernorm(x: Tensor, eps: float = 1e-5) -> Tensor:
    mu = x.mean(-1, keepdim=True)
    xc = x - mu
    return xc * (xc * xc).mean(-1, keepdim=True).add(eps).rsqrt()


def _layernorm_np(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    xc = x - x.mean(-1, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)


def _attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    d = q.shape[-1]
    assert isinstance(d, int), "the zoo's sizes are concrete"
    return ((q @ k.T) * (1 / math.sqrt(d))).softmax(-1) @ v  # a Python float: weak, stays float32


def _attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    return _softmax_np((q @ k.T) / np.float32(math.sqrt(q.shape[-1]))) @ v


def _chain(x: Tensor) -> Tensor:
    """Ten elementwise ops: one fused kernel."""
    y = x * 1.5 + 0.25
    y = y.maximum(-0.5) * y
    y = y - x * 0.75
    y = y / (x * x + 1.0)
    return y.relu() + x


def _chain_np(x: np.ndarray) -> np.ndarray:
    y = x * np.float32(1.5) + np.float32(0.25)
    y = np.maximum(y, np.float32(-0.5)) * y
    y = y - x * np.float32(0.75)
    y = y / (x * x + np.float32(1.0))
    return np.maximum(y, 0) + x


def _conv_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, _, h, wd = x.shape
    co, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, co, h, wd), np.float32)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out


def _prefix_sum(x: Tensor) -> Tensor:
    """SPEC's prefix_sum composition, written out (the sliding-window trick)."""
    n = x.shape[0]
    y = x.pad(((n - 1, 0),)).reshape(1, 2 * n - 1).expand(n + 1, 2 * n - 1)
    y = y.reshape((n + 1) * (2 * n - 1)).shrink(((0, 2 * n * n),)).reshape(n, 2 * n).shrink(((0, n), (0, n)))
    return y.sum(-1)


def _gather_np(t: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return t[idx]


def _scatter_np(t: np.ndarray, idx: np.ndarray, val: np.ndarray) -> np.ndarray:
    out = t.copy()
    np.add.at(out, idx, val)
    return out


ZOO: dict[str, ZooKernel] = {z.name: z for z in [
    ZooKernel("gemm", "C = A @ B (SPEC's gemm composition)", {"M": 1024, "K": 1024, "N": 1024},
              {"M": 15, "K": 12, "N": 10},
              (Input(lambda s: (s["M"], s["K"])), Input(lambda s: (s["K"], s["N"]))),
              lambda a, b: a @ b, lambda a, b: a @ b,
              lambda s: 2 * s["M"] * s["K"] * s["N"], lambda s: _f32(s["M"], s["K"]) + _f32(s["K"], s["N"])
              + _f32(s["M"], s["N"]), tags=("reduce",)),
    ZooKernel("batched_gemm", "C[b] = A[b] @ B[b]", {"B": 8, "M": 256, "K": 256, "N": 256},
              {"B": 3, "M": 6, "K": 9, "N": 5},
              (Input(lambda s: (s["B"], s["M"], s["K"])), Input(lambda s: (s["B"], s["K"], s["N"]))),
              lambda a, b: a @ b, lambda a, b: a @ b,
              lambda s: 2 * s["B"] * s["M"] * s["K"] * s["N"],
              lambda s: _f32(s["B"], s["M"], s["K"]) + _f32(s["B"], s["K"], s["N"]) + _f32(s["B"], s["M"], s["N"]),
              tags=("reduce",)),
    ZooKernel("conv2d", "3x3 convolution, padding 1, NCHW", {"N": 8, "C": 32, "H": 32, "W": 32, "O": 64},
              {"N": 2, "C": 3, "H": 6, "W": 5, "O": 4},
              (Input(lambda s: (s["N"], s["C"], s["H"], s["W"])), Input(lambda s: (s["O"], s["C"], 3, 3))),
              lambda x, w: x.conv2d(w, padding=1), _conv_np,
              lambda s: 2 * s["N"] * s["O"] * s["H"] * s["W"] * s["C"] * 9,
              lambda s: _f32(s["N"], s["C"], s["H"], s["W"]) + _f32(s["O"], s["C"], 9)
              + _f32(s["N"], s["O"], s["H"], s["W"]), tags=("reduce",)),
    ZooKernel("softmax", "softmax over the last axis", {"R": 4096, "C": 1024}, {"R": 6, "C": 33},
              (Input(lambda s: (s["R"], s["C"])),), lambda x: x.softmax(-1), _softmax_np,
              lambda s: 5 * s["R"] * s["C"], lambda s: 2 * _f32(s["R"], s["C"]), tags=("reduce",)),
    ZooKernel("layernorm", "normalize each row to mean 0 and variance 1", {"R": 4096, "C": 1024}, {"R": 6, "C": 33},
              (Input(lambda s: (s["R"], s["C"])),), _layernorm, _layernorm_np,
              lambda s: 7 * s["R"] * s["C"], lambda s: 2 * _f32(s["R"], s["C"]), tags=("reduce",)),
    ZooKernel("attention", "one head: softmax(Q K^T / sqrt(d)) V", {"S": 512, "D": 64}, {"S": 12, "D": 6},
              tuple(Input(lambda s: (s["S"], s["D"])) for _ in range(3)), _attention, _attention_np,
              lambda s: 4 * s["S"] * s["S"] * s["D"] + 5 * s["S"] * s["S"], lambda s: 4 * _f32(s["S"], s["D"]),
              tags=("reduce",)),
    ZooKernel("prefix_sum", "cumulative sum (SPEC's sliding-window prefix_sum)", {"N": 4096}, {"N": 33},
              (Input(lambda s: (s["N"],)),), _prefix_sum, np.cumsum,
              lambda s: s["N"] * s["N"], lambda s: 2 * _f32(s["N"]), rtol=1e-3, tags=("reduce",)),
    ZooKernel("gather", "rows T[idx] (SPEC's one-hot gather)", {"K": 1024, "D": 256, "E": 64},
              {"K": 7, "D": 6, "E": 4},
              (Input(lambda s: (s["K"], s["E"])), Input(lambda s: (s["D"],), "int32", lambda s: s["K"])),
              lambda t, i: t.gather(i, 0), _gather_np,
              lambda s: 2 * s["K"] * s["D"] * s["E"], lambda s: _f32(s["K"], s["E"]) + _f32(s["D"])
              + _f32(s["D"], s["E"]), tags=("reduce",)),
    ZooKernel("scatter_add", "T[idx[i]] += val[i] (SPEC's one-hot scatter_add)", {"K": 4096, "D": 4096},
              {"K": 7, "D": 12},
              (Input(lambda s: (s["K"],)), Input(lambda s: (s["D"],), "int32", lambda s: s["K"]),
               Input(lambda s: (s["D"],))),
              lambda t, i, v: t.scatter_add(i, v, 0), _scatter_np,
              lambda s: 2 * s["K"] * s["D"], lambda s: 2 * _f32(s["K"]) + 2 * _f32(s["D"]), tags=("reduce",)),
    ZooKernel("sum", "sum of all elements", {"N": 16 * 1024 * 1024}, {"N": 1000},
              (Input(lambda s: (s["N"],)),), lambda x: x.sum(), lambda x: x.sum(dtype=np.float32),
              lambda s: s["N"], lambda s: _f32(s["N"]), rtol=1e-3, tags=("reduce",)),
    ZooKernel("max", "maximum of each row", {"R": 4096, "C": 4096}, {"R": 6, "C": 33},
              (Input(lambda s: (s["R"], s["C"])),), lambda x: x.max(-1), lambda x: x.max(-1),
              lambda s: s["R"] * s["C"], lambda s: _f32(s["R"], s["C"]) + _f32(s["R"]), tags=("reduce",)),
    ZooKernel("elementwise", "a chain of ten elementwise ops (one fused kernel)", {"N": 16 * 1024 * 1024},
              {"N": 1000}, (Input(lambda s: (s["N"],)),), _chain, _chain_np,
              lambda s: 10 * s["N"], lambda s: 2 * _f32(s["N"])),
]}


def get(name: str) -> ZooKernel:
    if name not in ZOO:
        raise KeyError(f"no zoo kernel {name!r}; the zoo has: {', '.join(ZOO)}")
    return ZOO[name]
