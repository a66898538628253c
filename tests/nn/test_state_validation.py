"""nn.load on malformed files: every bad safetensors header and every bad or oversized .npz is a StateError that
says what is wrong, never a KeyError/TypeError/RecursionError from inside, never garbage loaded (offsets past the
end, negative, reversed or overlapping spans), and never gigabytes of memory for a small zip bomb."""

from __future__ import annotations

import json
import struct
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from uopviz import nn
from uopviz.nn import StateError
from uopviz.nn import state as statemod

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.array([7, -8], dtype=np.int64)
GOOD: dict[str, Any] = {"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                        "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]}}
DATA = A.tobytes() + B.tobytes()


def safetensors(path: Path, header: Any, data: bytes = DATA, raw: bytes | None = None) -> Path:
    """A .safetensors file with this header (JSON of it, or raw bytes as they are) and data."""
    head = raw if raw is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)
    return path


def with_entry(name: str, **fields: Any) -> dict[str, Any]:
    return {**GOOD, name: {**GOOD.get(name, {}), **fields}}


DEEP = "[" * 100_000 + "]" * 100_000
BAD_HEADERS: list[tuple[str, Any, str]] = [
    ("a list", [1, 2], "header is a list, not an object"),
    ("an entry that is a number", {**GOOD, "c": 5}, '"c" is a number, not an object'),
    ("an entry without offsets", {**GOOD, "c": {"dtype": "F32", "shape": [0]}}, "\"c\" has no 'data_offsets'"),
    ("an entry without a dtype", {**GOOD, "c": {"shape": [0], "data_offsets": [40, 40]}}, "has no 'dtype'"),
    ("an unknown dtype", with_entry("a", dtype="F99"), '"a" has dtype "F99", not one of F64'),
    ("an unsupported dtype", with_entry("a", dtype="BF16"), 'dtype "BF16"'),
    ("a dtype that is a list", with_entry("a", dtype=["F32"]), "dtype \\[\"F32\"\\]"),
    ("a shape that is text", with_entry("a", shape="2x3"), 'shape "2x3", not a list'),
    ("a negative size", with_entry("a", shape=[-1]), "shape \\[-1\\]"),
    ("a boolean size", with_entry("a", shape=[True, 6]), "shape \\[true, 6\\]"),
    ("a fractional size", with_entry("a", shape=[2.0, 3]), "shape \\[2.0, 3\\]"),
    ("too many sizes", with_entry("a", shape=[1] * 65, data_offsets=[0, 4]), "at most 64 integers"),
    ("one offset", with_entry("a", data_offsets=[24]), "data_offsets \\[24\\], not two integers"),
    ("offsets that are text", with_entry("a", data_offsets=["0", "24"]), "not two integers"),
    ("a negative offset (header bytes)", with_entry("a", data_offsets=[-8, 16]), "data_offsets \\[-8, 16\\]"),
    ("a reversed span", with_entry("a", data_offsets=[24, 0]), '"a" ends \\(byte 0\\) before it begins'),
    ("a span past the end", with_entry("b", data_offsets=[24, 48], shape=[3]), "ends at byte 48, past the 40"),
    ("offsets far past the end", with_entry("b", data_offsets=[2**40, 2**40 + 16]), "past the 40 bytes"),
    ("a span shorter than its shape", with_entry("a", data_offsets=[0, 20]), "spans 20 bytes, but shape"),
    ("a span longer than its shape", with_entry("a", shape=[5]), "spans 24 bytes, but shape \\[5\\] of F32 takes 20"),
    ("sizes that multiply past the data", with_entry("a", shape=[2**62] * 40), "more than the 40 bytes of data"),
    ("overlapping spans", {**GOOD, "b": {"dtype": "I64", "shape": [2], "data_offsets": [16, 32]}},
     '"b" begins at byte 16, inside the tensor before it'),
    ("the same span twice", {**GOOD, "c": GOOD["a"]}, "inside the tensor before it"),
    ("a hole", {"a": GOOD["a"], "b": {"dtype": "I32", "shape": [2], "data_offsets": [32, 40]}},
     "leaving bytes 24-32 unused"),
    ("bytes after the tensors", {"a": GOOD["a"]}, "end at byte 24 of the 40 bytes"),
    ("metadata that is not strings", {**GOOD, "__metadata__": {"format": 1}}, "__metadata__ is not an object"),
    ("metadata that is a list", {**GOOD, "__metadata__": ["pt"]}, "__metadata__"),
    ("a dtype nested deep", with_entry("a", dtype=json.loads("[" * 900 + "]" * 900)), '"a" has dtype \\[\\[\\['),
]


