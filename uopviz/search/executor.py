"""Where a BEAM search's candidates are built and measured: the executor interface the search drives, and the local
executor (a process pool for builds, the search's own process for timing: what `beam` always did).

A search keeps its beam, its decisions and the tuning database to itself; an executor only answers questions about
candidates, each in the order asked:

    station = executor.station(ast, device, seed, timeout_s)   # one search's view of the executor
    builts = station.build(opts_list)          # lowered (and, where the program may travel, compiled) candidates
    for m in station.measure(builts, best):    # verified and timed on the device, in order; best(): the best so far
        ...                                    # m.timing, m.where (the machine that timed it)
    station.retime(opts_list, repeats)         # finalists timed again in turns, on one machine
    station.wrong_at(opts)                     # a symbolic winner checked at other values of its variables

`DeviceBench` is the device-side half (compile, verify, time); `LocalStation` runs it in the search's process,
`uopviz.search.ray_executor` in Ray actors on the machines that own the device. Both call the same `build_candidate`
to lower and the same DeviceBench to measure, so a search decides the same way whichever executor it uses.

Workers are spawned, not forked (forking a process with an OpenCL context or running threads is unsafe), and they
do not re-run the parent's main script (`_main_not_rerun`), so a script searched as it runs (UOPVIZ_BEAM) needs no
`if __name__ == "__main__":` guard. Kernels travel to workers as flat node lists: pickling a deep UOp graph
recurses once per level.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from multiprocessing import get_context, parent_process
from multiprocessing.connection import wait
from typing import Any

from uopviz.codegen.opt import Opt
from uopviz.compiler import compile_kernel
from uopviz.pipeline import lower
from uopviz.runtime import device as devices
from uopviz.runtime.workers import cores
from uopviz.search.keys import TargetInfo, describe_target
from uopviz.search.timing import Timing, Workbench, describe_error, timed_run, values_to_verify
from uopviz.target import Kernel, Target
from uopviz.uop.bounds import check_bounds
from uopviz.uop.ops import UOp

FlatUOp = list[tuple[Any, tuple[int, ...], Any, Any]]
OptsJson = list[dict[str, Any]]
GIVEN_UP = "not built: the search's time budget was spent"
"""A build's error where the search stopped waiting for it (never stored: a resumed search builds it again)."""


@dataclass(frozen=True)
class Built:
    """What a worker made of one candidate: the Kernel's fields (its Linear program flattened), or (kernel None)
    the error; where: the machine (and worker) that built it."""

    compile_s: float | None
    error: str | None = None
    kernel: dict[str, Any] | None = None
    uop_count: int | None = None
    where: str | None = None

    def rebuild(self) -> Kernel:
        fields = dict(self.kernel or {})
        fields["linear"] = unflatten(fields["linear"])
        return Kernel(**fields)


@dataclass(frozen=True)
class Measured:
    """A candidate's timing and the machine (and worker) that took it."""

    timing: Timing
    where: str | None


class Station(ABC):
    """One search's view of an executor: builds and measurements of that search's kernel on its device."""

    built: int
    """How many candidates this station has built."""

    @abstractmethod
    def build(self, opts_list: list[OptsJson], deadline: float | None = None) -> list[Built]:
        """Each candidate lowered with its opts, in the order given (a failure is that candidate's error). Past
        `deadline` (time.perf_counter()), where one is given, the builds not done are given up (error GIVEN_UP):
        a search's budget is spent."""

    @abstractmethod
    def measure(self, builts: Sequence[Built], best: Callable[[], float | None]) -> Iterator[Measured]:
        """Each built candidate (none failed) verified and timed on the device, yielded in the order given; best()
        is the best median so far when a candidate starts (its early-abort bound)."""

    @abstractmethod
    def retime(self, opts_list: list[OptsJson], repeats: int) -> tuple[list[list[float]], str | None]:
        """Each candidate's samples from `repeats` runs in turns, all on one machine (which is returned)."""

    @abstractmethod
    def wrong_at(self, opts: OptsJson) -> str | None:
        """Why the candidate is wrong at some other value of the kernel's variables, None when it is right."""

    @abstractmethod
    def close(self, wait: bool) -> None:
        """Stop this search's work (wait: for running builds to end)."""


class SearchStopped(RuntimeError):
    """A search told to stop at its next wait on the executor: another search of the same `beam_many` call failed
    or the call was interrupted."""


class Executor(ABC):
    """Where searches run: `beam(..., executor=...)`. One executor serves any number of searches, up to `searches`
    at once (`beam_many`)."""

    searches = 1
    """How many searches it serves at once: one where timing shares this machine with the builds (LocalExecutor)."""
    stopping: threading.Event | None = None
    """Where searches run side by side: set to make each stop at its next wait (SearchStopped)."""

    @abstractmethod
    def target(self, device: str) -> tuple[TargetInfo, Target]:
        """The device as the tuning database keys it, and the code generator's target for it."""

    @abstractmethod
    def station(self, ast: UOp, device: str, seed: int, timeout_s: float) -> Station:
        """A station for one search of ast on device."""

    @abstractmethod
    def describe(self) -> str:
        """What it is, for a search's progress (e.g. how many workers)."""

    def close(self) -> None:  # noqa: B027  (a default: only a cluster's executor holds something to let go)
        """Let go of what it holds (a cluster's workers); its searches have ended."""


