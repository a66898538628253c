"""Saving and loading state: safetensors or NumPy .npz, never pickle (loading runs no code).

safetensors is written and read here directly (its format is an 8-byte little-endian header length, a JSON header
naming each tensor's dtype, shape and byte range, then the raw little-endian bytes), so no dependency is needed;
.npz is read with allow_pickle=False.
"""

from __future__ import annotations

import json
import math
import os
import struct
import zipfile
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.lib.format as npformat

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
        np.savez(p, allow_pickle=True, **arrays)  # given, so an entry of that name is refused, not taken for it
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


SAFETENSORS_MAX_HEADER = 100_000_000
"""The largest safetensors header read (bytes), as the reference implementation allows."""
NPZ_MAX_RATIO = 100.0
"""How many times its size on disk an .npz may expand to by default: arrays saved by np.savez expand 1x, real
weights compressed by np.savez_compressed about 1-3x, a zip bomb about 1000x."""
NPZ_FREE_BYTES = 64 << 20
"""An .npz expanding to no more than this is never refused, whatever its ratio (small files of zeros)."""
_MAX_DIMS = 64  # NumPy's limit


def load(path: str | Path, *, npz_max_ratio: float = NPZ_MAX_RATIO) -> dict[str, np.ndarray]:
    """The arrays of a .safetensors or .npz file, by name; a malformed file is a StateError saying what is wrong.

    npz_max_ratio: an .npz whose arrays would take more than this many times its size on disk (and more than
    NPZ_FREE_BYTES) is refused before anything is expanded, so a small zip bomb cannot take the machine's memory.
    """
    p = Path(path)
    if p.suffix == ".npz":
        return _load_npz(p, npz_max_ratio)
    if p.suffix != ".safetensors":
        raise StateError(f"cannot tell the format of {p.name}: name it .safetensors or .npz")
    return _load_safetensors(p)


