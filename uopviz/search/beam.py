"""BEAM search: the fastest opts for a kernel on a device that still give the right answer, found by timing
candidates on the device and remembered in the tuning database.

    from uopviz.search import beam
    r = beam(ast, 4, "CPU")      # BeamResult: r.opts, r.time_s, r.unoptimized_s, r.heuristic_s, ...

Round 0 measures the unoptimized kernel and the heuristic's opts, and a last round times the winner against both
again, in turns and with more runs (`_final_check`), so BEAM never ends slower than the heuristic or no opts.
Each later round expands the `width` best kernels of the round before (those within the early-abort factor of the
best so far: a far slower kernel's children are as slow to time and rarely win) by every legal one-step action
(`codegen.opt.actions`), skipping kernel graphs already built (the same kernel reached by other opts), builds
the new candidates in parallel, then verifies and times them (`timing.Workbench`; locally one at a time, so no
compile competes with a timed run). A candidate whose program is identical to an earlier one (same rendered source and
launch) is stored without samples instead of being timed again. The next beam is the round's `width` fastest
distinct programs; the search stops when a round's best gains less than `threshold` over the best so far, when
no new kernel is left, or after `max_rounds`.

Every candidate is stored in the tuning database as soon as it is measured. A search whose cache key already has
a result is answered from it without compiling anything; an interrupted one (Ctrl-C, kill -9) resumes: stored
candidates are reused, so it replays the same decisions and measures only what is missing.

Where candidates are built and timed is the executor's business (`uopviz.search.executor`): by default a local
process pool builds and this process times; `executor=RayExecutor(...)` (uopviz.search.ray_executor) builds on a
Ray cluster and times on the machines that own the device. Either way this process keeps the beam, makes every
decision, and is the only writer of the database, so the same timings give the same search.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from typing import Any, TextIO

from uopviz import hooks
from uopviz.codegen.naming import kernel_name
from uopviz.codegen.opt import KernelOptError, Opt, Scheduler
from uopviz.codegen.opt.actions import legal_actions
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.pipeline import scheduler
from uopviz.runtime import device as devices
from uopviz.search.db import Candidate, Result, SearchBusyError, TuningDB, TuningDBError
from uopviz.search.executor import Built, Executor, LocalExecutor, Measured, SearchStopped
from uopviz.search.keys import CacheKey, cache_key
from uopviz.search.timing import ABORT_FACTOR, Timing
from uopviz.target import Kernel, Target
from uopviz.trace.ids import node_id
from uopviz.uop.ops import UOp
from uopviz.uop.pattern import unrecorded

FINAL_REPEATS = 20
"""Runs of each contender in the final check (the winner, the heuristic's kernel, the unoptimized one)."""
LEASE_POLL_S = 1.0
"""How often a search waiting for another process's search of the same kernel looks again."""

ProgressHook = Callable[[dict[str, Any]], None]
"""Receives a search's progress events as JSON-ready dicts (see Progress), e.g. to stream them to a web page."""


class BeamError(RuntimeError):
    """A search that cannot run at all (the unoptimized kernel itself fails on the device)."""


@dataclass(frozen=True)
class BeamResult:
    """What a search chose, its median time, and the unoptimized and heuristic kernels' times where the search
    measured them (None otherwise, e.g. for an imported result).

    kernel_name / name: the kernel's name without opts and with the chosen ones (its axes, e.g. r_L64_L16_R64_u4).
    rounds: the last round the search reached (its final check included); candidates: how many it stored;
    compiled: how many this call compiled (0 when answered from the database). checked: its last round was the
    final check (the winner, the heuristic's and the unoptimized kernels timed again in turns; the three times
    are from there).
    """

    kernel_name: str
    name: str
    opts: tuple[Opt, ...]
    time_s: float
    unoptimized_s: float | None
    heuristic_s: float | None
    heuristic_opts: tuple[Opt, ...]
    search_id: int | None
    from_db: bool
    rounds: int
    candidates: int
    compiled: int
    checked: bool = False
    span: tuple[float, float] = (0.0, 0.0)
    """time.perf_counter() when the call began and ended this kernel (searches of beam_many overlap)."""


def beam_many(kernels: Sequence[tuple[UOp, str | None]], width: int, *,
              db: TuningDB | str | os.PathLike[str] | None = None, executor: Executor | None = None,
              workers: int | None = None, progress: bool | ProgressHook = True, **options: Any) -> list[BeamResult]:
    """beam() of several kernels (each with its device) in one call, sharing one executor, up to its `searches`
    at once: on a Ray cluster one kernel's candidates build while another's are timed; the local executor searches
    one after another (its timing shares this machine with the builds). Each search is the one beam() makes of its
    kernel alone, so the same timings give the same decisions. Results in the order given; `options` are beam()'s.
    A progress hook's events carry "index", the kernel's place in `kernels` (its first place: a kernel given twice
    is searched once). Searches side by side share the terminal, so instead of each one's status line rewritten in
    place, `progress=True` prints a line as each ends. When a search fails (or the call is interrupted), the others
    stop at their next wait on the executor and the first failure in order is raised.
    """
    executor = executor or LocalExecutor(workers)
    first = {k: i for i, k in reversed(list(enumerate(kernels)))}  # each distinct (kernel, device): its first place
    unique = sorted(first, key=first.__getitem__)
    at_once = min(executor.searches, len(unique))
    stopping = executor.stopping
    if at_once <= 1 or stopping is None:
        done = {k: beam(k[0], width, k[1], db=db, executor=executor, progress=_indexed(progress, first[k]), **options)
                for k in unique}
        return [done[k] for k in kernels]
    path = db.path if isinstance(db, TuningDB) else db  # each search opens its own connection: sqlite's are per thread
    stopping.clear()
    with unrecorded(), ThreadPoolExecutor(at_once, thread_name_prefix="uopviz-beam") as pool:
        # a thread's unrecorded() would restore the recorder another thread took away: this one holds it off for all
        futures = [pool.submit(beam, ast, width, device, db=path, executor=executor,
                               progress=False if progress is True else _indexed(progress, first[(ast, device)]),
                               **options) for ast, device in unique]
        if progress is True:
            for f in futures:
                f.add_done_callback(_report_end)
        try:
            wait_for(futures, return_when=FIRST_EXCEPTION)
        finally:  # a search failed, or the call was interrupted: the others stop
            if not all(f.done() for f in futures):
                for f in futures:
                    f.cancel()
                stopping.set()
            pool.shutdown(wait=True)
            stopping.clear()
    errors = [e for f in futures if not f.cancelled() and (e := f.exception()) is not None]
    if errors:
        raise next((e for e in errors if not isinstance(e, SearchStopped)), errors[0])
    done = {k: f.result() for k, f in zip(unique, futures, strict=True)}
    return [done[k] for k in kernels]


def _report_end(f: Future[BeamResult]) -> None:
    """One line on stderr as a search of beam_many ends (searches side by side share the terminal)."""
    if f.cancelled() or f.exception() is not None:
        return
    r = f.result()
    sys.stderr.write(f"beam: {r.kernel_name}: {r.name} {r.time_s * 1e6:.1f} µs"
                     f"{' (from the database)' if r.from_db else ''}\n")


def _indexed(progress: bool | ProgressHook, index: int) -> bool | ProgressHook:
    """progress, its hook's events marked with the kernel's index."""
    if isinstance(progress, bool):
        return progress
    return lambda event: progress({**event, "index": index})


def beam(ast: UOp, width: int, device: str | None = None, *, db: TuningDB | str | os.PathLike[str] | None = None,
         max_rounds: int = 8, threshold: float = 0.01, force: bool = False, workers: int | None = None,
         timeout_s: float = 60.0, progress: bool | ProgressHook = True, seed: int = 0, wait: bool = True,
         executor: Executor | None = None, budget_s: float | None = None) -> BeamResult:
    """The best opts BEAM of `width` finds for a kernel (as `kernels_of` gives it) on device (None: the default).

    db: a TuningDB or its path (default: the default database). force: search again although the database has
    a result. workers: compile processes of the default (local) executor (default: one per core). timeout_s: the
    most one candidate may take to lower and compile, and (on a Ray cluster) to be timed. progress: True for a
    status line on stderr, or a ProgressHook that receives every event instead. seed: of the random inputs
    candidates are checked on. wait: while another process searches this kernel on this device (it holds the
    kernel's lease in the database), wait for it and then use its result (or, with force, search after it); False
    raises SearchBusyError instead. executor: where candidates are built and timed (default:
    LocalExecutor(workers); RayExecutor for a Ray cluster); the database stays in this process. budget_s: once the
    search has taken this long, no further candidate is timed and no round starts (round 0, the unoptimized and
    heuristic's kernels, always is; the winner is then checked as always), so a search whose rounds are slow (a GPU
    kernel, hundreds of candidates) fits a time plan.
    """
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"the beam width must be an integer >= 1, got {width!r}")
    if budget_s is not None and not budget_s > 0:
        raise ValueError(f"the time budget must be a positive number of seconds, got {budget_s!r}")
    began = time.perf_counter()
    device = devices.canonical(device)
    executor = executor or LocalExecutor(workers)
    owned = not isinstance(db, TuningDB)
    tdb = db if isinstance(db, TuningDB) else TuningDB(db)
    try:
        with unrecorded():
            info, target = executor.target(device)
            key = cache_key(ast, info)
            hit = None if force else tdb.lookup(key)
            if hit is not None and (answer := _answered(tdb, hit, ast, target)) is not None:
                return _spanned(answer, began)
            params = {"beam": width, "max_rounds": max_rounds, "threshold": threshold}
            shown = Progress(enabled=progress is True, hook=None if isinstance(progress, bool) else progress)
            while True:
                try:
                    search = _Search(ast, device, target, tdb, key, params, executor, timeout_s, seed, shown)
                    break
                except SearchBusyError as e:
                    if not wait:
                        raise
                    if executor.stopping is not None and executor.stopping.is_set():  # beam_many's call is over
                        raise SearchStopped(f"the search of {kernel_name(ast)} was stopped while it waited") from e
                    shown.waiting(e)
                    time.sleep(LEASE_POLL_S)
                    hit = None if force else tdb.lookup(key)
                    if hit is not None and (answer := _answered(tdb, hit, ast, target)) is not None:
                        return _spanned(answer, began)
            display = _notebook_display(search.name, device, width) if progress is True else None
            if display is not None:
                shown.enabled, shown.hook = False, display.hook
            try:
                result = search.run(width, max_rounds, threshold,
                                    None if budget_s is None else began + budget_s)
            except KeyboardInterrupt:
                if display is not None:
                    display.end(None, "interrupted", "interrupted: the candidates measured so far are stored; the same "
                                "call resumes")
                raise
            except Exception as e:
                if display is not None:
                    display.end(None, "failed", f"{type(e).__name__}: {e}")
                raise
            if display is not None:
                display.end(result, "done")
            return _spanned(result, began)
    finally:
        if owned:
            tdb.close()


