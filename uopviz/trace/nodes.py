"""The node table of a trace: content id -> node entry, each distinct node stored once.

It is filled from UOps while a live trace is serialized, read from JSON when a trace is loaded, and can
rebuild UOps from entries or replay a rewrite on ids alone (so a saved trace replays without the compiler).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from uopviz.trace.ids import base_entry, content_id, id_parts, parted_id
from uopviz.trace.serialize import decode
from uopviz.uop.ops import Ops, UOp, toposort

_FIELDS = ("op", "dtype", "shape", "arg", "src", "tag", "device")
_ABSENT: Any = object()  # the value of a field the entry does not have ("device" in traces saved before it)


class Node(Mapping[str, Any]):
    """A node entry, read-only: {op, dtype, shape, arg, src, tag} and an optional device, read as a mapping.

    A dict per node made the node table most of a loaded trace's memory (a GPT step's 94k entries took 25 MB as
    dicts of 272 bytes; a Node is 88), so entries are these, built while the JSON is parsed (the parse's
    object_hook, by `from_mapping`: a dict freed after the parse leaves its memory to the process). `to_dict` is
    the plain dict a document (and Trace.node) gives. Code that knows it has a Node reads the fields as attributes,
    faster than the mapping.
    """

    __slots__ = _FIELDS
    op: str
    dtype: str | None
    shape: list[int | str] | None
    arg: Any
    src: tuple[str, ...]  # a tuple: a list's separate item array cost a loaded trace 3 MB per 100k nodes
    tag: Any
    device: str | list[str] | None

    def __init__(self, op: str, dtype: str | None, shape: list[int | str] | None, arg: Any, src: tuple[str, ...],
                 tag: Any, device: str | list[str] | None = _ABSENT) -> None:
        self.op, self.dtype, self.shape, self.arg, self.src, self.tag, self.device = (
            op, dtype, shape, arg, src, tag, device)

    @classmethod
    def from_mapping(cls, obj: Mapping[str, Any]) -> Node | None:
        """The node of an object with an entry's fields (device optional; fields no version wrote are dropped),
        else None, left to the format check to report (which checks the values' types too)."""
        try:
            src = obj["src"]
            return cls(obj["op"], obj["dtype"], obj["shape"], obj["arg"], tuple(src) if type(src) is list else src,
                       obj["tag"], obj.get("device", _ABSENT))
        except KeyError:
            return None

    def with_src(self, src: tuple[str, ...]) -> Node:
        """The same node over other sources."""
        return Node(self.op, self.dtype, self.shape, self.arg, src, self.tag, self.device)

    def to_dict(self) -> dict[str, Any]:
        d = {"op": self.op, "dtype": self.dtype, "shape": self.shape, "arg": self.arg, "src": list(self.src),
             "tag": self.tag}
        if self.device is not _ABSENT:
            d["device"] = self.device
        return d

    def __getitem__(self, key: str) -> Any:
        if key in _FIELDS and (v := getattr(self, key)) is not _ABSENT:
            return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_FIELDS if self.device is not _ABSENT else _FIELDS[:-1])

    def __len__(self) -> int:
        return len(_FIELDS) - (self.device is _ABSENT)

    def __repr__(self) -> str:
        return f"Node({self.to_dict()!r})"


Entry = Node


