"""Whole-model tuning: BEAM over every kernel a step runs, the kernels that take the most time first, within one
time budget for the whole step.

A step (a `@jit` function's replay, or whatever a script realizes) runs many launches of fewer kernels. Each launch
is timed on its own buffers, after the launches before it (`_in_place`); launches of one kernel (the same kernel
graph on the same device) are summed, so a kernel run eight times a step weighs eight times. Kernels are then
searched in that order, each with a share of what is left of the budget in proportion to its time (`share_s`), on
one executor (build workers, or a Ray cluster, shared by every search). Every result goes to the tuning database as
BEAM stores it, so realize uses the tuned opts from then on, and a second run with the same database answers the
kernels already searched at once and spends its budget on the rest: tuning resumes. Where a search's pick, timed
again on the step's own buffers and in its place, runs slower than the kernel the step had (its data and neighbours
are not the search's random inputs), the step's opts are kept: the database's result becomes the search's candidate
with them (`TuningDB.choose`, saying why).

    report = step.beam(x, y, width=2, budget_s=300)   # a @uopviz.jit function, on example inputs
    print(report)                                     # the step before and after, and each kernel's share
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from uopviz.codegen.opt import Opt
from uopviz.compiler import compile_kernel
from uopviz.realize import Launch
from uopviz.runtime import buffer as buffers
from uopviz.runtime.device import Program
from uopviz.search.beam import BeamResult, beam, format_seconds
from uopviz.search.db import TuningDB
from uopviz.search.executor import Executor, LocalExecutor
from uopviz.uop.ops import UOp

MIN_SHARE_S = 5.0
"""The least budget a kernel's search is given while budget is left: below it a search only times the unoptimized
and heuristic kernels and checks them again, which costs about as much and finds nothing."""
SHOWN = 20
"""The report lists the kernels searched and up to this many in all: a model's tail of small kernels is one line."""
TIMING_RUNS = 5
"""Runs of each launch when a step is timed kernel by kernel (the median counts)."""
CONTEXT = 4
"""Launches of the step run, untimed, before each launch timed in place (`_in_place`)."""


@dataclass(frozen=True)
class Run:
    """One launch of a step, ready to run again on its own: the kernel graph, its device and the opts it ran with
    (None for a copy between devices, which has nothing to tune), its program, buffer handles and variables."""

    key: tuple[UOp, str, tuple[Opt, ...]] | None
    name: str
    prog: Program
    handles: Sequence[Any]
    vals: tuple[int, ...]


@dataclass
class KernelTuning:
    """One kernel of the step: its launches per step, their total time before and after tuning, and the search."""

    name: str
    ast: UOp
    device: str
    launches: int
    before_s: float
    after_s: float
    result: BeamResult | None = None
    skipped: str | None = None
    """Why the kernel was not searched (the budget was spent), else None."""
    step_opts: tuple[Opt, ...] = ()
    """The opts the step ran the kernel with."""
    kept: float | None = None
    """Where the step's opts were kept: the search's pick's time over theirs on the step's buffers (above 1)."""

    @property
    def tuned_name(self) -> str:
        return self.result.name if self.result is not None and self.kept is None else self.name

    @property
    def opts(self) -> tuple[Opt, ...]:
        """The opts the kernel has after tuning."""
        return self.result.opts if self.result is not None and self.kept is None else self.step_opts