def here() -> str:
    """This machine's name, as the database records where a candidate was built or timed."""
    return socket.gethostname()


class DeviceBench:
    """The device-side half of one kernel's search: compile a built candidate into a program, verify and time it,
    time finalists again in turns, check a winner at other values of its variables. It runs where the device is:
    in the search's process (LocalStation) or in a Ray actor on a machine that owns the device."""

    def __init__(self, ast: UOp, device: str, seed: int) -> None:
        self.ast, self.device, self.seed = ast, device, seed
        self._bench: Workbench | None = None
        self._checks: list[Workbench] | None = None

    @property
    def bench(self) -> Workbench:
        """Buffers with random inputs and the unoptimized kernel's answer, made on first use."""
        if self._bench is None:
            self._bench = Workbench(self.ast, self.device, self.seed)
        return self._bench

    def measure(self, kernel: Kernel, best_s: float | None) -> Timing:
        try:
            check_bounds(kernel.linear, kernel.name)  # built in another process: checked where it runs
            prog = devices.get(self.device).compile(kernel)
        except Exception as e:  # the candidate's failure, not the search's
            return Timing([], describe_error(e))
        return self.bench.measure(self.bench.bind(kernel, prog), best_s)

    def retime(self, opts_list: list[OptsJson], repeats: int) -> list[list[float]]:
        progs = [self.bench.bind(*compile_kernel(self.ast, self.device, _opts(o))) for o in opts_list]
        samples: list[list[float]] = [[] for _ in progs]
        for _ in range(repeats):
            for times, prog in zip(samples, progs, strict=True):
                times.append(timed_run(prog, self.bench.handles))
        return samples

    def wrong_at(self, opts: OptsJson) -> str | None:
        if self._checks is None:
            self._checks = [Workbench(self.ast, self.device, self.seed, v)
                            for v in values_to_verify(self.ast, self.seed)]
        if not self._checks:
            return None
        kernel, prog = compile_kernel(self.ast, self.device, _opts(opts))
        return next((f"at {b.values}: {err}" for b in self._checks
                     if (err := b.mismatch(b.run_from_start(b.bind(kernel, prog))[1]))), None)


def _opts(opts: OptsJson) -> list[Opt]:
    return [Opt.from_json(o) for o in opts]