def _spanned(result: BeamResult, began: float) -> BeamResult:
    """result with the span of the beam() call that gave it (from the database or a search)."""
    return dataclasses.replace(result, span=(began, time.perf_counter()))


def _notebook_display(name: str, device: str, width: int) -> Any:
    """The notebook's live view of this search, where uopviz runs in a notebook (hooks.beam_display), else None:
    the default progress is then the status line."""
    return hooks.beam_display(name, device, width) if hooks.beam_display is not None else None


def format_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s"


class Progress:
    """How a search is going: a status line on a stream (stderr; rewritten in place on a terminal, one line per
    finished round otherwise, so a log does not fill with carriage returns), and/or events to a hook.

    The hook receives dicts, each with "event":
      start      search_id, kernel, device, resumed (an interrupted search continued), stored (its candidates),
                 executor (where candidates are built and timed, e.g. "ray: 2 nodes, ...")
      round      round, candidates (so far; sent again when round 0 grows by the heuristic's kernel), measured
      candidate  round, id, parent, opts, time_s (median; null when failed or a copy), error, duplicate (the
                 program of an earlier candidate, not timed again), measured (false: stored by an interrupted run),
                 best_s (the best time so far), built_on, measured_on (the machine, and Ray node, that built
                 and timed it; null where it was not)
      round_end  round, best_s, best_id (the fastest verified candidate so far)
      wait       holder, pid, host, search_id: another process is searching this kernel; sent once, before start
    """

    def __init__(self, enabled: bool = True, stream: TextIO | None = None, hook: ProgressHook | None = None) -> None:
        self.enabled, self.hook = enabled, hook
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.name, self.round, self.done, self.total = "", 0, 0, 0
        self.best_s: float | None = None
        self.best_id: int | None = None
        self.final = False  # the round under way is the final check
        self.waited = False

    def waiting(self, busy: SearchBusyError) -> None:
        """Another process holds the kernel's lease (said once, however long the wait)."""
        if self.waited:
            return
        self.waited = True
        lease = busy.lease
        self._emit("wait", holder=lease.describe(), pid=lease.pid, host=lease.host, search_id=lease.search_id)
        if self.enabled:
            self.stream.write(f"beam: waiting: {busy}\n")
            self.stream.flush()

    def begin(self, name: str, device: str, search_id: int, resumed: bool, stored: int, executor: str) -> None:
        self._emit("start", search_id=search_id, kernel=name, device=device, resumed=resumed, stored=stored,
                   executor=executor)

    def add(self, name: str, round: int, total: int, done: int, final: bool = False) -> None:
        """More candidates for a round (`done` of them already measured; `final`: the final check's re-timings)."""
        if (name, round) != (self.name, self.round):
            self.name, self.round, self.total, self.done, self.final = name, round, 0, 0, final
        self.total, self.done = self.total + total, self.done + done
        self._emit("round", round=round, candidates=self.total, measured=self.done)
        if self.tty:
            self._show()

    def candidate(self, round: int, node: _Node, parent: int | None, measured: bool) -> None:
        """A candidate of the round: measured now, or (measured False) stored by an interrupted run (then `add`
        counted it as done)."""
        if node.ok and (self.best_s is None or node.time < self.best_s):
            self.best_s, self.best_id = node.time, node.id
        self._emit("candidate", round=round, id=node.id, parent=parent, opts=_opts_json(node.opts),
                   time_s=node.median_s if node.error is None else None, error=node.error,
                   duplicate=node.median_s is None and node.error is None, measured=measured, best_s=self.best_s,
                   built_on=node.built_on, measured_on=node.measured_on)
        if measured:
            self.done += 1
            if self.tty:
                self._show()

    def end_round(self) -> None:
        self._emit("round_end", round=self.round, best_s=self.best_s, best_id=self.best_id)
        if not self.tty:
            self._show()

    def finish(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _emit(self, event: str, **fields: Any) -> None:
        if self.hook is not None:
            self.hook({"event": event, **fields})

    def _show(self) -> None:
        if not self.enabled:
            return
        stage = "final check" if self.final else f"round {self.round}"
        line = f"beam {self.name}: {stage}, {self.done}/{self.total} candidates, best {format_seconds(self.best_s)}"
        self.stream.write(f"\r{line}\x1b[K" if self.tty else line + "\n")
        self.stream.flush()


@dataclass
class _Node:
    """A stored candidate and the Scheduler it is (to expand it)."""

    id: int
    opts: tuple[Opt, ...]
    sched: Scheduler
    program_hash: str | None
    median_s: float | None
    error: str | None
    built_on: str | None = None
    measured_on: str | None = None

    @property
    def ok(self) -> bool:
        return self.median_s is not None and self.error is None

    @property
    def time(self) -> float:
        """Its median, infinite when it has none (failed, or a copy of a program timed already)."""
        return self.median_s if self.median_s is not None and self.error is None else math.inf


Item = tuple[tuple[Opt, ...], int | None, Scheduler]
"""A candidate to measure: its opts, its parent candidate's id, its Scheduler."""


class _Search:
    """One search's state: every candidate so far, the programs already timed, the kernel graphs already built."""

    def __init__(self, ast: UOp, device: str, target: Target, db: TuningDB, key: CacheKey, params: dict[str, Any],
                 executor: Executor, timeout_s: float, seed: int, progress: Progress) -> None:
        self.ast, self.device, self.db, self.seed, self.progress = ast, device, db, seed, progress
        self.sched0 = scheduler(ast, target)
        self.name = kernel_name(self.sched0.ast)
        self.executor = executor
        self.handle = db.begin_search(key, self.name, ast.tree(), params)
        self.station = executor.station(ast, device, seed, timeout_s)
        self.stored = 0  # candidates in the database, resumed ones included
        self.programs: set[str] = set()  # hashes of the programs built so far
        self.seen: set[UOp] = set()
        self.best_s: float | None = None
        self.timed: list[_Node] = []  # the verified candidates with a time, the unoptimized kernel first
        self.deadline: float | None = None  # time.perf_counter() past which no candidate after round 0 is timed

    def run(self, width: int, max_rounds: int, threshold: float, deadline: float | None) -> BeamResult:
        """The search; past `deadline` (time.perf_counter()), where one is given, no candidate after round 0 is
        timed and no round starts."""
        self.deadline = deadline
        try:
            return self._run(width, max_rounds, threshold)
        except BaseException:
            self.station.close(wait=False)  # interrupted: drop queued builds; the stored candidates remain
            with contextlib.suppress(TuningDBError):  # the search may be resumed, by anyone
                self.db.release(self.handle.id)
            raise
        finally:
            self.station.close(wait=True)
            self.progress.finish()

    def _run(self, width: int, max_rounds: int, threshold: float) -> BeamResult:
        self.progress.begin(self.name, self.device, self.handle.id, self.handle.resumed, len(self.handle.candidates),
                            self.executor.describe())
        self._new(self.sched0)
        base = self.evaluate([((), None, self.sched0)], 0)[0]
        if not base.ok:
            self.db.fail_search(self.handle.id, f"the unoptimized kernel failed: {base.error}")
            raise BeamError(f"cannot search {self.name} on {self.device}: the unoptimized kernel failed: {base.error}")
        heur = tuple(heuristic_opts(self.sched0))
        h_sched = _apply(self.sched0, heur)
        h_node = self.evaluate([(heur, base.id, h_sched)], 0)[0] if self._new(h_sched) else None
        self.progress.end_round()
        beam = self._top([base, *([h_node] if h_node else [])], width)
        best, rounds = beam[0], 0
        for r in range(1, max_rounds + 1):
            if self._past_deadline():
                break
            # a node far slower than the best is not expanded: one opt rarely gains that much, and timing its
            # children (each as slow as it) would cost most of the search
            beam = [n for n in beam if n.time <= best.time * ABORT_FACTOR]
            children: list[Item] = [((*n.opts, opt), n.id, s) for n in beam for opt, s in legal_actions(n.sched)
                                    if self._new(s)]
            if not children:
                break
            rounds = r
            new = self._top(self.evaluate(children, r), width)
            self.progress.end_round()
            if not new:
                break
            gained = new[0].time < best.time * (1 - threshold)
            if new[0].time < best.time:
                best = new[0]
            if not gained:
                break
            beam = new
        final = self._final_check(best, [h_node, base], rounds + 1)
        rounds += bool(final)
        best = self._right_everywhere(min(final.values(), key=lambda n: n.time) if final else best)
        self.db.finish_search(self.handle.id, best.id)
        # the three times the result reports come from the same turns where the final check took them
        base_s = final.get(base.id, base).time
        heur_s = (final.get(h_node.id, h_node).time if h_node.ok else None) if h_node else None
        return BeamResult(self.name, kernel_name(best.sched.ast), best.opts, best.time, base_s, heur_s, heur,
                          self.handle.id, False, rounds, self.stored, self.station.built, bool(final))

    def _final_check(self, best: _Node, rivals: list[_Node | None], round: int) -> dict[int, _Node]:
        """The search's winner against the heuristic's and the unoptimized kernels, timed again in turns with
        FINAL_REPEATS runs each: a candidate's time in its round may be luck (noise, a cache warmed by the one
        before), and the answer must not end slower than either. Each re-timing is stored as a candidate of one
        last round, whose parent is the candidate it times again, so the database shows why the result is what
        it is: the fastest of that round. Each contender's re-timing by its id; empty when the winner has no rival
        left (then there is no such round)."""
        contenders = list({n.id: n for n in [best, *rivals] if n is not None and n.ok}.values())
        if len(contenders) < 2:
            return {}
        samples, where = self.station.retime([_opts_json(n.opts) for n in contenders], FINAL_REPEATS)
        self.progress.add(self.name, round, len(contenders), 0, final=True)
        final = {}
        for n, times in zip(contenders, samples, strict=True):
            node = self._store((n.opts, n.id, n.sched), round, Built(None, where=None), n.program_hash,
                               Measured(Timing(times), where))
            self.progress.candidate(round, node, n.id, measured=True)
            final[n.id] = node
        self.progress.end_round()
        return final

    def _right_everywhere(self, best: _Node) -> _Node:
        """A symbolic kernel is timed at one value of its variables: the winner must also be right at others
        (values_to_verify). The fastest candidate that is, else (a candidate that fails somewhere is rejected in
        the database with why) the next fastest; the unoptimized kernel is the reference, so one always is."""
        for node in [best, *sorted((n for n in self.timed if n is not best), key=lambda n: n.time)]:
            wrong = self.station.wrong_at(_opts_json(node.opts))
            if wrong is None:
                return node
            self.db.reject_candidate(self.handle.id, node.id, wrong)
        return self.timed[0]  # the unoptimized kernel: the reference every check compares with

    def _new(self, s: Scheduler) -> bool:
        """Whether s's kernel graph is not a candidate yet (marking it one)."""
        if s.ast in self.seen:
            return False
        self.seen.add(s.ast)
        return True

    def _top(self, nodes: Sequence[_Node], width: int) -> list[_Node]:
        """The `width` fastest verified candidates with distinct programs (ties: the earlier candidate)."""
        out: list[_Node] = []
        hashes: set[str | None] = set()
        for n in sorted((n for n in nodes if n.ok), key=lambda n: n.time):
            if n.program_hash not in hashes:
                hashes.add(n.program_hash)
                out.append(n)
        return out[:width]

    def evaluate(self, items: list[Item], round: int) -> list[_Node]:
        """Measure a round's candidates (in the given order, whatever order workers finish in); those stored by an
        interrupted run of this search are taken from the database."""
        stored = [self.handle.measured(_opts_json(opts)) for opts, _, _ in items]
        todo = [items[i] for i, c in enumerate(stored) if c is None]
        self.progress.add(self.name, round, len(items), len(items) - len(todo))
        built = iter(self.station.build([_opts_json(opts) for opts, _, _ in todo], self.deadline if round else None))
        fresh = [(item, next(built)) for item, c in zip(items, stored, strict=True) if c is None]
        # which new candidates are timed: built, and a program no earlier candidate has (decided in order)
        hashes: list[str | None] = []
        timed: dict[int, Built] = {}
        seen = set(self.programs)
        for i, (_, b) in enumerate(fresh):
            phash = None if b.error is not None else program_hash(self.device, b.rebuild())
            hashes.append(phash)
            if phash is not None and phash not in seen:
                seen.add(phash)
                timed[i] = b
        measured = self.station.measure(list(timed.values()), lambda: self.best_s)
        out, k = [], 0
        for item, c in zip(items, stored, strict=True):
            if round > 0 and c is None and self._past_deadline():
                break  # the budget is spent: the rest of the round is neither built, timed nor stored
            if c is not None:
                node = self._remember(_Node(c.id, item[0], item[2], c.program_hash, c.median_s, c.error, c.built_on,
                                            c.measured_on))
            else:
                b, phash = fresh[k][1], hashes[k]
                if b.error is not None:
                    node = self._store(item, round, b, None, Measured(Timing([], b.error), None))
                elif k in timed:  # the measurements come in the order asked; taken one by one, so best_s follows
                    node = self._store(item, round, b, phash, next(measured))
                else:  # an identical program was measured already
                    node = self._store(item, round, b, phash, Measured(Timing([]), None))
                k += 1
            self.progress.candidate(round, node, item[1], measured=c is None)
            out.append(node)
        return out

    def _past_deadline(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline

    def _store(self, item: Item, round: int, b: Built, phash: str | None, m: Measured) -> _Node:
        opts, parent, sched = item
        t = m.timing
        cid = self.db.add_candidate(self.handle.id, parent, round, _opts_json(opts), phash, b.uop_count,
                                    b.compile_s, t.error, t.samples, built_on=b.where, measured_on=m.where)
        return self._remember(_Node(cid, opts, sched, phash, t.median_s, t.error, b.where, m.where))

    def _remember(self, n: _Node) -> _Node:
        self.stored += 1
        if n.program_hash is not None:
            self.programs.add(n.program_hash)
        if n.ok:
            self.timed.append(n)
            if self.best_s is None or n.time < self.best_s:
                self.best_s = n.time
        return n


def _answered(db: TuningDB, hit: Result, ast: UOp, target: Target) -> BeamResult | None:
    """A result from the database, with the unoptimized and heuristic times its search measured (no compiling);
    None when its opts no longer apply to the kernel (then it is searched again)."""
    sched0 = scheduler(ast, target)
    try:
        opts = tuple(Opt.from_json(o) for o in hit.opts)
        chosen = _apply(sched0, opts)
    except (KernelOptError, TypeError):
        return None
    heur = tuple(heuristic_opts(sched0))
    cands: list[Candidate] = db.candidates(hit.search_id) if hit.search_id is not None else []

    def median_of(o: tuple[Opt, ...]) -> float | None:
        """Its latest time: the final check's, where it took part (the result's own time is from there too)."""
        want = _opts_json(o)
        return next((c.median_s for c in reversed(cands) if c.opts == want and c.error is None
                     and c.median_s is not None), None)

    last = max((c.round for c in cands), default=0)
    checked = last > 0 and all(c.compile_s is None for c in cands if c.round == last)  # re-timings, no builds
    return BeamResult(kernel_name(sched0.ast), kernel_name(chosen.ast), opts, hit.median_s,
                      median_of(()), median_of(heur), heur, hit.search_id, True, last, len(cands), 0, checked)


def program_hash(device: str, kernel: Kernel) -> str:
    """What makes two candidates the same program: device, source (the Linear program where there is none) and
    launch shape."""
    body = kernel.source if kernel.source is not None else node_id(kernel.linear)
    text = json.dumps([device, body, kernel.global_size, kernel.local_size, kernel.threads])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _apply(s: Scheduler, opts: Sequence[Opt]) -> Scheduler:
    for o in opts:
        s = s.apply_opt(o)
    return s


def _opts_json(opts: Sequence[Opt]) -> list[dict[str, Any]]:
    return [o.to_json() for o in opts]
