"""Content ids are the SHA-256 of the canonical JSON of a node entry, whoever writes it: ids.canonical writes the
common values itself, and must spell each exactly as the encoder does (ids are stable across versions and files)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from uopviz.trace import ids

ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)

VALUES: list[Any] = [
    None, True, False, 0, -1, 7, 2**70, -(2**64), 1.5, -0.0, 1e300, "", "Add", "a b", 'say "hi"', "back\\slash",
    "tab\there", "new\nline", "\x7f", "é", "日本", "\u2028", [], [1, 2, -3], [True, 1], [1.0, 2], [[1], [2]],
    ["a", 1], {"ConstArg": {"value": 1, "dtype": {"dtype": "int32"}}}, {"b": 1, "a": [None, "x"]},
    {"float": "nan"}, [2**64, 0],
]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_canonical_is_the_encoders_spelling(value: Any) -> None:
    assert ids.canonical(value) == ENCODER.encode(value)


@pytest.mark.parametrize("arg", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_content_id_is_the_hash_of_the_canonical_entry(arg: Any) -> None:
    entry = {"op": "Const", "dtype": "int32", "arg": arg, "src": ["0123456789abcdef", "fedcba9876543210"],
             "tag": arg}
    payload = ENCODER.encode([entry["op"], entry["dtype"], arg, entry["src"], arg])
    assert ids.content_id(entry) == hashlib.sha256(payload.encode("ascii")).hexdigest()[:16]
    assert ids.content_id({**entry, "src": [], "dtype": None}) == hashlib.sha256(
        ENCODER.encode(["Const", None, arg, [], arg]).encode("ascii")).hexdigest()[:16]
