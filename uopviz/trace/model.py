"""A trace: contexts of passes of steps over a shared node table; to and from the versioned JSON document.

A live trace (from `record()`) holds its recorder's raw event log and turns it into ids, node entries and
rule text only when read, so recording stays cheap; a loaded trace is the same objects built from a file.
"""

from __future__ import annotations

import codecs
import importlib.metadata
import json
import mmap
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from uopviz.trace.format import FORMAT, VERSION, TraceFormatError, check_document, check_size, parse
from uopviz.trace.kernels import check_kernels
from uopviz.trace.nodes import Entry, Node, NodeTable, Replay
from uopviz.trace.origins import Carried, Origin, carry, describe, noting
from uopviz.trace.recorder import Context, PassBegin, PassEnd, Profiled, Recorder
from uopviz.trace.steps import TraceStep
from uopviz.uop.ops import UOp
from uopviz.uop.pattern import Rule, current_recorder, set_recorder


@dataclass(frozen=True)
class TraceRule:
    location: str
    text: str


@dataclass(eq=False, slots=True)
class TracePass:
    """One named graph_rewrite. `parent` is the index (in the same context) of the pass it ran inside."""

    name: str
    stage: str | None
    depth: int
    parent: int | None
    input: str
    output: str | None = None
    error: str | None = None
    time_ns: int = 0
    steps: list[TraceStep] = field(default_factory=list)
    _table: NodeTable = field(default_factory=NodeTable, repr=False, kw_only=True)
    _roots: list[str] = field(default_factory=list, repr=False, kw_only=True)
    _replay: Replay | None = field(default=None, repr=False, kw_only=True)  # the steps replayed so far
    _folded: list[int] | None = field(default=None, repr=False, kw_only=True)

    def graph_at(self, k: int) -> str:
        """Root id of the graph after the first k steps (0: the input; len(steps): the output, replayed).

        Replay works on ids alone: each step replaces its match by its replacement and rebuilds the parents,
        and a node some earlier step rewrote is rewritten wherever a later replacement brings it back, as the
        rewriter's memo does (NodeTable.substitute).
        """
        if not 0 <= k <= len(self.steps):
            raise IndexError(f"pass {self.name!r} has {len(self.steps)} steps; graph_at takes 0..{len(self.steps)}")
        roots = self._roots or [self.input]
        if len(roots) <= k:
            replay = self._replay = self._replay or self._table.replay(self.input)
            while len(roots) <= k:
                s = self.steps[len(roots) - 1]
                roots.append(replay.step(s.match, s.replacement))
            if len(roots) > len(self.steps):
                self._replay = None  # every graph is replayed: its node sets are not needed again
        self._roots = roots
        return roots[k]

    def folded(self) -> list[int]:
        """The steps (1..len(steps)) after which the replayed graph is the one before them: the rewriter met a node
        an earlier step had rewritten. Replays the whole pass the first time (then kept)."""
        if self._folded is None:
            self.graph_at(len(self.steps))
            self._folded = [k for k in range(1, len(self.steps) + 1) if self._roots[k] == self._roots[k - 1]]
        return self._folded

    def renamed(self, k: int) -> dict[str, str]:
        """Step k's effect on the graph after k - 1 steps (1 <= k <= len(steps)): each of its nodes that the step
        gives another id (the match, every ancestor rebuilt over the replacement, and nodes an earlier step
        rewrote that the replacement brings back), mapped to that id."""
        if not 1 <= k <= len(self.steps):
            raise IndexError(f"pass {self.name!r} has {len(self.steps)} steps; renamed takes 1..{len(self.steps)}")
        before = self.graph_at(k - 1)
        memo: dict[str, str] = {}
        self._table.substitute(before, {s.match: s.replacement for s in self.steps[:k]}, memo)
        old = self._table.reachable(before)
        return {a: b for a, b in memo.items() if a != b and a in old}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "stage": self.stage, "depth": self.depth, "parent": self.parent,
                "input": self.input, "output": self.output, "error": self.error, "time_ns": self.time_ns,
                "steps": [s.to_dict() for s in self.steps]}


