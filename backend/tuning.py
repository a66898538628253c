"""The tuning database as the API shows it, and the BEAM searches the server runs.

A search runs in a child process (`backend.beam_runner`), one at a time. In this process it would fight the
request threads over what is process-wide: the recorder (a search lowers with recording off, which would drop
the passes of a trace being recorded at the same time), the default-opts cache, and the GIL while it times
kernels. The child writes its progress as JSON lines; a reader thread keeps them in the job, and any number of
event streams replay and follow them.
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import TypeAdapter, ValidationError
from uopviz.backend.models import (
    BeamEvent,
    CandidateView,
    DoneEvent,
    ErrorEvent,
    ResultView,
    RoundView,
    SearchDetail,
    SearchPage,
    SearchStatus,
    SearchSummary,
    StartEvent,
    TargetInfoView,
)
from uopviz.backend.recording import RecordError
from uopviz.backend.store import NotFound

from uopviz.search.db import Candidate, SearchInfo, TuningDB, TuningDBError, default_path
from uopviz.search.keys import TargetInfo

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
KEEP_JOBS = 16
_EVENT: TypeAdapter[BeamEvent] = TypeAdapter(BeamEvent)


class Busy(RuntimeError):
    """A search is running already (answered as 409)."""


class BeamStartError(RuntimeError):
    """The search process failed before its search began, for no reason of the kernel's or the database's (503)."""


# ---- reading the database ----
@contextmanager
def _reading(path: Path) -> Iterator[TuningDB | None]:
    """The database at path, or None when there is no file (reads must not create one)."""
    if not path.exists():
        yield None
        return
    with TuningDB(path) as db:
        yield db


def searches(path: Path, live: dict[int, str], kernel_hash: str | None = None, limit: int = 200,
             before: int | None = None) -> SearchPage:
    """A page of searches, newest first (of one kernel when kernel_hash is given; below id `before`)."""
    with _reading(path) as db:
        infos = [] if db is None else db.searches(kernel_hash, limit + 1, before)  # one more: is there a next page?
    page = [_summary(s, live) for s in infos[:limit]]
    return SearchPage(searches=page, next_before=page[-1].id if len(infos) > limit else None)


def search(path: Path, sid: int, live: dict[int, str]) -> SearchDetail:
    """One search with its candidates, rounds and winning path; NotFound for an unknown id."""
    with _reading(path) as db:
        info = None if db is None else db.search(sid)
        if db is None or info is None:
            raise NotFound(f"no search {sid} in the tuning database {path}")
        cands = db.candidates(sid)
    by_id = {c.id: c for c in cands}
    path_ids: list[int] = []
    node = by_id.get(info.leading_id) if info.leading_id is not None else None
    while node is not None and node.id not in path_ids:  # parents come first; the check guards a bad import
        path_ids.append(node.id)
        node = by_id.get(node.parent_id) if node.parent_id is not None else None
    rounds = []
    for r in sorted({c.round for c in cands}):
        cs = [c for c in cands if c.round == r]
        timed = [c for c in cs if _timed(c)]
        fastest = min(timed, key=lambda c: c.median_s or 0.0, default=None)
        rounds.append(RoundView(round=r, candidates=len(cs), timed=len(timed),
                                failed=sum(c.error is not None for c in cs), duplicates=sum(_duplicate(c) for c in cs),
                                best_id=fastest.id if fastest else None, best_s=fastest.median_s if fastest else None))
    return SearchDetail(
        **_summary(info, live).model_dump(), target=TargetInfoView(**_fields(info.key.target)),
        action_space_version=info.key.action_space_version, uopviz_version=info.key.uopviz_version, rounds=rounds,
        candidates=[CandidateView(id=c.id, parent=c.parent_id, round=c.round, opts=c.opts, program_hash=c.program_hash,
                                  uop_count=c.uop_count, compile_s=c.compile_s, error=c.error, samples=c.samples,
                                  median_s=c.median_s, duplicate=_duplicate(c), built_on=c.built_on,
                                  measured_on=c.measured_on) for c in cands],
        winning_path=path_ids[::-1])


def results(path: Path, kernel_hash: str | None = None) -> list[ResultView]:
    """The best opts per kernel and target, newest first."""
    with _reading(path) as db:
        rows = [] if db is None else db.results()
    return [ResultView(kernel_name=r.kernel_name, kernel_hash=r.key.kernel_hash,
                       target=TargetInfoView(**_fields(r.key.target)), action_space_version=r.key.action_space_version,
                       uopviz_version=r.key.uopviz_version, opts=r.opts, median_s=r.median_s, search_id=r.search_id,
                       created_at=r.created_at)
            for r in rows if kernel_hash is None or r.key.kernel_hash == kernel_hash]


def _timed(c: Candidate) -> bool:
    return c.error is None and c.median_s is not None


def _duplicate(c: Candidate) -> bool:
    return c.error is None and c.median_s is None


def _summary(info: SearchInfo, live: dict[int, str]) -> SearchSummary:
    status: SearchStatus = ("done" if info.status == "done" else "failed" if info.status == "failed"
                             else "running" if info.id in live else "interrupted")
    width = info.params.get("beam") if isinstance(info.params, dict) else None
    return SearchSummary(
        id=info.id, kernel_name=info.kernel_name, kernel_hash=info.key.kernel_hash, device=info.key.device,
        device_name=info.key.device_name, status=status, error=info.error,
        width=width if isinstance(width, int) and not isinstance(width, bool) else None, params=info.params,
        best_id=info.leading_id, best_s=info.leading_s, best_opts=info.leading_opts,
        unoptimized_s=info.unoptimized_s, n_candidates=info.n_candidates, started_at=info.started_at,
        finished_at=info.finished_at, job=live.get(info.id))


def _fields(target: TargetInfo) -> dict[str, str]:
    return {k: getattr(target, k) for k in TargetInfoView.model_fields}


# ---- running searches ----
@dataclass(eq=False)
class BeamJob:
    """One search run by the server: its events so far, and whether its process has ended."""

    id: str
    kernel_name: str
    device: str
    events: list[BeamEvent] = field(default_factory=list)
    finished: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)

    @property
    def search_id(self) -> int | None:
        first = self.events[0] if self.events else None
        return first.search_id if isinstance(first, StartEvent) else None

    @property
    def ended(self) -> bool:
        """Whether its last event (done or error) has come, or its process has ended without one."""
        return self.finished or bool(self.events and isinstance(self.events[-1], DoneEvent | ErrorEvent))

    def add(self, fields: dict[str, Any]) -> None:
        """Keep an event from the search process; a line that is not one is dropped."""
        with self._cond:
            if self.ended:
                return  # nothing follows the last event
            try:
                self.events.append(_EVENT.validate_python({**fields, "seq": len(self.events) + 1}))
            except ValidationError:
                return
            self._cond.notify_all()

    def finish(self) -> None:
        with self._cond:
            self.finished = True
            self._cond.notify_all()

    def since(self, seq: int) -> tuple[list[BeamEvent], bool]:
        """The events after number seq, and whether there will be no more."""
        with self._cond:
            return self.events[seq:], self.ended

    def wait(self, timeout: float) -> bool:
        """Wait up to timeout seconds for its process to end and its events to be read; whether they have."""
        with self._cond:
            return self._cond.wait_for(lambda: self.finished, timeout)

    def first(self, timeout: float) -> BeamEvent | None:
        """The first event, waiting for it up to timeout seconds (None: none came)."""
        with self._cond:
            self._cond.wait_for(lambda: self.events or self.finished, timeout)
            return self.events[0] if self.events else None


class BeamJobs:
    """The server's BEAM searches: at most one running, the last KEEP_JOBS kept for their event streams.

    db: the tuning database the searches write (None: the default one, as UOPVIZ_CACHE_DIR says when used).
    """

    def __init__(self, db: Path | None) -> None:
        self._db = db
        self._jobs: dict[str, BeamJob] = {}
        self._running: tuple[BeamJob, subprocess.Popen[str]] | None = None
        self._lock = threading.Lock()

    @property
    def db(self) -> Path:
        return (self._db or default_path()).resolve()

    def get(self, job_id: str) -> BeamJob:
        job = self._jobs.get(job_id)
        if job is None:
            raise NotFound(f"no BEAM job {job_id!r} (this server keeps its last {KEEP_JOBS})")
        return job

    @property
    def pid(self) -> int | None:
        """The process id of the running search, if one runs."""
        running = self._running
        return None if running is None or running[0].finished else running[1].pid

    def live(self) -> dict[int, str]:
        """The search id of the running job, if any, mapped to the job's id."""
        running = self._running
        if running is None or running[0].ended or running[0].search_id is None:
            return {}
        return {running[0].search_id: running[0].id}

    def start(self, trace_json: str, root: str, device: str, width: int, max_rounds: int, kernel_name: str) -> BeamJob:
        """Search the kernel whose graph is node `root` of a trace (its JSON document); returns once the search has
        begun (its first event is its start). Busy while another runs; TuningDBError, RecordError (the kernel
        cannot be searched) or BeamStartError when the search cannot begin."""
        with self._lock:
            if self._running is not None and not self._running[0].ended:
                job = self._running[0]
                raise Busy(f"a BEAM search is running already (job {job.id}: {job.kernel_name} on {job.device}); "
                           "wait for it to end")
            work = Path(tempfile.mkdtemp(prefix="uopviz-beam-"))
            errors = open(work / "stderr.txt", "w+", encoding="utf-8")  # noqa: SIM115 (_follow closes it)
            try:
                (work / "kernel.uopviz-trace.json").write_text(trace_json, encoding="utf-8")
                request = {"trace": str(work / "kernel.uopviz-trace.json"), "node": root, "device": device,
                           "width": width, "max_rounds": max_rounds, "db": str(self.db)}
                proc = subprocess.Popen([sys.executable, "-m", "uopviz.backend.beam_runner"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=errors, text=True, encoding="utf-8")
            except BaseException:
                errors.close()
                shutil.rmtree(work, ignore_errors=True)
                raise
            job = BeamJob(secrets.token_hex(6), kernel_name, device)
            self._running = (job, proc)
            self._jobs[job.id] = job
            for old in [j for j in self._jobs.values() if j.finished][:-KEEP_JOBS]:
                del self._jobs[old.id]
            threading.Thread(target=self._follow, args=(job, proc, errors, work), daemon=True,
                             name=f"beam-{job.id}").start()
            try:  # stdin stays open: closing it stops the search
                assert proc.stdin is not None
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                pass  # the process ended at once (and _follow closed its stdin): _follow says how
        first = job.first(START_TIMEOUT_S)
        if isinstance(first, StartEvent):
            return job
        if first is None:
            self.stop()
            raise BeamStartError(f"the search process did not start within {START_TIMEOUT_S:g} s")
        if isinstance(first, ErrorEvent) and first.kind == "database":
            raise TuningDBError(first.detail)
        if isinstance(first, ErrorEvent) and first.kind == "kernel":
            raise RecordError(first.detail)
        if isinstance(first, ErrorEvent) and first.kind == "busy":
            raise Busy(first.detail)
        raise BeamStartError(f"the search could not begin: {getattr(first, 'detail', first.event)}")

    def _follow(self, job: BeamJob, proc: subprocess.Popen[str], errors: IO[str], work: Path) -> None:
        """Read the search process's events until it exits; if it said no last word, say how it ended."""
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    job.add(event)
            code = proc.wait()
            errors.seek(0)
            tail = " | ".join(errors.read().strip().splitlines()[-3:]) or "no message"
            job.add({"event": "error", "kind": "failed",
                     "detail": f"the search process ended (exit status {code}) without finishing: {tail}"})
        finally:
            errors.close()
            if proc.stdin is not None:
                proc.stdin.close()
            shutil.rmtree(work, ignore_errors=True)
            job.finish()

    def cancel(self, job_id: str) -> bool:
        """Stop job_id's search if it runs, as Ctrl-C would: what it measured stays in the database, and searching
        the kernel again resumes it. Whether it was running; NotFound for a job this server does not keep."""
        job = self.get(job_id)
        with self._lock:  # no other search starts between the look and the stop
            running = self._running
            if running is None or running[0] is not job or job.ended:
                return False
            self.stop(wait=False)
        if not job.wait(STOP_TIMEOUT_S):  # its last event ("interrupted") is read once its process has ended
            running[1].kill()
            job.wait(STOP_TIMEOUT_S)
        return True

    def stop(self, wait: bool = True) -> None:
        """Interrupt the running search (its stored candidates stay: running it again resumes it). wait: until
        its process has ended (killed after STOP_TIMEOUT_S); else just ask, as a signal handler must."""
        running = self._running
        if running is None or running[0].finished:
            return
        proc = running[1]
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the runner takes end-of-input as Ctrl-C
        except OSError:
            pass
        if wait:
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
