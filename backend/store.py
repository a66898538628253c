"""The traces a server holds, in memory by id, with where each came from."""

from __future__ import annotations

import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from uopviz.backend import recording
from uopviz.backend.models import OptsOrigin, OptSpec, ScriptOutput, Source

from uopviz.trace import Trace

if TYPE_CHECKING:
    from uopviz.codegen.opt import Opt
    from uopviz.uop.ops import UOp

OPTS_KEEP = 64  # kernels lowered again with opts, kept for their traces (the most recently applied)
DROPPED_KEEP = 4096  # ids of dropped opts traces remembered, so that asking for one says what happened


class NotFound(LookupError):
    """An id or index that names nothing the server holds (answered as 404)."""


@dataclass(eq=False)
class StoredTrace:
    id: str
    name: str
    source: Source
    device: str | None
    trace: Trace
    origin: OptsOrigin | None = None  # an opts trace's kernel and opts
    output: ScriptOutput | None = None  # what a script printed
    # TracePass.graph_at caches replayed roots as it goes; requests run in a thread pool, so reads take this
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _slug(text: str) -> str:
    """An id made of URL-safe characters."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "trace"


class TraceStore:
    """Traces by id. Zoo ids are the kernel's name (plus `-small` and `-<device>` when not the defaults), so
    recording the same thing again replaces it; files and scripts get their file's stem, made unique.

    Opts traces are kept per (trace, context, opts), the OPTS_KEEP most recently applied: every request would
    otherwise add a trace that is never freed. Their ids are never reused, so an id kept by a page names one
    kernel or a dropped trace, never another kernel."""

    def __init__(self, device: str | None = None) -> None:
        self.device = self._canonical(device)
        self._traces: dict[str, StoredTrace] = {}
        self._lock = threading.Lock()
        # (trace id, context, opts JSON) -> (the trace they were applied to, the opts trace), least recent first
        self._opts: OrderedDict[tuple[str, int, str], tuple[StoredTrace, StoredTrace]] = OrderedDict()
        self._opts_made = 0
        self._dropped: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._traces)

    def all(self) -> list[StoredTrace]:
        with self._lock:
            return list(self._traces.values())

    def get(self, tid: str) -> StoredTrace:
        """The trace of this id; NotFound naming the known ids otherwise."""
        t = self._traces.get(tid)
        if t is None and tid in self._dropped:
            raise NotFound(f"trace {tid!r} was dropped (the server keeps the {OPTS_KEEP} kernels most recently "
                           "lowered with opts): apply the opts again")
        if t is None:
            known = list(self._traces)
            more = f" and {len(known) - 12} more" if len(known) > 12 else ""
            raise NotFound(f"no trace {tid!r}; known: {', '.join(known[:12]) or 'none'}{more}")
        return t

    def add(self, st: StoredTrace, replace: bool = False) -> StoredTrace:
        """Store under st.id, or st.id-2, -3, ... where that is taken (by any trace, unless `replace` and the
        holder has the same source: a zoo recording replaces the zoo trace of its id, never a file's)."""
        with self._lock:
            base, n = st.id, 2
            while (held := self._traces.get(st.id)) is not None and not (replace and held.source == st.source):
                st.id, n = f"{base}-{n}", n + 1
            self._traces[st.id] = st
        return st

    def record_zoo(self, name: str, device: str | None = None, small: bool = False) -> StoredTrace:
        dev = self._canonical(device if device is not None else self.device)  # the store's device by default
        tr = recording.record_zoo(name, dev, small)
        tid = name + ("-small" if small else "") + ("" if dev == self.device else f"-{dev.lower()}")
        return self.add(StoredTrace(tid, name, "zoo", dev, tr), replace=True)

    def load_file(self, path: str | os.PathLike[str]) -> StoredTrace:
        name = Path(path).name.removesuffix(".json").removesuffix(".uopviz-trace")
        return self.add(StoredTrace(_slug(name), name, "file", None, recording.load_file(path)))

    def record_script(self, path: str | os.PathLike[str]) -> StoredTrace:
        name = Path(path).stem
        tr, output = recording.run_script(path)
        return self.add(StoredTrace(_slug(name), name, "script", None, tr, output=output))

    def add_recorded(self, tr: Trace, name: str, device: str | None = None) -> StoredTrace:
        """A trace recorded in this process (a notebook's `uopviz.show`), detached from its recorder, under a new
        id made from its name."""
        return self.add(StoredTrace(_slug(name), name, "notebook", device, recording.detached(tr)))

    def record_opts(self, base: StoredTrace, ci: int, ast: UOp, device: str, opts: Sequence[Opt]) -> StoredTrace:
        """The trace of context ci's kernel lowered again with opts (the whole list, from the kernel as scheduled);
        its only context is the new kernel. The same opts on the same trace again answer the same trace."""
        key = (base.id, ci, json.dumps([o.to_json() for o in opts], sort_keys=True))
        with self._lock:
            if (kept := self._kept_opts(key, base)) is not None:
                return kept
        tr, kernel = recording.record_opts(ast, device, opts)
        with self._lock:
            if (kept := self._kept_opts(key, base)) is not None:  # the same request, lowered meanwhile
                return kept
            self._opts_made += 1
            # '~' is in no other id (_slug drops it), so the counter alone makes this id new for good
            origin = OptsOrigin(trace_id=base.id, context=ci, opts=[OptSpec(**o.to_json()) for o in opts])
            st = StoredTrace(f"{base.id}-{ci}-opts~{self._opts_made}", kernel.name, "opts", device, tr, origin)
            self._traces[st.id] = st
            if (stale := self._opts.pop(key, None)) is not None:  # made from a trace since replaced
                self._drop(stale[1])
            self._opts[key] = (base, st)
            while len(self._opts) > OPTS_KEEP:
                self._drop(self._opts.popitem(last=False)[1][1])
        return st

    def _drop(self, st: StoredTrace) -> None:
        """Forget an opts trace, remembering its id (a bounded number of them); the caller holds the lock."""
        del self._traces[st.id]
        self._dropped[st.id] = None
        while len(self._dropped) > DROPPED_KEEP:
            self._dropped.popitem(last=False)

    def _kept_opts(self, key: tuple[str, int, str], base: StoredTrace) -> StoredTrace | None:
        """The opts trace kept for key if it was made from this very trace (not one since replaced under its id),
        now the most recently used; the caller holds the lock."""
        kept = self._opts.get(key)
        if kept is None or kept[0] is not base:
            return None
        self._opts.move_to_end(key)
        return kept[1]

    def record_whole_zoo(self) -> None:
        from uopviz.kernels import ZOO
        for name in ZOO:
            self.record_zoo(name)

    @staticmethod
    def _canonical(device: str | None) -> str:
        from uopviz.runtime.device import UnknownDeviceError, canonical
        try:
            return canonical(device)
        except UnknownDeviceError as e:
            raise recording.RecordError(str(e)) from None