def _load_safetensors(p: Path) -> dict[str, np.ndarray]:
    """Every tensor, once the header is checked whole: known dtypes, spans in the file that exactly fit their
    shapes and cover the data without holes or overlaps (as the reference implementation requires)."""
    def bad(why: str) -> StateError:
        return StateError(f"{p.name} is not a valid safetensors file: {why}")

    with open(p, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise bad(f"it has {size} bytes, fewer than the 8 of its header length")
        (n,) = struct.unpack("<Q", f.read(8))
        if n > min(size - 8, SAFETENSORS_MAX_HEADER):
            raise bad(f"its header length {n} is more than the {size - 8} bytes after it" if n > size - 8 else
                      f"its header length {n} is more than the {SAFETENSORS_MAX_HEADER} bytes read")
        entries = _st_header(f.read(n), size - 8 - n, bad)
        out = {}
        for name, dt, shape, begin, end in entries:
            f.seek(8 + n + begin)
            out[name] = np.frombuffer(f.read(end - begin), dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
    return out


def _st_header(text: bytes, data_size: int, bad: Callable[[str], StateError]
               ) -> list[tuple[str, np.dtype[Any], tuple[int, ...], int, int]]:
    """(name, dtype, shape, begin, end) of each tensor in the header's order, each field checked."""
    try:
        header = json.loads(text, object_pairs_hook=_no_repeats)
    except RecursionError:
        raise bad("its header JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError, a repeated name, bytes that are not text
        raise bad(f"its header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise bad(f"its header is {_kind(header)}, not an object")
    meta = header.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad("__metadata__ is not an object of strings")
    entries = []
    for name, info in header.items():
        if not isinstance(info, dict):
            raise bad(f"{_short(name)} is {_kind(info)}, not an object")
        for key in ("dtype", "shape", "data_offsets"):
            if key not in info:
                raise bad(f"{_short(name)} has no {key!r}")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str) or dtype not in _ST_DTYPES:
            raise bad(f"{_short(name)} has dtype {_short(dtype)}, not one of {', '.join(_ST_DTYPES)}")
        if not (isinstance(shape, list) and len(shape) <= _MAX_DIMS and all(_is_count(d) for d in shape)):
            raise bad(f"{_short(name)} has shape {_short(shape)}, not a list of at most {_MAX_DIMS} integers >= 0")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_count(o) for o in offsets)):
            raise bad(f"{_short(name)} has data_offsets {_short(offsets)}, not two integers >= 0")
        begin, end = offsets
        dt = np.dtype(_ST_DTYPES[dtype]).newbyteorder("<")
        if begin > end:
            raise bad(f"{_short(name)} ends (byte {end}) before it begins (byte {begin})")
        if end > data_size:
            raise bad(f"{_short(name)} ends at byte {end}, past the {data_size} bytes of data")
        if (need := _nbytes(shape, dt.itemsize, data_size)) != end - begin:
            raise bad(f"{_short(name)} spans {end - begin} bytes, but shape {_short(shape)} of {dtype} takes "
                      + (str(need) if need <= data_size else f"more than the {data_size} bytes of data"))
        entries.append((name, dt, tuple(shape), begin, end))
    at = 0
    for name, _, _, begin, end in sorted(entries, key=lambda e: (e[3], e[4])):
        if begin != at:
            raise bad(f"{_short(name)} begins at byte {begin}, " + (f"inside the tensor before it (ending at {at})"
                                                               if begin < at else f"leaving bytes {at}-{begin} unused"))
        at = end
    if at != data_size:
        raise bad(f"its tensors end at byte {at} of the {data_size} bytes of data")
    return entries


def _load_npz(p: Path, max_ratio: float) -> dict[str, np.ndarray]:
    """Every array of an .npz, each member's declared size checked against its array header and the whole
    against max_ratio before anything is expanded; a member is read only up to its declared size."""
    def bad(why: str) -> StateError:
        return StateError(f"{p.name} is not a valid .npz file: {why}")

    try:
        with zipfile.ZipFile(p) as z:
            members = z.infolist()
            names = [m.filename.removesuffix(".npy") for m in members]
            if len(set(names)) != len(names):
                raise bad("it holds an array name twice")
            if (odd := next((m.filename for m in members if not m.filename.endswith(".npy")), None)) is not None:
                raise bad(f"its member {odd!r} is not a .npy array")
            total, size = sum(m.file_size for m in members), p.stat().st_size
            if total > max(max_ratio * size, NPZ_FREE_BYTES):
                raise StateError(f"{p.name} would expand to {total} bytes, {total / size:.0f} times its "
                                 f"size (the limit is {max_ratio:g} times, at least {NPZ_FREE_BYTES} bytes): pass "
                                 "npz_max_ratio to load it if it is trusted")
            return {name: _npz_member(z, m, bad) for name, m in zip(names, members, strict=True)}
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as e:
        raise bad(str(e)) from None  # RuntimeError: encrypted; NotImplementedError: an unknown compression


def _npz_member(z: zipfile.ZipFile, m: zipfile.ZipInfo, bad: Callable[[str], StateError]) -> np.ndarray:
    """One member's array, read into a buffer of exactly the size its header and its declared size agree on."""
    with z.open(m) as f:
        assert isinstance(f, zipfile.ZipExtFile)  # a member opened to read: it has readinto
        try:
            version = npformat.read_magic(f)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"npy format version {version} is not supported")
            read = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
            shape, fortran, dtype = read(f)
        except ValueError as e:
            raise bad(f"{m.filename}: {e}") from None
        if dtype.hasobject:
            raise bad(f"{m.filename} holds Python objects, which are never unpickled")
        if len(shape) > _MAX_DIMS or any(d < 0 for d in shape):
            raise bad(f"{m.filename} has shape {shape}, not at most {_MAX_DIMS} sizes >= 0")
        nbytes = math.prod(shape) * dtype.itemsize
        if f.tell() + nbytes != m.file_size:
            raise bad(f"{m.filename} declares {m.file_size} bytes, but its header and array of shape "
                      f"{shape} of {dtype} take {f.tell() + nbytes}")
        buf = bytearray(nbytes)
        if f.readinto(buf) != nbytes:
            raise bad(f"{m.filename} ends before its {nbytes} bytes of data")
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict, refusing a name given twice (which tensor would it be?)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError(f"a name is repeated in {_short([k for k, _ in pairs])}")
    return out


def _nbytes(shape: list[int], itemsize: int, limit: int) -> int:
    """The bytes of an array of shape, or limit + 1 once past limit (a header's huge sizes are not multiplied out)."""
    if 0 in shape:
        return 0
    n = itemsize
    for d in shape:
        n *= d
        if n > limit:
            return limit + 1
    return n


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _kind(x: Any) -> str:
    if x is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(x), "a number")


def _short(x: Any) -> str:
    """x as JSON in at most 40 characters, for a message."""
    try:
        text = json.dumps(x)
    except RecursionError:  # parsed near the recursion limit, written back from deeper in the stack
        return "a value nested too deeply"
    return text if len(text) <= 40 else text[:37] + "..."


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


def get_state_dict(obj: Any, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor of obj under its dotted name (tinygrad's get_state_dict): a Module's state as state_dict()
    names it, the Tensors of a dict, list or tuple, or of any object's attributes."""
    from uopviz.nn.module import Module, walk
    plain = not isinstance(obj, (Tensor, Module, dict, list, tuple)) and hasattr(obj, "__dict__")
    return dict(walk(vars(obj) if plain else obj, prefix + "." if prefix else ""))


def get_parameters(obj: Any) -> list[Tensor]:
    """The distinct Tensors of get_state_dict(obj), buffers included, as tinygrad's get_parameters."""
    return list(dict.fromkeys(get_state_dict(obj).values()))


def load_state_dict(model: Any, state: Mapping[str, Any], strict: bool = True) -> None:
    """Copy each named array or Tensor into the model's tensor of that name, in place (Module.load_state_dict for
    any object get_state_dict walks)."""
    load_into(get_state_dict(model), state, strict)