@dataclass
class Tuning:
    """What a whole-model tuning did: every kernel (most time first), the step's time before and after, and the
    time the searches took. `step_before_s`/`step_after_s` are the whole step's wall time where it was measured
    (a @jit replay, both timed in turns once tuning is done), else None; `kernels_before_s`/`kernels_after_s` sum
    the kernels' times (copies included)."""

    device: str
    width: int
    budget_s: float | None
    kernels: list[KernelTuning]
    spent_s: float
    copies_s: float = 0.0
    step_before_s: float | None = None
    step_after_s: float | None = None
    launches: int = 0
    scope: str = "a step"

    @property
    def kernels_before_s(self) -> float:
        return self.copies_s + sum(k.before_s for k in self.kernels)

    @property
    def kernels_after_s(self) -> float:
        return self.copies_s + sum(k.after_s for k in self.kernels)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data (the CLI's --json)."""
        return {"device": self.device, "beam": self.width, "budget_s": self.budget_s, "spent_s": self.spent_s,
                "launches": self.launches, "step_before_s": self.step_before_s, "step_after_s": self.step_after_s,
                "kernels_before_s": self.kernels_before_s, "kernels_after_s": self.kernels_after_s,
                "kernels": [{"kernel": k.name, "name": k.tuned_name, "launches": k.launches, "before_s": k.before_s,
                             "after_s": k.after_s, "skipped": k.skipped,
                             "opts": None if k.result is None else [str(o) for o in k.opts],
                             "kept_step_opts": k.kept,
                             "from_db": None if k.result is None else k.result.from_db,
                             "search_id": None if k.result is None else k.result.search_id}
                            for k in self.kernels]}

    def __str__(self) -> str:
        searched = sum(k.result is not None and not k.result.from_db for k in self.kernels)
        known = sum(k.result is not None and k.result.from_db for k in self.kernels)
        budget = "no budget" if self.budget_s is None else f"a budget of {self.budget_s:.0f} s"
        lines = [f"Whole-model tuning on {self.device}: BEAM width {self.width} over {len(self.kernels)} kernels "
                 f"({self.launches} launches in {self.scope}), {budget}: {searched} searched now, {known} answered "
                 f"from the tuning database, {len(self.kernels) - searched - known} not searched; {self.spent_s:.1f} s"]
        if self.step_before_s is not None and self.step_after_s is not None:
            lines.append(f"step:    {format_seconds(self.step_before_s)} -> {format_seconds(self.step_after_s)} "
                         f"({_speedup(self.step_before_s, self.step_after_s)})")
        lines.append(f"kernels: {format_seconds(self.kernels_before_s)} -> {format_seconds(self.kernels_after_s)} "
                     f"({_speedup(self.kernels_before_s, self.kernels_after_s)}, each launch timed in its place in "
                     "the step)")
        lines += ["", f"{'before':>10s} {'share':>6s} {'after':>10s} {'speedup':>8s}  {'n':>3s}  kernel"]
        total = self.kernels_before_s or 1.0
        shown = [k for i, k in enumerate(self.kernels) if i < SHOWN or k.skipped is None]
        for k in shown:
            how = (k.skipped if k.skipped is not None else "from the database" if k.result and k.result.from_db
                   else f"searched, {k.result.compiled} compiled" if k.result else "")
            if k.kept is not None:
                how += f"; its pick ran {k.kept:.2f}x the step's time on the step's buffers: the step's opts kept"
            arrow = f" -> {k.tuned_name}" if k.tuned_name != k.name else ""
            lines.append(f"{format_seconds(k.before_s):>10s} {100 * k.before_s / total:5.1f}% "
                         f"{format_seconds(k.after_s):>10s} {_speedup(k.before_s, k.after_s):>8s}  {k.launches:3d}  "
                         f"{k.name}{arrow}  ({how})")
        if rest := self.kernels[len(shown):]:  # shown: the first SHOWN, then only searched ones (none left past them)
            rest_s = sum(k.before_s for k in rest)
            lines.append(f"{format_seconds(rest_s):>10s} {100 * rest_s / total:5.1f}%  and {len(rest)} more kernels, "
                         "not searched: the budget was spent")
        return "\n".join(lines)


def _speedup(before: float, after: float) -> str:
    return f"{before / after:.2f}x" if after > 0 else "-"


def runs_of(launches: Sequence[Launch]) -> list[Run]:
    """The launches realize.capture() recorded, each ready to run again on its own buffers."""
    return [Run(launch.key, launch.kernel.name, launch.prog, [buffers.handle(b) for b in launch.buffers],
                tuple(launch.vals[v] for v in launch.kernel.vars)) for launch in launches]


def share_s(left_s: float, kernel_s: float, rest_s: float) -> float:
    """A kernel's share of the budget left: in proportion to its part of the time of the kernels not searched yet
    (itself included), at least MIN_SHARE_S, at most what is left."""
    part = left_s * kernel_s / rest_s if rest_s > 0 else left_s
    return min(left_s, max(MIN_SHARE_S, part))


def tune(runs: Sequence[Run], width: int = 2, *, budget_s: float | None = None,
         db: TuningDB | str | os.PathLike[str] | None = None, executor: Executor | None = None,
         workers: int | None = None, max_rounds: int = 8, force: bool = False, progress: bool = True,
         scope: str = "a step") -> Tuning:
    """BEAM over the kernels of a step's launches, most time first, within budget_s seconds in all (None: each
    search runs to its end). Each kernel is searched once however often it runs; copies are timed, not searched.
    After each search its launches are timed again with the chosen opts (on the same buffers), so the report's
    "after" is measured, not BEAM's estimate; launches alike (one kernel on the same variables, other buffers) are
    timed once and counted as often as they ran. scope: what the runs are, for the report ("a step").
    Returns the Tuning; the results are in the tuning database."""
    if budget_s is not None and not budget_s > 0:
        raise ValueError(f"the time budget must be a positive number of seconds, got {budget_s!r}")
    began = time.perf_counter()
    alike: dict[Any, list[int]] = {}  # launches alike (one kernel, one device, the same variables): one is timed
    for i, r in enumerate(runs):
        alike.setdefault((r.key if r.key is not None else r.name, r.vals), [i, 0])[1] += 1
    by_kernel: dict[tuple[UOp, str], list[tuple[int, int]]] = {}  # a kernel's (first launch alike, how many alike)
    copies_s = 0.0
    for i, n in alike.values():
        if (key := runs[i].key) is None:
            copies_s += n * _time_in_place(runs, i)
        else:
            by_kernel.setdefault(key[:2], []).append((i, n))

    def opts_of(at: list[tuple[int, int]]) -> tuple[Opt, ...]:
        key = runs[at[0][0]].key
        return tuple(key[2]) if key is not None else ()
    kernels = [KernelTuning(runs[at[0][0]].name, ast, device, sum(n for _, n in at), t, t, step_opts=opts_of(at))
               for (ast, device), at in by_kernel.items() for t in [sum(n * _time_in_place(runs, i) for i, n in at)]]
    kernels.sort(key=lambda k: -k.before_s)
    devices_seen = sorted({k.device for k in kernels})
    own_executor = executor is None
    executor = executor or LocalExecutor(workers)
    owned_db = not isinstance(db, TuningDB)
    tdb = db if isinstance(db, TuningDB) else TuningDB(db)
    try:
        rest_s = sum(k.before_s for k in kernels)
        for i, k in enumerate(kernels):
            left = None if budget_s is None else budget_s - (time.perf_counter() - began)
            if left is not None and left < 1.0:
                k.skipped = "not searched: the budget was spent"
                continue
            share = None if left is None else share_s(left, k.before_s, rest_s)
            rest_s -= k.before_s
            if progress:
                sys.stderr.write(f"tune: kernel {i + 1} of {len(kernels)}, {k.name}: {format_seconds(k.before_s)} in "
                                 f"{scope} ({k.launches} launch{'es' * (k.launches != 1)})"
                                 + ("" if share is None else f", up to {share:.0f} s") + "\n")
            k.result = beam(k.ast, width, k.device, db=tdb, executor=executor, max_rounds=max_rounds, force=force,
                            progress=progress, budget_s=share)
            ratio = _speedup_of(runs, by_kernel[(k.ast, k.device)], k.ast, k.device, k.result.opts)
            if ratio > 1 and _keep_step_opts(tdb, k, ratio):
                ratio = 1.0
            k.after_s = k.before_s * ratio
    finally:
        if owned_db:
            tdb.close()
        if own_executor:
            executor.close()
    return Tuning(devices_seen[0] if len(devices_seen) == 1 else ", ".join(devices_seen) or "-", width, budget_s,
                  kernels, time.perf_counter() - began, copies_s, launches=len(runs), scope=scope)


_NUM = r"(\d+(?:\.\d+)?)"
_DURATION = re.compile(rf"{_NUM}|(?:{_NUM}h)?(?:{_NUM}m)?(?:{_NUM}s)?")


def _in_place(runs: Sequence[Run], at: int, prog: Program | None = None) -> float:
    """One timed run of the launch runs[at] (with prog in its place, if given) as it runs in the step: right after the
    CONTEXT launches before it, run untimed, so the caches hold the data they hold there. Run after itself, a launch
    finds its own inputs and outputs in the caches, which it never does in the step: picks checked so were each as
    fast or faster, yet the tuned GPT step ran 0.93x its heuristic twin in one run (issue 30)."""
    for r in runs[max(0, at - CONTEXT):at]:
        r.prog(r.handles, r.vals, wait=True)
    r = runs[at]
    return (prog or r.prog)(r.handles, r.vals, wait=True) or 0.0


def _time_in_place(runs: Sequence[Run], at: int) -> float:
    """The median of TIMING_RUNS timings of runs[at] in place (`_in_place`)."""
    return statistics.median(_in_place(runs, at) for _ in range(TIMING_RUNS))


def _speedup_of(runs: Sequence[Run], at: list[tuple[int, int]], ast: UOp, device: str,
                opts: tuple[Opt, ...]) -> float:
    """The tuned program's time over the one the step ran, each launch of the kernel (its first launch alike, and how
    many are alike: `at`) timed in place (`_in_place`): 1 where the search kept its opts, else both timed in turns (a
    ratio taken apart from the first timing would be the machine's drift: a kept heuristic measured 2x slower a few
    minutes later), each by its fastest run: what other processes add to a run is no part of either program, and on
    a loaded machine it decides a median (a ResNet step's pick read 1.00x to 1.01x the step's kernel by minima eight
    times over, 0.89x to 1.59x by medians of five: whether the step kept its opts was chance)."""
    key = runs[at[0][0]].key
    if key is not None and tuple(key[2]) == tuple(opts):
        return 1.0
    _, prog = compile_kernel(ast, device, opts)
    old = new = 0.0
    for i, n in at:
        olds, news = [], []
        for _ in range(TIMING_RUNS):
            olds.append(_in_place(runs, i))
            news.append(_in_place(runs, i, prog))
        old, new = old + n * min(olds), new + n * min(news)
    return new / old if old > 0 else 1.0


def _keep_step_opts(db: TuningDB, k: KernelTuning, ratio: float) -> bool:
    """Make the step's opts the kernel's result where its search timed them (as its heuristic's kernel, or a
    candidate alike): whether it did, noted in k.kept."""
    if k.result is None or k.result.search_id is None:
        return False
    want = json.loads(json.dumps([o.to_json() for o in k.step_opts]))
    found = [c for c in db.candidates(k.result.search_id) if c.opts == want and c.error is None and c.median_s]
    search = db.search(k.result.search_id)
    if not found or search is None or search.status != "done":
        return False
    db.choose(k.result.search_id, found[-1].id,  # its latest timing: the final check's, where it took part
              f"whole-model tuning: the search's pick ran {ratio:.2f}x the time of the step's opts on the step's "
              "buffers")
    k.kept = ratio
    return True


def parse_duration(text: str) -> float:
    """Seconds in a duration as people write it: 300, 90s, 5m, 1.5h, 2m30s."""
    m = _DURATION.fullmatch(text.strip().lower())
    total = 0.0 if m is None else sum(float(x) * unit for x, unit in zip(m.groups(), (1, 3600, 60, 1), strict=True)
                                      if x is not None)
    if not total > 0:
        raise ValueError(f"expected a duration of more than 0 seconds such as 300, 90s, 5m or 1h30m, got {text!r}")
    return total