class NodeTable:
    """Entries by id, plus the ids of the UOps already stored (a stored node's sources are always stored)."""

    def __init__(self, entries: dict[str, Entry] | None = None) -> None:
        self.entries: dict[str, Entry] = {} if entries is None else entries
        self.ids: dict[UOp, str] = {}
        # nodes that exist only in replayed graphs (parents rebuilt around a replacement); never saved
        self._derived: dict[str, Entry] = {}
        self._uops: dict[str, UOp] = {}
        self._parts: dict[str, tuple[str, str]] = {}  # id_parts of the nodes replay rebuilt

    def add(self, root: UOp) -> list[str]:
        """Store the graph under root; return the ids that were not stored before, sources first.

        Descent stops at stored nodes, so the cost is the number of new nodes, not the size of the graph.
        """
        ids, new = self.ids, list[str]()
        for u in toposort([root], gate=lambda n: n not in ids):
            if u in ids:
                continue
            e = base_entry(u, [ids[s] for s in u.src])
            nid = content_id(e)
            device = _device(u)
            entry = Node(e["op"], e["dtype"], self._shape(u, new), e["arg"], tuple(e["src"]), e["tag"],
                         _ABSENT if device is None else device)
            ids[u] = nid
            if nid not in self.entries:
                self.entries[nid] = entry
                new.append(nid)
        return new

    def _shape(self, u: UOp, new: list[str]) -> list[int | str] | None:
        """The shape as ints and node ids (symbolic dims are stored too), or None where it is not defined."""
        try:
            shape = u.shape
        except Exception:  # a node outside SPEC's shape rules (e.g. mid-rewrite) simply has no shape
            return None
        out: list[int | str] = []
        for d in shape:
            if isinstance(d, UOp):
                if d not in self.ids:
                    new.extend(self.add(d))
                out.append(self.ids[d])
            else:
                out.append(d)
        return out

    def forget_uops(self) -> None:
        """Drop the UOps `uop` rebuilt (and the properties they derived): a loaded trace's kernel check rebuilds
        every kernel once, and keeping them held a sixth of a big trace's memory."""
        self._uops.clear()

    def entry(self, nid: str) -> Entry:
        """A stored or replay-derived entry; KeyError for an unknown id."""
        e = self.entries.get(nid)
        return e if e is not None else self._derived[nid]

    def toposort(self, root: str, stop: str | None = None) -> list[str]:
        """Ids reachable from root, sources first, root last (iterative); nothing below `stop` is visited."""
        seen, out = {root}, []
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack:
            nid, i = stack.pop()
            src = () if nid == stop else self.entry(nid).src
            if i < len(src):
                stack.append((nid, i + 1))
                if src[i] not in seen:
                    seen.add(src[i])
                    stack.append((src[i], 0))
            else:
                out.append(nid)
        return out

    def reachable(self, root: str) -> set[str]:
        """Every id in the graph under root."""
        seen, stack = {root}, [root]
        while stack:
            for s in self.entry(stack.pop()).src:
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return seen

    def uop(self, nid: str) -> UOp:
        """Rebuild the UOp of an id (hash-consing makes it the very object recorded, while that is alive)."""
        if (hit := self._uops.get(nid)) is not None:
            return hit
        for i in self.toposort(nid):
            if i not in self._uops:
                e = self.entry(i)
                src = tuple(self._uops[s] for s in e.src)
                self._uops[i] = UOp(Ops(e.op), src, decode(e.arg), decode(e.tag))
        return self._uops[nid]

    def substitute(self, root: str, rewrites: dict[str, str], memo: dict[str, str] | None = None,
                   fresh: AbstractSet[str] = frozenset()) -> str:
        """The graph under root with every rewritten node replaced as the rewriter would see it; its root id.

        `rewrites` maps each node a step of the pass has matched so far to its replacement (the later step wins).
        A node that is a key is replaced by its replacement, itself brought up to date the same way; any other
        node gets its sources brought up to date, and a rebuilt node that is itself a key is replaced in turn.
        That is the rewriter's memo: a rule's result that holds a node rewritten earlier (anywhere in the graph)
        gets that node's rewrite at once, without a step of its own, so replaying only the latest step would
        lose it and leave the next match nowhere in the graph.

        A rebuilt node keeps its op, dtype, shape, arg and tag (rewrites preserve dtype and shape) and gets the
        content id of its new sources, so it is the node the rewriter built whenever that node exists. `memo`, when
        given, is filled with the id every node visited has afterwards. Nodes in `fresh` are up to date with
        `rewrites` already: kept as they are, not visited (Replay).
        """
        memo = {} if memo is None else memo
        active: set[str] = set()  # on the stack: a replacement that reaches its own match is left as it is
        stack: list[tuple[str, int, str | None]] = [(root, 0, None)]
        while stack:
            nid, phase, via = stack.pop()
            if nid in memo or nid in fresh:
                continue
            if phase == 0:
                active.add(nid)
                target = rewrites.get(nid)
                if target is not None and target not in active:
                    stack.append((nid, 1, target))
                    stack.append((target, 0, None))
                else:
                    stack.append((nid, 2, None))
                    stack.extend((s, 0, None) for s in self.entry(nid).src
                                 if s not in memo and s not in active and s not in fresh)
            elif phase == 1:
                memo[nid] = memo.get(via, via)  # type: ignore[arg-type, assignment]  # phase 1 has a via: a fresh target is itself
                active.discard(nid)
            elif phase == 2:
                e = self.entry(nid)
                src = tuple([memo.get(s, s) for s in e.src])
                rid = nid if src == e.src else self._rebuilt(nid, e, src)
                target = rewrites.get(rid) if rid != nid else None
                if target is not None and target not in active:
                    stack.append((nid, 1, target))
                    stack.append((target, 0, None))
                else:
                    memo[nid] = rid
                    active.discard(nid)
        return memo.get(root, root)

    def replay(self, root: str) -> Replay:
        """A replay of rewrite steps over the graph under root, one step at a time (see Replay)."""
        return Replay(self, root)

    def _rebuilt(self, nid: str, e: Entry, src: tuple[str, ...]) -> str:
        """The id of node nid (entry e) over other sources, its entry kept as a derived one where it is new."""
        parts = self._parts.get(nid)
        if parts is None:
            parts = self._parts[nid] = id_parts(e)
        rid = parted_id(parts, list(src))
        self._parts[rid] = parts  # the same op, dtype, arg and tag
        if rid not in self.entries and rid not in self._derived:
            self._derived[rid] = e.with_src(src)
        return rid