@dataclass(eq=False)
class TraceContext:
    name: str
    kind: str
    passes: list[TracePass] = field(default_factory=list)
    opts: list[dict[str, Any]] = field(default_factory=list)  # a kernel's OptOps (Opt.to_json), in applied order
    stack: list[dict[str, Any]] = field(default_factory=list)  # the user's frames that made it (recorder.frames)


class Trace:
    """Everything recorded in one `uopviz.trace()` block, or loaded from a file.

    `contexts` -> `passes` -> `steps` hold node ids; `node(id)` is the entry, `uop(id)` rebuilds the UOp.
    """

    def __init__(self) -> None:
        self._table = NodeTable()
        self._rules: list[TraceRule] = []
        self._contexts: list[TraceContext] = []
        self._uopviz_version: str | None = None  # a loaded trace keeps its writer's version
        self._log: list[Any] = []  # the live recorder's events, not yet turned into ids
        self._open: list[tuple[TraceContext, int, int, UOp]] = []  # passes begun, not ended: context, index, start,
        # input
        self._ctx_of: dict[Context, TraceContext] = {}
        self._rule_of: dict[Rule, int] = {}
        self._rule_index: dict[TraceRule, int] = {}
        self._profiles: list[dict[str, Any]] = []
        self._made: dict[UOp, Origin] = {}  # a live trace's origins of nodes (origins.noting; carried as it syncs)
        self._origins: list[dict[str, Any]] = []  # a loaded trace's `origins` and `node_origins`
        self._node_origins: dict[str, int] = {}
        self._origin_stamp = (0, 0)  # the sizes of _made and the node table when the two above were made

    # ---- reading ----
    @property
    def contexts(self) -> list[TraceContext]:
        self._sync()
        return self._contexts

    @property
    def passes(self) -> list[TracePass]:
        """Every pass, context by context, in the order they began."""
        return [p for c in self.contexts for p in c.passes]

    @property
    def profiles(self) -> list[dict[str, Any]]:
        """The `uopviz.profile()` blocks that ended while this trace recorded, as documents (docs/trace-format.md;
        `uopviz.profile.Profile.from_dict` makes one a Profile again)."""
        self._sync()
        return self._profiles

    @property
    def rules(self) -> list[TraceRule]:
        self._sync()
        return self._rules

    @property
    def nodes(self) -> dict[str, Entry]:
        """The node table: id -> entry, a read-only mapping {op, dtype, shape, arg, src, tag} (device optional)."""
        self._sync()
        return self._table.entries

    def node(self, nid: str) -> dict[str, Any]:
        """The entry of a stored node, or of a node built by `graph_at` replay, as a dict of its own."""
        return self._entry(nid).to_dict()

    def _entry(self, nid: str) -> Entry:
        self._sync()
        try:
            return self._table.entry(nid)
        except KeyError:
            raise KeyError(f"node id {nid!r} is not in this trace") from None

    def toposort(self, root: str) -> list[str]:
        """Ids of the graph under root, sources before their users (the order a layered layout wants)."""
        self._entry(root)
        return self._table.toposort(root)

    def nodes_of(self, root: str) -> set[str]:
        """Ids of every node in the graph under root."""
        self._entry(root)
        return self._table.reachable(root)

    def origin(self, nid: str) -> dict[str, Any] | None:
        """What made a node: {"op", "file", "line", "function", "code", "grad_of"} (grad_of: the same for the
        forward node whose gradient it is part of, else None), or None where the trace does not know (a trace
        recorded before uopviz noted origins, a node made outside the user's code)."""
        origins, index = self._origin_table()
        k = index.get(nid)
        if k is None:
            return None
        out: dict[str, Any] | None = None
        for entry in reversed(_chain(origins, k)):
            out = {**entry, "grad_of": out}
        return out

    def _origin_table(self) -> tuple[list[dict[str, Any]], dict[str, int]]:
        """The trace's `origins` and `node_origins` (a live trace's made from its noted origins now)."""
        self._sync()
        stamp = (len(self._made), len(self._table.ids))
        if self._made and stamp != self._origin_stamp:
            self._origin_stamp = stamp
            ids, at = self._table.ids, dict[Origin, int]()
            origins: list[dict[str, Any]] = []

            def index(o: Origin) -> int:
                if (k := at.get(o)) is None:
                    grad_of = None if o.grad_of is None else index(o.grad_of)
                    k = at[o] = len(origins)
                    origins.append({**describe(o), "grad_of": grad_of})
                return k

            self._node_origins = {ids[u]: index(o) for u, o in self._made.items() if u in ids}
            self._origins = origins
        return self._origins, self._node_origins

    def uop(self, nid: str) -> UOp:
        """Rebuild the UOp of a node id."""
        self._entry(nid)
        return self._table.uop(nid)

    def forget_uops(self) -> None:
        """Drop the UOps `uop` rebuilt: a reader that rebuilt every kernel (a check of them all) need not keep them
        for the trace's life."""
        self._table.forget_uops()

    # ---- the document ----
    def to_dict(self) -> dict[str, Any]:
        self._sync()
        return {
            "format": FORMAT, "version": VERSION, "uopviz_version": self._uopviz_version or _uopviz_version(),
            "nodes": {k: v.to_dict() for k, v in self._table.entries.items()},
            "rules": [{"location": r.location, "text": r.text} for r in self._rules],
            "contexts": [{"name": c.name, "kind": c.kind, "opts": c.opts, **({"stack": c.stack} if c.stack else {}),
                          "passes": [p.to_dict() for p in c.passes]} for c in self._contexts],
            **({"profiles": self._profiles} if self._profiles else {}),
            **self._origin_fields(),
        }

    def _origin_fields(self) -> dict[str, Any]:
        origins, node_origins = self._origin_table()
        return {"origins": origins, "node_origins": node_origins} if node_origins else {}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, separators=None if indent else (",", ":"), allow_nan=False)

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    def to_html(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> str:
        """One self-contained HTML page showing this trace read-only, offline (uopviz.widget.to_html), written to
        `path` when given."""
        from uopviz.widget import to_html
        return to_html(self, path, **kwargs)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """A trace that is a notebook cell's value shows itself as the uopviz widget."""
        from uopviz.widget import show
        return show(self)._repr_mimebundle_(**kwargs)

    @classmethod
    def from_dict(cls, doc: Any) -> Trace:
        """A trace from a document; TraceFormatError if it is malformed or of a newer version."""
        check_document(doc)
        return cls._from_checked(doc)

    @classmethod
    def from_json(cls, text: str | bytes) -> Trace:
        return cls._from_checked(parse(text))

    @classmethod
    def _from_checked(cls, doc: dict[str, Any]) -> Trace:
        tr = cls()
        tr._uopviz_version = doc["uopviz_version"]
        tr._table = NodeTable({k: v if type(v) is Node else _node(v) for k, v in doc["nodes"].items()})
        tr._rules = [TraceRule(r["location"], r["text"]) for r in doc["rules"]]
        for c in doc["contexts"]:
            passes = [TracePass(p["name"], p["stage"], p["depth"], p["parent"], p["input"], p["output"],
                                p["error"], p["time_ns"],
                                [s if type(s) is TraceStep else _step(s) for s in p["steps"]], _table=tr._table)
                      for p in c["passes"]]
            tr._contexts.append(TraceContext(c["name"], c["kind"], passes, list(c.get("opts", [])),
                                             list(c.get("stack", []))))
        tr._profiles = list(doc.get("profiles", []))
        tr._origins, tr._node_origins = list(doc.get("origins", [])), dict(doc.get("node_origins", {}))
        check_kernels(tr._contexts, tr.uop)
        tr.forget_uops()  # the check rebuilt every kernel; a reader rebuilds the few it opens again
        return tr

    # ---- turning recorded events into ids ----
    def _sync(self) -> None:
        if not self._log:
            return
        events = self._log[:]
        del self._log[:len(events)]
        for ev in events:
            if type(ev) is tuple:
                self._step(*ev)
            elif isinstance(ev, PassBegin):
                self._begin(ev)
            elif isinstance(ev, Profiled):
                self._profiles.append(ev.doc)
            elif isinstance(ev, Carried):
                carry(ev.old, ev.new, self._made)
            else:
                self._end(ev)
        for c, tc in self._ctx_of.items():
            tc.name, tc.opts = c.name, c.opts

    def _begin(self, ev: PassBegin) -> None:
        ctx = self._ctx_of.get(ev.context)
        if ctx is None:
            ctx = self._ctx_of[ev.context] = TraceContext(ev.context.name, ev.context.kind, stack=ev.context.stack)
            self._contexts.append(ctx)
        parent = self._open[-1][1] if self._open and self._open[-1][0] is ctx else None
        self._table.add(ev.root)
        ctx.passes.append(TracePass(ev.name, ev.stage, len(self._open), parent, self._table.ids[ev.root],
                                    _table=self._table))
        self._open.append((ctx, len(ctx.passes) - 1, ev.t_ns, ev.root))

    def _end(self, ev: PassEnd) -> None:
        ctx, i, t0, root = self._open.pop()
        p = ctx.passes[i]
        if ev.output is not None:
            carry(root, ev.output, self._made)  # the parents a rewrite rebuilt over its replacements
            self._table.add(ev.output)
            p.output = self._table.ids[ev.output]
        p.error, p.time_ns = ev.error, ev.t_ns - t0

    def _step(self, rule: Rule, matched: UOp, replacement: UOp, time_ns: int) -> None:
        carry(matched, replacement, self._made)
        added = self._table.add(matched) + self._table.add(replacement)
        ctx, i, _, _ = self._open[-1]
        ids = self._table.ids
        step = TraceStep(self._rule_id(rule), ids[matched], ids[replacement], time_ns, tuple(added))
        ctx.passes[i].steps.append(step)

    def _rule_id(self, rule: Rule) -> int:
        i = self._rule_of.get(rule)
        if i is None:
            key = TraceRule(rule.location, rule.text)
            i = self._rule_index.setdefault(key, len(self._rules))
            if i == len(self._rules):
                self._rules.append(key)
            self._rule_of[rule] = i
        return i


def _node(entry: dict[str, Any]) -> Node:
    """A checked document's entry as a Node (the parse makes them Nodes; a document from to_dict holds dicts)."""
    node = Node.from_mapping(entry)
    assert node is not None, "check_document passed an entry without the fields of one"
    return node


def _step(step: dict[str, Any]) -> TraceStep:
    """A checked document's step as a TraceStep (the parse makes them TraceSteps; to_dict's document has dicts)."""
    made = TraceStep.from_mapping(step)
    assert made is not None, "check_document passed a step without the fields of one"
    return made


def _chain(origins: list[dict[str, Any]], k: int | None) -> list[dict[str, Any]]:
    """Origin k of a trace's `origins` and the forward origins it is a gradient of, innermost first (a loop of
    grad_of indices in a damaged file ends the chain)."""
    out, seen = [], set()
    while k is not None and k not in seen and 0 <= k < len(origins):
        seen.add(k)
        entry = origins[k]
        out.append({key: v for key, v in entry.items() if key != "grad_of"})
        k = entry.get("grad_of")
    return out


def _uopviz_version() -> str:
    v = getattr(sys.modules.get("uopviz"), "__version__", None)
    if isinstance(v, str):
        return v
    try:
        return importlib.metadata.version("uopviz")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@contextmanager
def record() -> Iterator[Trace]:
    """Record every graph_rewrite run inside the block; the previous recorder is restored on exit. Inside another
    recording, both record the block."""
    tr = Trace()
    outer = current_recorder()
    prev = set_recorder(Recorder((tr._log, *(outer.logs if isinstance(outer, Recorder) else ()))))
    try:
        with noting(tr._made, tr._log.append):
            yield tr
    finally:
        set_recorder(prev)


def _decoded(f: BinaryIO, size: int) -> str:
    """The file's text, decoded from a mapping of the file rather than bytes read: the parse builds its objects
    after the file's bytes are gone, and freeing bytes of that size (a block of its own) made glibc's malloc serve
    blocks up to that size from its heap from then on, where the parse's dict tables fragmented it: a 19.8 MB
    trace held 13 MB more."""
    if size == 0:
        return ""
    with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
        return codecs.decode(view, json.detect_encoding(mm[:4]))


def load(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file written by `Trace.save`; TraceFormatError if it is not one this uopviz reads (or is
    larger than it reads: format.max_bytes)."""
    with open(path, "rb") as f:
        check_size(size := os.fstat(f.fileno()).st_size, str(path))
        try:
            text = _decoded(f, size)
        except UnicodeDecodeError as e:
            raise TraceFormatError(f"not a uopviz trace: invalid JSON ({e})") from None
    doc = parse(text)
    del text
    return Trace._from_checked(doc)

