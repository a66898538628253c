"""Lowered kernels kept on disk, so that a new process skips lowering a kernel any process lowered before (issue 29:
a warm first step). The C compiler's libraries are kept already, but under their source, which only lowering makes:
without this, a warm first GPT step spent nearly all its time lowering kernels whose libraries were on disk.

An entry's key is everything lowering reads: the kernel graph and the device's Target (each in a canonical form,
the same in every process), the opts, and the code that lowers (a digest of uopviz's own source files: an edit to
any pass is a miss, never a stale kernel). A graph or target holding a value without a canonical form is not kept.

Entries are pickles of the Kernel's fields (its Linear program as flat rows) in `<cache>/lowered/`, created and
read as the libraries beside it are (runtime/trust.py: CacheTrustError where another user could have written one),
so loading one trusts no more than loading a library there does. A damaged or unreadable entry is a miss; a cache
that cannot be written keeps nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import json
import os
import pickle
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from uopviz.codegen.opt import Opt
from uopviz.runtime.cpu import cache_dir
from uopviz.runtime.trust import open_checked, trusted_dir
from uopviz.search.executor import flatten, unflatten
from uopviz.target import Kernel, Target
from uopviz.uop.ops import UOp

FORMAT = 1
"""The entries' layout; bump it when Kernel's fields or their pickled form change."""


class _NoCanonicalForm(Exception):
    pass


def key(ast: UOp, device: str, opts: Sequence[Opt], target: Target) -> str | None:
    """The entry's name for ast lowered with opts for target on device; None where ast or target holds a value
    with no canonical form (such a kernel is lowered every time, as before)."""
    if not _code_digest():
        return None
    try:
        text = json.dumps([FORMAT, _code_digest(), device, _canon(target), [_canon(o) for o in opts],
                           [_canon(row) for row in flatten(ast)]], separators=(",", ":"))
    except _NoCanonicalForm:
        return None
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def load(name: str) -> Kernel | None:
    """The kernel kept under name, None where there is none (or it cannot be read back)."""
    folder = cache_dir() / "lowered"
    try:
        at = open_checked(folder, directory=True)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        with os.fdopen(open_checked(folder / f"{name}.pickle", dir_fd=at), "rb") as f:
            fields = pickle.load(f)
        fields["linear"] = unflatten(fields["linear"])
        return Kernel(**fields)
    except FileNotFoundError:
        return None
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, IndexError, KeyError,
            TypeError, ValueError):  # damaged, or written by other code under the same name: lowered again
        return None
    finally:
        os.close(at)


def fields_of(kernel: Kernel) -> dict[str, Any]:
    """The kernel's fields, its Linear program as flat rows: picklable without recursion (what a build worker
    sends back, and what an entry holds)."""
    fields = {f.name: getattr(kernel, f.name) for f in dataclasses.fields(Kernel)}
    fields["linear"] = flatten(kernel.linear)
    return fields


def store(name: str, fields: dict[str, Any]) -> None:
    """Keep a kernel's fields_of under name (atomically: a reader sees the whole entry or none); nothing where the
    cache cannot be written. Only a kernel whose bounds were checked (uopviz.uop.bounds) is kept: one read back is
    compiled without checking them again."""
    try:
        folder = trusted_dir(cache_dir() / "lowered")
        fd, tmp = tempfile.mkstemp(suffix=".tmp", dir=folder)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(fields, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, folder / f"{name}.pickle")
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # a full disk, or a field that does not pickle: the kernel is lowered again next time
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@cache
def _code_digest() -> str:
    """A digest of uopviz's Python source (read once per process: a few ms); "" where the source is not files to
    read (imported from an archive), which keeps nothing rather than risk another version's kernels."""
    root = Path(__file__).parent
    h = hashlib.sha256()
    files = sorted(root.rglob("*.py"))
    for path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest() if files else ""


def _canon(v: Any) -> Any:
    """v as JSON that no other value has, and every process writes alike (sets sorted, objects by their class's
    full name); _NoCanonicalForm for a value whose state this cannot see (a function, an object with slots)."""
    t = type(v)
    if v is None or t in (bool, int, str):
        return v
    name = f"{t.__module__}.{t.__qualname__}"
    if t is float:
        return {"float": repr(v)}
    if isinstance(v, enum.Enum):
        return {"enum": [name, v.name]}
    if t in (tuple, list):
        return {t.__name__: [_canon(x) for x in v]}
    if isinstance(v, tuple):  # a NamedTuple arg
        return {"tuple": [name, [_canon(x) for x in v]]}
    if t in (frozenset, set):
        return {"set": sorted(json.dumps(_canon(x), separators=(",", ":")) for x in v)}
    if t is dict:
        return {"dict": sorted([json.dumps(_canon(k), separators=(",", ":")), _canon(x)] for k, x in v.items())}
    if t is bytes:
        return {"bytes": v.hex()}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {"dataclass": [name, {f.name: _canon(getattr(v, f.name)) for f in dataclasses.fields(v)}]}
    if hasattr(v, "__dict__") and not callable(v) and not any(c.__dict__.get("__slots__") for c in t.__mro__):
        return {"object": [name, _canon(vars(v))]}  # a Dialect: its class (in the code digest) is its state
    raise _NoCanonicalForm(name)
