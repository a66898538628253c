"""The answers of the UI's data source (frontend/src/data.js), one method each, from a TraceStore and the tuning
database. The HTTP routes (backend.app) and the notebook widget (uopviz.widget) both answer through `Answers`, so a
page and a widget see the same JSON; the errors each raises map to one status (`status_of`) in both.

Nothing here imports FastAPI: the widget runs in a Jupyter kernel with no web framework loaded.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import cast

from uopviz.backend import device_list, machine, recording, tuning, views
from uopviz.backend.display import OTHER_COLOUR
from uopviz.backend.machine import TimingError
from uopviz.backend.models import (
    AppliedOpts,
    AxisTypeInfo,
    BeamStarted,
    BeamStopped,
    KernelView,
    MachineCode,
    Meta,
    OpGroupInfo,
    OptChoice,
    OptSpec,
    PythonSource,
    ResultView,
    SearchDetail,
    SearchPage,
    StartEvent,
    StepView,
    TimingView,
    TraceDetail,
    TraceSummary,
)
from uopviz.backend.pysource import python_source
from uopviz.backend.recording import RecordError
from uopviz.backend.store import NotFound, TraceStore
from uopviz.backend.tuning import BeamJob, BeamJobs, BeamStartError, Busy

import uopviz
from uopviz.codegen.opt import KernelOptError, Opt, OptOps
from uopviz.codegen.opt.actions import FACTORS
from uopviz.codegen.opt.scheduler import SPLIT_FROM
from uopviz.runtime.device import DeviceError
from uopviz.search.db import TuningDBError
from uopviz.target import Target
from uopviz.trace import TraceFormatError
from uopviz.uop.ops import AxisType, GroupOp, Ops

# the named errors answers raise, by the HTTP status that answers them (their message is the detail)
STATUSES: dict[type[Exception], int] = {NotFound: 404, FileNotFoundError: 404, RecordError: 422,
                                        KernelOptError: 422, TimingError: 422, TraceFormatError: 422, Busy: 409,
                                        TuningDBError: 503, BeamStartError: 503}


def status_of(exc: BaseException) -> int | None:
    """The status a named error answers with; None for anything else (a bug: 500)."""
    return next((s for kind, s in STATUSES.items() if isinstance(exc, kind)), None)


# ---- what the opts are, from uopviz.codegen.opt ----
# How each OptOp's (axis, arg) is spelled (Opt.check_types says the same in code): SPLIT's arg is (factor, AxisType,
# top), PADTO's a multiple, SWAP's the other axis, NOLOCALS takes neither. TC is never offered: no Target has
# tensor cores, and the scheduler refuses it everywhere.
_AMOUNT = {OptOps.SPLIT: "factor", OptOps.PADTO: "multiple"}
_DOCS = {OptOps.PADTO: "pad the axis to a multiple (masked where past its size)",
         OptOps.SWAP: "trade places with another axis of the same AxisType",
         OptOps.NOLOCALS: "forbid LOCAL and GROUP_REDUCE axes from here on"}
_WORKGROUP = frozenset({AxisType.LOCAL, AxisType.GROUP_REDUCE})


def _split_targets() -> list[AxisType]:
    """The AxisTypes a split makes, in the order the search tries them (its action space), then the others."""
    return [*FACTORS, *(t for t in SPLIT_FROM if t not in FACTORS)]


def opt_choices() -> list[OptChoice]:
    """Every opt a person may pick: a split per target AxisType, then the other OptOps."""
    out = [OptChoice(label=t.name, op=OptOps.SPLIT.value, split_to=t.name, axis=True, amount=_AMOUNT[OptOps.SPLIT],
                     other_axis=False, top=True,
                     doc=f"split the axis into a {t.name} part of this size (from "
                         f"{', '.join(sorted(x.name for x in SPLIT_FROM[t]))})")
           for t in _split_targets()]
    out += [OptChoice(label=op.value, op=op.value, split_to=None, axis=op is not OptOps.NOLOCALS,
                      amount=_AMOUNT.get(op), other_axis=op is OptOps.SWAP, top=False, doc=_DOCS[op])
            for op in OptOps if op in _DOCS]
    return out


def offered(choice: OptChoice, target: Target) -> bool:
    """Whether a device can take the opt at all: work-group axes (and NOLOCALS, which only forbids them) need
    work-groups, THREAD axes threads."""
    split_to = AxisType[choice.split_to] if choice.split_to else None
    if split_to in _WORKGROUP or choice.op == OptOps.NOLOCALS.value:
        return target.local_dims > 0
    if split_to is AxisType.THREAD:
        return target.threads > 0
    return True


def meta(default_device: str) -> Meta:
    """What a view needs to draw: AxisTypes and op groups with their colours, the devices that start here, and the
    opts each of them takes (backend/device_list.py: listed in a child process in a server)."""
    groups = [OpGroupInfo(name=g, color=c, ops=[o.value for o in Ops if GroupOp.group_of(o) == g])
              for g, c in GroupOp.Colour.items()]  # by group_of, so each op is listed where its nodes are drawn
    axis_types = [AxisTypeInfo(name=t.name, letter=t.letter, color=t.colour)
                  for t in sorted(AxisType, key=lambda t: t.priority)]
    device_opts = device_list.device_opts()
    return Meta(version=uopviz.__version__, axis_types=axis_types, op_groups=groups, other_color=OTHER_COLOUR,
                devices=list(device_opts), default_device=default_device, opts=opt_choices(), device_opts=device_opts,
                commutative=sorted(o.value for o in GroupOp.Commutative))


class Answers:
    """The data source's answers over `store`; `db` is the tuning database (None: the default one), which BEAM
    searches (run in a child process, one at a time) write."""

    def __init__(self, store: TraceStore, db: Path | None = None) -> None:
        self.store = store
        self.beams = BeamJobs(db)

    @cached_property
    def _meta(self) -> Meta:  # listing the devices starts their runtimes (here or in a child): do it once
        return meta(self.store.device)

    def meta(self) -> Meta:
        return self._meta

    def traces(self) -> list[TraceSummary]:
        return [views.summary(t) for t in self.store.all()]

    def trace(self, tid: str) -> TraceDetail:
        return views.detail(self.store.get(tid))

    def trace_json(self, tid: str) -> bytes:
        """`trace` as JSON, made one context at a time (what a server sends: views.detail_json)."""
        return views.detail_json(self.store.get(tid))

    def step(self, tid: str, ci: int, pi: int, k: int) -> StepView:
        return views.step(self.store.get(tid), ci, pi, k)

    def kernel(self, tid: str, ci: int) -> KernelView:
        return views.kernel(self.store.get(tid), ci)

    def python(self, tid: str, ci: int, pi: int, k: int, node: str | None = None) -> PythonSource:
        """The graph after k steps of a pass (or the part of it under `node`) as Python that rebuilds it."""
        st = self.store.get(tid)
        root = views.step_root(st, ci, pi, k)
        with st.lock:
            if node is not None and node not in st.trace.nodes_of(root):
                raise NotFound(f"node {node!r} is not in the graph after {k} steps of pass {pi}")
            order = st.trace.toposort(node or root)
        return PythonSource(root=node or root, text=python_source(order, st.trace.node))

    def time_kernel(self, tid: str, ci: int) -> TimingView:
        """Run a kernel context's kernel, with the opts it was lowered with, on its device, and time it."""
        st = self.store.get(tid)
        ast, device = views.kernel_input(st, ci)
        c = st.trace.contexts[ci]
        try:
            opts = [Opt.from_json(o) for o in c.opts]
        except (TypeError, ValueError) as e:
            raise RecordError(f"kernel {c.name}: its opts cannot be read: {e}") from None
        return machine.time_kernel(ast, device, opts, views.kernel(st, ci).work)

    def machine_code(self, tid: str, ci: int) -> MachineCode:
        """The compiled code of a kernel context's kernel on its device, from the source rendered again from its
        Linear program: the Source text a trace stores is never compiled."""
        st = self.store.get(tid)
        k = views.kernel(st, ci)
        if k.device is None:
            raise RecordError(f"kernel {k.name} names no device to compile it for")
        try:
            made = recording.rendered(st.trace, st.trace.contexts[ci], k.device)
        except DeviceError as e:
            raise RecordError(f"no machine code for {k.name}: {e}") from None
        if made is None:  # views.kernel found the rendered program
            raise RecordError(f"kernel {k.name} has no rendered program")
        return machine.machine_code(made.source, made.name, made.device)

    def apply_opts(self, tid: str, ci: int, opts: list[OptSpec]) -> AppliedOpts:
        """The kernel lowered again with exactly these opts (KernelOptError says why one is illegal)."""
        st = self.store.get(tid)
        ast, device = views.kernel_input(st, ci)
        new = self.store.record_opts(st, ci, ast, device, [Opt.from_json(o.model_dump()) for o in opts])
        kernel = views.kernel(new, 0)
        return AppliedOpts(name=kernel.name, source=kernel.source, axes=kernel.axes, opts=kernel.opts,
                           trace_id=new.id)

    def searches(self, kernel_hash: str | None = None, before: int | None = None, limit: int = 200) -> SearchPage:
        return tuning.searches(self.beams.db, self.beams.live(), kernel_hash, limit, before)

    def search(self, sid: int) -> SearchDetail:
        return tuning.search(self.beams.db, sid, self.beams.live())

    def results(self, kernel_hash: str | None = None) -> list[ResultView]:
        return tuning.results(self.beams.db, kernel_hash)

    def start_beam(self, tid: str, ci: int, width: int, max_rounds: int) -> BeamStarted:
        """Start a BEAM search of a kernel context on its device; returns once it has begun."""
        st = self.store.get(tid)
        root, device = views.kernel_root(st, ci)
        with st.lock:
            doc = st.trace.to_json()
        job = self.beams.start(doc, root, device, width, max_rounds, st.trace.contexts[ci].name)
        start = cast(StartEvent, job.events[0])  # start() returns once the first event is the start
        return BeamStarted(job=job.id, search_id=start.search_id, kernel_name=start.kernel, device=start.device,
                           resumed=start.resumed)

    def stop_beam(self, job: str) -> BeamStopped:
        """Stop a BEAM job's search if it runs (what it measured stays, and a later search resumes it)."""
        stopped = self.beams.cancel(job)
        return BeamStopped(job=job, search_id=self.beams.get(job).search_id, stopped=stopped)

    def beam_job(self, job: str) -> BeamJob:
        return self.beams.get(job)

    def stop(self) -> None:
        """Stop a running search (its candidates stay in the database)."""
        self.beams.stop()