# ---- the local executor ----
class LocalExecutor(Executor):
    """Builds in a process pool of `workers` (default: one per core), timing in the search's own process."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or cores()

    def target(self, device: str) -> tuple[TargetInfo, Target]:
        return describe_target(device), devices.get(device).target

    def station(self, ast: UOp, device: str, seed: int, timeout_s: float) -> Station:
        return LocalStation(ast, device, seed, Pool(ast, device, devices.get(device).target, self.workers, timeout_s))

    def describe(self) -> str:
        return f"local: {self.workers} compile process{'es' * (self.workers != 1)}, timing in this process"


class LocalStation(Station):
    def __init__(self, ast: UOp, device: str, seed: int, pool: Pool) -> None:
        self.pool, self.device_side, self.where = pool, DeviceBench(ast, device, seed), here()
        self.built = 0

    def build(self, opts_list: list[OptsJson], deadline: float | None = None) -> list[Built]:
        out = self.pool.build(opts_list, deadline)
        self.built += len(opts_list)
        return out

    def measure(self, builts: Sequence[Built], best: Callable[[], float | None]) -> Iterator[Measured]:
        for b in builts:
            yield Measured(self.device_side.measure(b.rebuild(), best()), self.where)

    def retime(self, opts_list: list[OptsJson], repeats: int) -> tuple[list[list[float]], str | None]:
        return self.device_side.retime(opts_list, repeats), self.where

    def wrong_at(self, opts: OptsJson) -> str | None:
        return self.device_side.wrong_at(opts)

    def close(self, wait: bool) -> None:
        self.pool.close(wait)


class Pool:
    """The process pool that lowers (and, where the dialect compiles in a worker, compiles) candidates, started on
    first use.

    A worker that dies (a crash, a kill) breaks the pool and fails every candidate in flight: those are built
    again one at a time in a fresh pool, so only the candidate that kills a worker is charged with it.
    """

    def __init__(self, ast: UOp, device: str, target: Target, workers: int, timeout_s: float) -> None:
        self.flat, self.device, self.target = flatten(ast), device, target
        self.workers, self.timeout_s = workers, timeout_s
        self._ex: ProcessPoolExecutor | None = None
        self.compile_here = target.dialect is not None and target.dialect.compiles_in_worker

    def build(self, opts_list: list[OptsJson], deadline: float | None = None) -> list[Built]:
        """Each candidate's build, in the order given; past the deadline, those not done are given up (queued ones
        cancelled, running ones left to end)."""
        futures = [self._submit(o) for o in opts_list]
        first: list[Built | None] = []
        for i, f in enumerate(futures):
            left = None if deadline is None else deadline - time.perf_counter()
            try:
                first.append(self._result(f, left))
            except TimeoutError:
                for g in futures[i:]:
                    g.cancel()
                first += [Built(None, GIVEN_UP)] * (len(futures) - i)
                break
        return [b if b is not None else self._alone(o) for b, o in zip(first, opts_list, strict=True)]

    def _alone(self, opts: OptsJson) -> Built:
        """A build whose worker died, again alone in a fresh pool: if that one dies too, this candidate is the cause."""
        return self._result(self._submit(opts)) or \
            Built(None, "the compile worker died while building this candidate (crashed or was killed)")

    def close(self, wait: bool) -> None:
        """Stop the workers, cancelling queued builds (wait: for those running to end)."""
        if self._ex is not None:
            self._ex.shutdown(wait=wait, cancel_futures=True)
            self._ex = None

    def _submit(self, opts: OptsJson) -> Future[Built]:
        with _main_not_rerun():  # workers are started as work is submitted
            if self._ex is None:
                self._ex = process_pool(self.workers)
            return self._ex.submit(build_candidate, self.flat, opts, self.device, self.target, self.timeout_s,
                                   self.compile_here)

    def _result(self, f: Future[Built], timeout: float | None = None) -> Built | None:
        """f's build; None when its worker died (the pool is then replaced); TimeoutError past `timeout` seconds."""
        if timeout is not None and timeout <= 0 and not f.done():
            raise TimeoutError
        try:
            return f.result(timeout)
        except TimeoutError:
            raise
        except BrokenProcessPool:
            if self._ex is not None:
                self._ex.shutdown(wait=False, cancel_futures=True)
                self._ex = None
            return None
        except Exception as e:  # e.g. the timeout firing just after the build finished
            return Built(None, describe_error(e))


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` build processes, spawned as work is submitted (submit under `_main_not_rerun()`): BEAM's
    candidates' and realize's parallel compiles (uopviz.parallel) are built in these."""
    return ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_worker_init)


@contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Start spawned workers without the parent's main module: they need nothing from it, and would otherwise run
    the parent's main script again (all of it, for a script without the `__main__` guard) before any work. A main
    module whose spec is named "__main__" is the case multiprocessing leaves alone (as for a package's __main__)."""
    main = sys.modules["__main__"]
    saved = getattr(main, "__spec__", None)
    main.__spec__ = ModuleSpec("__main__", None)
    try:
        yield
    finally:
        main.__spec__ = saved


class _Timeout(Exception):
    pass


def _worker_init() -> None:
    """Leave Ctrl-C to the search process (it stops the pool), and exit when that process dies: a worker holds
    its own end of the task queue, so a killed parent (kill -9) would otherwise leave it waiting forever."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = parent_process()
    if parent is not None:
        threading.Thread(target=lambda: (wait([parent.sentinel]), os._exit(1)), daemon=True).start()


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout("lowering and compiling took longer than the per-candidate timeout")


def build_candidate(flat_ast: FlatUOp, opts: OptsJson, device: str, target: Target, timeout_s: float | None,
                    compile_here: bool, where: str | None = None) -> Built:
    """In a worker: lower the kernel with opts, and compile it where compile_here (the program lands in the disk
    cache the device's process reads). The per-candidate timeout is an interval timer: it interrupts Python code
    and waits on the C compiler alike (a worker runs builds on its main thread, as a pool's and Ray's do); None:
    no timeout (a realize's kernel takes what it takes, as it would in the realizing process)."""
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s or 0)
    try:
        kernel = lower(unflatten(flat_ast), target, _opts(opts))
        if compile_here:
            devices.get(device).compile(kernel)
    except Exception as e:  # the candidate's failure, reported with it
        return Built(time.perf_counter() - t0, describe_error(e), where=where or here())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    fields = {f.name: getattr(kernel, f.name) for f in dataclasses.fields(Kernel)}
    fields["linear"] = flatten(kernel.linear)
    return Built(time.perf_counter() - t0, None, fields, len(kernel.linear.src), where or here())


def flatten(root: UOp) -> FlatUOp:
    """root's graph as (op, source positions, arg, tag) rows, sources first: picklable without recursion."""
    nodes = root.toposort()
    pos = {u: i for i, u in enumerate(nodes)}
    return [(u.op, tuple(pos[s] for s in u.src), u.arg, u.tag) for u in nodes]


def unflatten(rows: FlatUOp) -> UOp:
    out: list[UOp] = []
    for op, src, arg, tag in rows:
        out.append(UOp(op, tuple(out[i] for i in src), arg, tag))
    return out[-1]