class Replay:
    """A pass's graphs step by step, each from the one before at the cost of what the step changes.

    `substitute` of the whole graph for every step made opening a GPT training step's trace take 20-50 s (17,000
    steps over graphs of thousands of nodes). A node is fresh while it is up to date with the rewrites so far: the
    input's nodes at first, every node a substitute returns, and their sources. A step's match makes every node
    with the match below it stale (its ancestors, found through the parent links of every node seen, reachable or
    not, so none is missed); substitute then keeps fresh nodes as they are and rebuilds only the rest it reaches.
    A step whose match was never seen cannot be in the graph and changes nothing.
    """

    def __init__(self, table: NodeTable, root: str) -> None:
        self.table, self.root = table, root
        self.rewrites: dict[str, str] = {}
        self.parents: dict[str, list[str]] = {}
        self.fresh: set[str] = set()
        self._add(root)

    def step(self, match: str, replacement: str) -> str:
        """The root after one more step (match rewritten to replacement)."""
        self.rewrites[match] = replacement
        if match not in self.parents:
            return self.root  # never seen, so not in the graph: nothing changes
        todo = [match]
        self.fresh.discard(match)
        while todo:
            for p in self.parents[todo.pop()]:
                if p in self.fresh:
                    self.fresh.discard(p)
                    todo.append(p)
        memo: dict[str, str] = {}
        self.root = self.table.substitute(self.root, self.rewrites, memo, self.fresh)
        for new in set(memo.values()):
            self._add(new)
        return self.root

    def _add(self, root: str) -> None:
        """Record the nodes under root not seen yet (fresh), with their parent links."""
        if root in self.parents:
            return
        self.parents[root] = []
        self.fresh.add(root)
        todo = [root]
        while todo:
            nid = todo.pop()
            for s in self.table.entry(nid).src:
                if s not in self.parents:
                    self.parents[s] = []
                    self.fresh.add(s)
                    todo.append(s)
                self.parents[s].append(nid)


def _device(u: UOp) -> str | list[str] | None:
    """The node's device as the dialect derives it (uopviz/uop/props.py), a list for several; None where it has
    none or the rules do not apply (e.g. mid-rewrite). Stored so that readers show it without deriving it again;
    traces saved before it was stored have no "device" in their entries."""
    try:
        d = u.device
    except Exception:
        return None
    return list(d) if isinstance(d, tuple) else d
