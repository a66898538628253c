"""Where each node came from: the Tensor op and the user's line that built it, carried through every pass.

While a trace records, every node the front-end builds is noted with an `Origin`: the uopviz function the user's
code called (`Tensor.softmax`, `Linear.__call__`) and the user's line that called it; a node built while a
gradient is taken is also marked as the gradient of the forward node being differentiated. Lowering builds nodes
too, but those are not the user's work: they inherit an origin from the node they replace (`carry`), so a Mul deep
in a kernel's last pass still says which Tensor line it computes. Noting costs a walk of the frames per node built,
and nothing while no trace records (the node hook is unset).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, NamedTuple

from uopviz.trace import recorder
from uopviz.uop.ops import GroupOp, Ops, UOp, on_node_built


@dataclass(frozen=True, slots=True)
class Origin:
    """What made a node: `op`, the uopviz function the user's code called (its qualified name); the user's
    `file`, `line` and `function` that called it; `grad_of`, the origin of the forward node whose gradient the
    node is part of (None for a forward node)."""

    op: str
    file: str
    line: int
    function: str
    grad_of: Origin | None = None


Origins = MutableMapping[UOp, Origin]
"""Nodes' origins: a trace's dict (it holds its nodes anyway), a profile's weak map (it holds none)."""

class Carried(NamedTuple):
    """A `same(old, new)` a trace carries in its order of events."""

    old: UOp
    new: UOp


_maps: list[tuple[Origins, Callable[[Carried], None] | None]] = []
"""One per recording trace or profile (innermost last), each with where its `same` calls go (noting's `later`); the
node hook writes into each map."""
_grad_of: Origin | None = None  # the forward node's origin while its gradient rule runs


_UOPVIZ = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_COMPILER = tuple(os.path.join(_UOPVIZ, *part) for part in (
    ("schedule", ""), ("codegen", ""), ("renderer", ""), ("runtime", ""), ("search", ""), ("profile", ""),
    ("trace", ""), ("pipeline.py",), ("compiler.py",), ("parallel.py",), ("lowered_cache.py",), ("realize.py",),
    ("tune.py",), ("tensor", "jit.py")))
"""The compiler's modules (and the trace's own, which rebuilds nodes to replay): a node they build is lowering's
work, whose origin is carried from the node it replaces, not noted where it was built."""


@functools.cache
def _lowers(filename: str) -> bool:
    return os.path.realpath(filename).startswith(_COMPILER)


def _note(u: UOp) -> None:
    """The node hook: note what made `u`, unless the compiler built it (see _COMPILER) or no user code did, or
    every map has it already (a node rebuilt keeps the origin of the op that first built it)."""
    if recorder.lowering() or all(u in m for m, _ in _maps):  # lowering: no walk needed to know
        return
    if (o := made_here()) is not None:
        for m, _ in _maps:
            m.setdefault(u, o if o.grad_of is not None else _continued(o, u, m))


def _continued(o: Origin, u: UOp, m: Origins) -> Origin:
    """`o`, or where the same call builds `u` on a gradient's node (backward reshaping a leaf's gradient to its
    shape, adding two contributions), that gradient's origin: what the call builds from a gradient is still it."""
    for s in u.src:
        if (so := m.get(s)) is not None and so.grad_of is not None and (so.op, so.file, so.line) == (
                o.op, o.file, o.line):
            return so
    return o


def made_here() -> Origin | None:
    """The origin of what the running code builds now: the user's innermost frame and the call it made into
    uopviz; None where the compiler is building it or no frame is the user's (e.g. at import)."""
    f: FrameType | None = sys._getframe(2)
    called: FrameType | None = None
    while f is not None:
        code = f.f_code
        if (path := recorder.user_file(code.co_filename)) is not None:
            return Origin(_op(called or f), path, f.f_lineno, code.co_name, _grad_of)
        if _lowers(code.co_filename):
            return None
        if not code.co_filename.startswith("<frozen"):
            called = f
        f = f.f_back
    return None


def _op(f: FrameType) -> str:
    """The name a user knows the called function by: a method as its object's class's (`Tensor.relu`, not the
    mixin that defines it; a class method's `Tensor.arange` likewise), anything else by its qualified name."""
    code = f.f_code
    first = code.co_varnames[0] if code.co_argcount else None
    if first in ("self", "cls") and first in (local := f.f_locals):
        owner = local[first] if first == "cls" and isinstance(local[first], type) else type(local[first])
        return f"{owner.__name__}.{code.co_name}"
    return code.co_qualname


@contextmanager
def noting(m: Origins, later: Callable[[Carried], None] | None = None) -> Iterator[Origins]:
    """Note the origin of every node built in the block into `m` (as well as into the maps of recordings around
    it). `later`: where a `same` for m goes instead of being carried at once (a trace files it among its events,
    and carries it after the steps recorded before it, which know better)."""
    _maps.append((m, later))
    on_node_built(_note)
    try:
        yield m
    finally:
        del _maps[next(i for i, (x, _) in enumerate(_maps) if x is m)]  # by identity: two maps may hold the same
        on_node_built(_note if _maps else None)


def active() -> bool:
    """Whether origins are being noted (a gradient pass then says whose gradient it builds)."""
    return bool(_maps)