@pytest.mark.parametrize(("header", "message"), [(h, m) for _, h, m in BAD_HEADERS],
                         ids=[i for i, _, _ in BAD_HEADERS])
def test_a_bad_safetensors_header_is_a_state_error(tmp_path: Path, header: Any, message: str) -> None:
    path = safetensors(tmp_path / "bad.safetensors", header)
    with pytest.raises(StateError, match=f"^bad.safetensors is not a valid safetensors file: .*{message}"):
        nn.load(path)


@pytest.mark.parametrize(("raw", "message"), [
    (b"{", "header is not JSON"),
    (b'{"a": \xff}', "header is not JSON"),
    (b'{"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, "a": {}}', "a name is repeated"),
    (DEEP.encode(), "header JSON is nested too deeply"),
    (('{"a": {"dtype": ' + DEEP + "}}").encode(), "nested too deeply"),
    (b'{"a": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 24]}}', "not JSON"),
], ids=["cut", "not utf-8", "a name twice", "brackets", "brackets in a dtype", "a 5000-digit size"])
def test_a_header_that_is_not_json_is_a_state_error(tmp_path: Path, raw: bytes, message: str) -> None:
    with pytest.raises(StateError, match=message):
        nn.load(safetensors(tmp_path / "bad.safetensors", None, raw=raw))


def test_a_bad_length_is_a_state_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"\x01\x02\x03")
    with pytest.raises(StateError, match="it has 3 bytes, fewer than the 8"):
        nn.load(path)
    head = json.dumps(GOOD).encode()
    path.write_bytes(struct.pack("<Q", 2**63) + head + DATA)
    with pytest.raises(StateError, match=f"header length {2**63} is more than the {len(head) + 40} bytes after it"):
        nn.load(path)
    safetensors(path, GOOD)
    monkeypatch.setattr(statemod, "SAFETENSORS_MAX_HEADER", 32)
    with pytest.raises(StateError, match="is more than the 32 bytes read"):
        nn.load(path)


def test_a_sound_safetensors_file_loads_in_any_span_order(tmp_path: Path) -> None:
    reordered = {"__metadata__": {"format": "pt"}, "b": GOOD["b"], "empty": {"dtype": "BOOL", "shape": [0, 4],
                 "data_offsets": [24, 24]}, "a": GOOD["a"]}
    out = nn.load(safetensors(tmp_path / "ok.safetensors", reordered, raw=json.dumps(reordered).encode() + b"   "))
    assert list(out) == ["b", "empty", "a"] and out["empty"].shape == (0, 4) and out["empty"].dtype == np.bool_
    np.testing.assert_array_equal(out["a"], A)
    np.testing.assert_array_equal(out["b"], B)
    assert all(v.flags.writeable and v.dtype.isnative for v in out.values())


def test_every_dtype_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    state = {f"{np.dtype(t).name}": (rng.standard_normal((3, 2)) * 50).astype(t) for t in statemod._ST_DTYPES.values()}
    state["scalar"], state["empty"] = np.float32(2.5), np.zeros((0, 3), np.int8)
    for suffix in (".safetensors", ".npz"):
        nn.save(state, tmp_path / f"s{suffix}")
        out = nn.load(tmp_path / f"s{suffix}")
        assert list(out) == list(state)
        for k, v in state.items():
            assert out[k].dtype == np.asarray(v).dtype and out[k].flags.writeable
            np.testing.assert_array_equal(out[k], v)


