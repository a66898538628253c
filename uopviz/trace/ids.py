"""Stable content ids for UOps.

A node's id is the first 16 hex digits of the SHA-256 of the canonical JSON (sorted keys, no whitespace,
ASCII escapes) of `[op, dtype, arg, src ids, tag]`. It depends only on content, never on id(), hash() or
iteration order, so the same UOp gets the same id in every process, and an id can be recomputed from a
stored node entry without the compiler (trace replay does that for rebuilt parents).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from uopviz.trace.serialize import encode
from uopviz.uop.ops import UOp, toposort

ID_HEX_DIGITS = 16


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
"""One encoder for every id: json.dumps with options builds a new one per call (a third of saving a trace)."""


def content_id(entry: Mapping[str, Any]) -> str:
    """The id of a node entry (its shape, being derived, is not part of it)."""
    return parted_id(id_parts(entry), entry["src"])


def id_parts(entry: Mapping[str, Any]) -> tuple[str, str]:
    """The canonical JSON of an entry before and after its sources: a node rebuilt over other sources (trace
    replay) has the id `parted_id(parts, src)`, the same as content_id's, without encoding its arg again."""
    return f"[{canonical(entry['op'])},{canonical(entry['dtype'])},{canonical(entry['arg'])},", \
        f",{canonical(entry['tag'])}]"


def canonical(v: Any) -> str:
    """The canonical JSON of an encoded value (the encoder's spelling): the common ones (null, booleans, ints,
    plain ASCII strings, lists of ints) written here, the rest by the encoder, whose every call builds a C encoder
    (most of what naming 77k nodes of a GPT step cost)."""
    t = type(v)
    if v is None:
        return "null"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return int.__repr__(v)
    if t is str and v.isascii() and v.isprintable() and '"' not in v and "\\" not in v:
        return f'"{v}"'
    if t is list and all(type(x) is int for x in v):
        return f"[{','.join(map(int.__repr__, v))}]"
    return _CANONICAL.encode(v)


def parted_id(parts: tuple[str, str], src: list[str]) -> str:
    """content_id of the entry `parts` came from, with these sources (hex ids need no escaping)."""
    payload = parts[0] + '["' + '","'.join(src) + '"]' + parts[1] if src else parts[0] + "[]" + parts[1]
    return hashlib.sha256(payload.encode("ascii")).hexdigest()[:ID_HEX_DIGITS]


def base_entry(u: UOp, src_ids: list[str]) -> dict[str, Any]:
    """A node's entry without its shape, in the document's key order."""
    try:
        dtype: str | None = u.dtype.name
    except Exception:  # an ill-formed node still gets an id; it just has no dtype
        dtype = None
    return {"op": u.op.value, "dtype": dtype, "arg": encode(u.arg), "src": src_ids, "tag": encode(u.tag)}


def node_ids(roots: Iterable[UOp], memo: dict[UOp, str] | None = None) -> dict[UOp, str]:
    """Ids of every node reachable from roots, filled into memo (iterative: deep graphs are fine)."""
    memo = {} if memo is None else memo
    for u in toposort(roots, gate=lambda n: n not in memo):
        if u not in memo:
            memo[u] = content_id(base_entry(u, [memo[s] for s in u.src]))
    return memo


def node_id(u: UOp) -> str:
    """The content id of one UOp."""
    return node_ids([u])[u]