def gradient_of(u: UOp | None) -> None:
    """Mark the nodes built from now on as part of the gradient of forward node `u` (by its origin, where noted;
    None: forward nodes again). A gradient pass calls it per node it differentiates, then with None."""
    global _grad_of
    _grad_of = None if u is None else next((m[u] for m, _ in reversed(_maps) if u in m), None)


def carry(old: UOp, new: UOp, m: Origins) -> None:
    """Give the nodes of `new` (what a step or pass made of `old`) that have no origin one from `old`: the graphs
    are walked in step, each new node paired with the old node in its place (sources by position where a node
    keeps its number of sources, else by op), so a node rebuilt over new leaves (a Buffer become a Param) or
    around a rewritten one keeps its own node's origin; where `new` wraps the node it replaces in a few new ones
    (a Function around a Tuple, a Contiguous around a value), the walk finds it below them, and the wrappers take
    its origin; where the old node is a view of the new one's counterpart (an Index over an Add, pushed down to
    an Add of Indexes), the walk goes on from that counterpart; a new node with no counterpart takes its nearest
    ancestor's. Nodes that have an origin are old
    ones: the walk stops there, so the cost is the new nodes'."""
    stack: list[tuple[UOp | None, UOp, Origin | None]] = [(old, new, m.get(old))]
    seen: set[UOp] = set()
    while stack:
        o, n, inherited = stack.pop()
        if n in seen or n in m:
            continue
        seen.add(n)
        wraps = None
        if o is not None and not _corresponds(o, n):
            if o.op in GroupOp.Movement and (inner := _wrapped(n, o, depth=6, same_op=True)) is not None:
                o = inner  # a view pushed down: n is what o viewed, rebuilt (Index(Add) became Add(Index, Index))
            else:
                wraps = _wrapped(o, n)
        here = (m.get(o) if o is not None else None) or inherited
        if here is not None:
            m[n] = here
        if wraps is not None:
            stack.extend((None, s, here) for s in n.src)  # the wrapper's own new nodes
            stack.append((o, wraps, inherited))  # taken first: the node it wraps, in step with o
            continue
        stack.extend((c, s, here) for c, s in _paired(o, n))


def _paired(o: UOp | None, n: UOp) -> list[tuple[UOp | None, UOp]]:
    """n's sources, each with the source of o in its place: by position where the counts agree, else the first
    unpaired source of o that corresponds (none where o is None or none does)."""
    if o is None:
        return [(None, s) for s in n.src]
    if len(o.src) == len(n.src):
        return list(zip(o.src, n.src))
    free, out = list(o.src), list[tuple[UOp | None, UOp]]()
    for s in n.src:
        k = next((i for i, c in enumerate(free) if _corresponds(c, s)), None)
        out.append((free.pop(k) if k is not None else None, s))
    return out


def _corresponds(o: UOp, n: UOp) -> bool:
    return o.op is n.op and len(o.src) == len(n.src)


def _wrapped(o: UOp, n: UOp, depth: int = 3, same_op: bool = False) -> UOp | None:
    """The node below `n` (at most `depth` sources down, first found breadth-first) that corresponds to `o` (or,
    with `same_op`, that has its op: a value an index was pushed into gains the index's sources)."""
    level, seen = list(n.src), set(n.src)
    for _ in range(depth):
        for u in level:
            if u.op is o.op if same_op else _corresponds(o, u):
                return u
        below: list[UOp] = []
        for u in level:
            for s in u.src:
                if s not in seen:
                    seen.add(s)
                    below.append(s)
        level = below
    return None


def same(old: UOp, new: UOp) -> None:
    """Say that `new` computes what `old` did (a pass's output, Callify's Function over the program, the kernel
    split's kernel per value): `carry` old's origins to new, at once for a profile's map (so they reach a kernel
    while no trace records), in its order of events for a trace's."""
    for m, later in _maps:
        if later is not None:
            later(Carried(old, new))
        else:
            carry(old, new, m)


def of_kernel(ast: UOp, m: Origins) -> Origin | None:
    """What a kernel computes: the origin of the value it stores, seen through the views, indexing and markers
    around it (a gradient's kernel stores a reshape of the gradient, a row's kernel a Contiguous of the matmul
    operand it ends in: the Tensor op is the one below), else the kernel's own (a copy stores nothing)."""
    store = next((u for u in ast.toposort() if u.op is Ops.STORE), None)
    if store is None:
        return m.get(ast)
    v = store.src[1]
    while (v.op in GroupOp.Movement or v.op in GroupOp.Marker) and v.src:
        v = v.src[0]
    return m.get(v) or m.get(ast)


def describe(o: Origin) -> dict[str, Any]:
    """An origin as a trace document's `origins` entry has it, less `grad_of`: {"op", "file", "line", "function",
    "code"} (the frame as recorder.frames() writes it, its source line read now)."""
    return {"op": o.op, **recorder.frame_of(o.file, o.line, o.function)}


def nested(o: Origin | None) -> dict[str, Any] | None:
    """An origin as data with the origin it is a gradient of nested: `describe`'s fields and `grad_of` (the
    same, or None)."""
    return None if o is None else {**describe(o), "grad_of": nested(o.grad_of)}