# ---- .npz ----
def npy_member(z: zipfile.ZipFile, name: str, header: dict[str, Any], data: bytes) -> None:
    with z.open(name, "w") as f:
        np.lib.format.write_array_header_1_0(f, header)
        f.write(data)


def test_a_zip_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """256 MiB of zeros compressed to about 256 KB: refused without reading it (the 3 MB / 3 GB one of the issue
    is the same, 12 times over)."""
    path, n = tmp_path / "bomb.npz", 1 << 28
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z, \
            z.open("x.npy", "w", force_zip64=True) as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (n // 4,)})
        for _ in range(n >> 22):
            f.write(bytes(1 << 22))
    assert path.stat().st_size < n / 500
    tracemalloc.start()
    try:
        with pytest.raises(StateError, match=r"bomb.npz would expand to \d+ bytes, \d+ times its size \(the limit "
                                             r"is 100 times.*pass npz_max_ratio"):
            nn.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


def test_a_compressed_npz_loads_within_the_ratio_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, z=np.zeros((1 << 20,), np.float64), w=np.arange(10.0).reshape(2, 5).T)
    monkeypatch.setattr(statemod, "NPZ_FREE_BYTES", 1 << 20)
    with pytest.raises(StateError, match="would expand to"):
        nn.load(path)
    out = nn.load(path, npz_max_ratio=10_000)
    np.testing.assert_array_equal(out["z"], np.zeros((1 << 20,)))
    np.testing.assert_array_equal(out["w"], np.arange(10.0).reshape(2, 5).T)
    assert out["w"].flags.f_contiguous and out["w"].flags.writeable


F8 = {"descr": "<f8", "fortran_order": False, "shape": (2,)}


@pytest.mark.parametrize(("build", "message"), [
    (lambda z: npy_member(z, "x.npy", {**F8, "shape": (10**9,)}, bytes(16)), "declares 144 bytes, but its header"),
    (lambda z: npy_member(z, "x.npy", {**F8, "shape": (1,)}, bytes(16)), "declares 144 bytes"),
    (lambda z: npy_member(z, "x.npy", {**F8, "shape": (-2, -1)}, bytes(16)), "has shape \\(-2, -1\\)"),
    (lambda z: npy_member(z, "x.npy", {**F8, "descr": "|O"}, bytes(16)), "Python objects, which are never"),
    (lambda z: z.writestr("x.npy", b"\x93NUMPY\x01\x00\xff\x00{'descr'"), "x.npy: "),
    (lambda z: z.writestr("x.npy", b"PK not an array"), "x.npy: "),
    (lambda z: z.writestr("notes.txt", b"hello"), "'notes.txt' is not a .npy array"),
    (lambda z: (npy_member(z, "x.npy", F8, bytes(16)), npy_member(z, "x", F8, bytes(16))), "name twice"),
], ids=["shape past its size", "shape short of its size", "negative sizes", "objects", "cut header",
        "no magic", "not an array", "a name twice"])
def test_a_bad_npz_member_is_a_state_error(tmp_path: Path, build: Any, message: str) -> None:
    path = tmp_path / "bad.npz"
    with zipfile.ZipFile(path, "w") as z:
        build(z)
    with pytest.raises(StateError, match=f"bad.npz is not a valid .npz file: .*{message}"):
        nn.load(path)


def test_a_damaged_npz_is_a_state_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    path.write_bytes(b"not a zip at all")
    with pytest.raises(StateError, match=r"not a valid \.npz file"):
        nn.load(path)
    np.savez(path, a=np.arange(1000.0))
    data = bytearray(path.read_bytes())
    data[400] ^= 0xFF  # inside the array's stored bytes: its CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(StateError, match="Bad CRC-32"):
        nn.load(path)
    path.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(StateError, match=r"not a valid \.npz file"):
        nn.load(path)
