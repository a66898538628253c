"""Lowered kernels kept on disk, so that a new process skips lowering a kernel any process lowered before (issue 29:
a warm first step). The C compiler's libraries are kept already, but under their source, which only lowering makes:
without this, a warm first GPT step spent nearly all its time lowering kernels whose libraries were on disk.

An entry's key is everything lowering reads: the kernel graph and the device's Target (each in a canonical form,
the same in every process), the opts, and the code that lowers (a digest of uopviz's own source files: an edit to
any pass is a miss, never a stale kernel). A graph or target holding a value without a canonical form is not kept.

Entries are JSON (the Kernel's fields, its Linear program as rows of op, sources, and arg and tag as the trace
format encodes them: uopviz/trace/serialize.py), never pickles: an entry is data, read without running anything it
names. They live in `<cache>/lowered/`, created and read as the libraries beside it are (runtime/trust.py:
CacheTrustError where another user could have written one). A kernel is kept only where its entry reads back as the
very same kernel; a damaged or unreadable entry is a miss; a cache that cannot be written keeps nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from uopviz.codegen.opt import Opt
from uopviz.dtype import dtypes
from uopviz.pipeline import source_of
from uopviz.runtime.cpu import cache_dir
from uopviz.runtime.trust import open_checked, trusted_dir
from uopviz.search.executor import flatten
from uopviz.target import Kernel, Target
from uopviz.trace.errors import TraceFormatError
from uopviz.trace.serialize import decode, encode
from uopviz.uop.ops import Ops, UOp

FORMAT = 2
"""The entries' layout; bump it when Kernel's fields or their JSON form change."""


class _NoCanonicalForm(Exception):
    pass


def key(ast: UOp, device: str, opts: Sequence[Opt], target: Target) -> str | None:
    """The entry's name for ast lowered with opts for target on device; None where ast or target holds a value
    with no canonical form (such a kernel is lowered every time, as before)."""
    try:
        return _name([_canon(o) for o in opts], ast, device, target)
    except _NoCanonicalForm:
        return None


def _name(what: Any, ast: UOp, device: str, target: Target) -> str | None:
    """The name of what is kept about ast on device for target (JSON `what` tells entries of one graph apart);
    _NoCanonicalForm where ast or target has no canonical form, None where the code has no digest."""
    if not _code_digest():
        return None
    text = json.dumps([_code_digest(), what, _graph(ast, device, target)], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@lru_cache(maxsize=8)
def _graph(ast: UOp, device: str, target: Target) -> str:
    """What an entry's name reads besides the code and `what`, as JSON: kept for the last few graphs, since a
    kernel's heuristic opts and its lowering are named back to back (flattening its graph twice was 3% of a cold GPT
    step)."""
    return json.dumps([FORMAT, device, _canon(target), [_canon(row) for row in flatten(ast)]], separators=(",", ":"))


def heuristic_opts(ast: UOp, device: str, target: Target, choose: Callable[[], tuple[Opt, ...]]) \
        -> tuple[Opt, ...]:
    """The heuristic's opts for ast on device, as any process chose them before (kept beside the lowered kernels,
    keyed alike: a function of the graph, the target and uopviz's code), else `choose()`'s, kept for next time.
    Choosing them runs the passes before Optimize and the heuristic: 0.7 s of a warm GPT step's first call, which
    then needs the opts only to find its kernels lowered."""
    try:
        name = _name("heuristic opts", ast, device, target)
    except _NoCanonicalForm:
        name = None
    if name is not None and (data := _read(f"{name}.opts.json")) is not None:
        try:
            return tuple(Opt.from_json(o) for o in json.loads(data))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError):
            pass  # damaged: chosen again
    opts = choose()
    if name is not None:
        text = json.dumps([o.to_json() for o in opts], separators=(",", ":"))
        if tuple(Opt.from_json(o) for o in json.loads(text)) == opts:
            _write(f"{name}.opts.json", text)
    return opts


def load(name: str, target: Target) -> Kernel | None:
    """The kernel kept under name for target, None where there is none (or it cannot be read back); its source
    rendered again from its Linear program, never read from the entry."""
    data = _read(f"{name}.json")
    if data is None:
        return None
    try:
        return _kernel(json.loads(data), target)
    except (TraceFormatError, AttributeError, IndexError, KeyError, TypeError, ValueError):
        return None  # damaged, or written by other code under the same name: lowered again


def _read(file: str) -> bytes | None:
    """The bytes of the cache's lowered/<file>, read through checked descriptors; None where it is not there or
    cannot be read."""
    folder = cache_dir() / "lowered"
    try:
        at = open_checked(folder, directory=True)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        with os.fdopen(open_checked(folder / file, dir_fd=at), "rb") as f:
            return f.read()
    except OSError:
        return None
    finally:
        os.close(at)


def fields_of(kernel: Kernel) -> dict[str, Any]:
    """The kernel's fields, its Linear program as flat rows: picklable without recursion (what a build worker
    sends back to the process that asked for it)."""
    fields = {f.name: getattr(kernel, f.name) for f in dataclasses.fields(Kernel)}
    fields["linear"] = flatten(kernel.linear)
    return fields


def store(name: str, kernel: Kernel, target: Target) -> None:
    """Keep a kernel under name (atomically: a reader sees the whole entry or none); nothing where the cache cannot
    be written or the entry would not read back as this kernel. Only a kernel whose bounds were checked
    (uopviz.uop.bounds) is kept: one read back is compiled without checking them again."""
    try:
        text = json.dumps(_document(kernel), separators=(",", ":"), allow_nan=False)
        back = _kernel(json.loads(text), target, kernel.source)
    except (TraceFormatError, KeyError, TypeError, ValueError):
        return
    if back != kernel or back.linear is not kernel.linear or back.meta != kernel.meta:
        return  # a value the JSON form does not rebuild exactly
    _write(f"{name}.json", text)


def _write(file: str, text: str) -> None:
    """text kept as the cache's lowered/<file>, atomically (a reader sees all of it or none); nothing where the
    cache cannot be written (a full disk: it is made again next time)."""
    try:
        folder = trusted_dir(cache_dir() / "lowered")
        fd, tmp = tempfile.mkstemp(suffix=".tmp", dir=folder)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        os.replace(tmp, folder / file)
    except OSError:
        pass
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _document(k: Kernel) -> dict[str, Any]:
    """A kernel as JSON data (what an entry holds)."""
    nodes = k.linear.toposort()
    at = {u: i for i, u in enumerate(nodes)}
    return {"format": FORMAT, "name": k.name, "params": [d.name for d in k.params],
            "global_size": k.global_size, "local_size": k.local_size, "vars": list(k.vars), "threads": k.threads,
            "opts": [o.to_json() for o in k.meta.get("opts", ())],
            "linear": [[u.op.value, [at[s] for s in u.src], encode(u.arg), encode(u.tag)] for u in nodes]}


def _kernel(doc: dict[str, Any], target: Target, source: str | None = None) -> Kernel:
    """The kernel of a document (_document's) for target, its source rendered from its Linear program;
    TraceFormatError, KeyError, TypeError or ValueError where it is not one. `source`: the source of the kernel the
    document was made from, which store() gives when it checks the round trip: rendering is a function of the
    Linear program, name and params that the check compares, so rendering it again (a third of storing) proves
    nothing more."""
    if doc["format"] != FORMAT:
        raise ValueError(f"an entry of format {doc['format']!r}")
    built: list[UOp] = []
    for op, src, arg, tag in doc["linear"]:
        built.append(UOp(Ops(op), tuple(built[i] for i in src), decode(arg), decode(tag)))

    def size(v: list[int] | None) -> tuple[int, ...] | None:
        return None if v is None else tuple(int(x) for x in v)
    name, params = str(doc["name"]), tuple(dtypes.from_name(d) for d in doc["params"])
    text = source if source is not None else source_of(built[-1], name, params, target)
    return Kernel(name, built[-1], text, params,
                  size(doc["global_size"]), size(doc["local_size"]), tuple(str(v) for v in doc["vars"]),
                  int(doc["threads"]), {"opts": tuple(Opt.from_json(o) for o in doc["opts"])})


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
