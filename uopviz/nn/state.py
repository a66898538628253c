"""Saving and loading state: safetensors or NumPy .npz, never pickle (loading runs no code).

safetensors is written and read here directly (its format is an 8-byte little-endian header length, a JSON header
naming each tensor's dtype, shape and byte range, then the raw little-endian bytes), so no dependency is needed;
.npz is read with allow_pickle=False.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from uopviz.tensor import Tensor, assign_all
from uopviz.tensor.util import ShapeError, fmt

_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
              "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8,
              "BOOL": np.bool_}
_ST_NAMES = {np.dtype(v): k for k, v in _ST_DTYPES.items()}


class StateError(ValueError):
    """A state file or dict that does not fit: unknown format, missing or unexpected names, wrong shapes."""


def save(state: Mapping[str, Tensor | Any], path: str | Path) -> None:
    """Write a state dict (name -> Tensor or array) as safetensors (.safetensors) or NumPy (.npz)."""
    arrays = {k: np.ascontiguousarray(v.numpy() if isinstance(v, Tensor) else np.asarray(v)) for k, v in state.items()}
    p = Path(path)
    if p.suffix == ".npz":
        np.savez(p, **arrays)
    elif p.suffix == ".safetensors":
        header: dict[str, Any] = {}
        offset = 0
        for k, a in arrays.items():
            if a.dtype not in _ST_NAMES:
                raise StateError(f"safetensors cannot hold {k} of dtype {a.dtype}")
            header[k] = {"dtype": _ST_NAMES[a.dtype], "shape": list(a.shape),
                         "data_offsets": [offset, offset + a.nbytes]}
            offset += a.nbytes
        head = json.dumps(header, separators=(",", ":")).encode()
        head += b" " * (-len(head) % 8)
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", len(head)) + head)
            for a in arrays.values():
                f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    else:
        raise StateError(f"cannot tell the format of {p.name}: name it .safetensors or .npz")


def load(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of a .safetensors or .npz file, by name."""
    p = Path(path)
    if p.suffix == ".npz":
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    if p.suffix != ".safetensors":
        raise StateError(f"cannot tell the format of {p.name}: name it .safetensors or .npz")
    data = p.read_bytes()
    if len(data) < 8:
        raise StateError(f"{p.name} is not a safetensors file (too short)")
    (n,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8:8 + n])
    except (ValueError, UnicodeDecodeError):
        raise StateError(f"{p.name} is not a safetensors file (bad header)") from None
    out = {}
    for k, info in header.items():
        if k == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dt = np.dtype(_ST_DTYPES[info["dtype"]]).newbyteorder("<")
        raw = np.frombuffer(data[8 + n + begin:8 + n + end], dtype=dt)
        out[k] = raw.reshape(info["shape"]).astype(dt.newbyteorder("="))
    return out


def load_into(tensors: Mapping[str, Tensor], state: Mapping[str, Any], strict: bool = True) -> None:
    """Assign each state entry to the tensor of its name, all in one schedule per device."""
    missing, unexpected = sorted(set(tensors) - set(state)), sorted(set(state) - set(tensors))
    if strict and (missing or unexpected):
        raise StateError(f"state names do not match the model's: missing {missing}, unexpected {unexpected} (pass "
                         "strict=False to load only the names both have)")
    targets, values = [], []
    for k, t in tensors.items():
        if k not in state:
            continue
        v = state[k]
        v = v if isinstance(v, Tensor) else Tensor(np.asarray(v), device=t.device)
        if v.shape != t.shape:
            raise ShapeError(f"state {k!r} has shape {fmt(v.shape)}, the model's tensor {fmt(t.shape)}")
        targets.append(t)
        values.append(v.to(t.device))
    assign_all(targets, values)
