"""Compiling a schedule's kernels side by side (issue 29 item 4): `compile_all(keys)` brings every kernel a realize
is about to run into compile_kernel's cache, lowering (and, where the dialect compiles in a worker, compiling) the
missing ones in BEAM's build workers (uopviz.search.executor: spawned processes, kernels sent as flat node lists,
`build_candidate`) while this process lowers others itself.

Lowering is Python, so threads would take turns on the GIL; the C compiler is a child process either way. Work is
shared from both ends: every missing kernel is submitted to the pool in schedule order, and this process takes
kernels from the end of the list for as long as the pool has not started them (a queued future is cancelled and done
here), then waits for the rest. The workers start (once per process; the pool is kept) when the kernels left would
take over START_POOL_AFTER_S here: a script that compiles a few quick kernels never starts one.

A kernel lowered before, by any process (uopviz.lowered_cache), is read back here first: only the misses are
lowered, so a warm first call starts no worker and sends none anything. A worker lowers a kernel and keeps it for
next time; this process compiles the CPU kernels' libraries (the CL kernels' programs) in batches, one compiler run
for many kernels, on a background thread while lowering goes on (`Libraries`: a compiler run's fixed cost was most
of a small kernel's), and keeps the kernels it lowered itself once lowering has ended, while the last batches
compile.

compile_kernel stays the one place that compiles: a kernel lowered by a worker or here, or read back, is handed to it
(`lowered=`), which compiles it (from the disk cache, where its batch's compiler run left it) and keeps it; its bounds
were checked by the worker, or before it was kept on disk (an entry is written only then), so this process does not
check them again. A kernel a worker failed to build (its bounds included) is left to the caller, whose
compile_kernel raises its error in schedule order. While a trace records, every kernel is lowered here, in schedule
order, under the trace (no worker, nothing read back from disk: the trace shows each lowering), once per schedule
however often it runs, and handed over as lowered under it (`traced=True`, which the caller's compile_kernel then
uses); their libraries still compile in batches beside the lowering.

`UOPVIZ_COMPILE_WORKERS`: how many worker processes (default: two fewer than the cores, since this process lowers
too and the C compilers it runs need a core beside it; 0: none, every kernel lowered here one by one as before).

Progress: a first call that compiles for longer than PROGRESS_AFTER_S shows "compiling n of N kernels", rewritten
in place on stderr when it is a terminal, or in the notebook's output (hooks.compile_display) under IPython; not
otherwise (a log, tests' captured output), unless `UOPVIZ_COMPILE_PROGRESS=1` asks for it (then a line at most
once a second, and the last); `UOPVIZ_COMPILE_PROGRESS=0` turns it off everywhere.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sized
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TextIO

from uopviz import hooks, lowered_cache
from uopviz.codegen.opt import Opt
from uopviz.compiler import clear_ahead, compile_kernel, kept, lower_kernel
from uopviz.pipeline import lower
from uopviz.runtime import device as devices
from uopviz.runtime.cl import CLRuntime
from uopviz.runtime.cpu import CPURuntime
from uopviz.runtime.workers import cores
from uopviz.search.executor import Built, FlatUOp, OptsJson, _main_not_rerun, flatten, process_pool, unflatten
from uopviz.settings import env_count
from uopviz.target import Kernel, Target
from uopviz.uop.bounds import check_bounds
from uopviz.uop.ops import UOp
from uopviz.uop.pattern import recording

Key = tuple[UOp, str, tuple[Opt, ...]]
Todo = tuple[Key, str | None]
"""A kernel to lower, and the name its lowering is kept under (lowered_cache.key; None: not kept)."""

PROGRESS_AFTER_S = 1.0
"""How long compiling runs before its progress is shown: a first call that compiles for less says nothing."""

ENV_PASSED = ("UOPVIZ_CACHE_DIR", "HOME", "CC", "UOPVIZ_COMPILE_TIMEOUT")
"""What a worker's build takes from this process's environment at each request (the pool outlives changes to it):
where the disk cache is (the worker's library must land where this process looks), the compiler's time limit, and
the compiler a worker's runtime is made with (on its first request)."""

_pool: list[tuple[int, ProcessPoolExecutor]] = []  # this process's pool and its size, started on first use
_pool_lock = threading.Lock()

START_POOL_AFTER_S = 1.0
"""The workers are started (once per process) when the kernels left would take longer than this here, at the pace of
those done so far; 0: at once."""

BATCH_BYTES = 96_000
"""How much CPU kernel source waits before its libraries are compiled in one C compiler run (Libraries): enough to
spread the compiler's fixed cost over many kernels, little enough that the last batch, compiled once lowering ends,
is short."""

SPLIT_BYTES = 12_000
"""The last batch, compiled once lowering has ended and nothing else runs, is split across the cores in parts of at
least this much source (a compiler run's fixed cost makes smaller parts slower in all)."""

IDLE_BYTES = 12_000
"""How much CPU kernel source waits, while no compiler runs, before it is compiled (BATCH_BYTES while one runs): a
compiler that waited for BATCH_BYTES started only once a cold GPT step had lowered 96 KB, and then fell behind the
lowering it could have kept up with."""

STEAL = True
"""Whether this process takes kernels the workers have not started (False: the workers build every one; a test's
way to see them do it)."""

stats = {"here": 0, "workers": 0, "disk": 0}
"""How many kernels compile_all lowered in this process and in workers, and read back lowered from disk (for tests
and bench/compile.py)."""


def workers() -> int:
    """`UOPVIZ_COMPILE_WORKERS`, else two fewer than the cores this process may run on: one for its own lowering, one
    for the C compilers it runs beside it. On 2 cores a worker took the compilers' core (a cold GPT step's first
    call: 22.5 s without one, 26.7 s with one, in turns on a loaded machine; the C compilers' 3 s of CPU already
    fill the second core while this process lowers for 4 s)."""
    return env_count("UOPVIZ_COMPILE_WORKERS", max(cores() - 2, 0), "a number of processes")


def compile_all(keys: Iterable[Key], stream: TextIO | None = None, count: int | None = None) -> None:
    """Compile every (ast, device, opts) of keys that compile_kernel does not keep yet, in workers and here, showing
    progress on `stream` (default: stderr) when it takes long. A kernel that fails is left uncompiled (its caller's
    compile_kernel raises the error); Ctrl-C cancels what the workers have not started.

    keys may be an iterator (of `count` keys, for the progress line), which is read to its end: without workers,
    each key is taken only when the kernel before it is lowered, so that a caller choosing each kernel's opts as it
    makes its key (realize: the passes before Optimize and the heuristic, a fifth of a cold GPT step) does so while
    the first batches compile, not before any kernel is lowered."""
    clear_ahead()  # a new schedule: while a trace records, its kernels are lowered again under it
    traced = recording()
    progress = Progress(0, stream)

    def missing() -> Iterator[Key]:
        """keys not kept yet, each once; progress.total an upper bound on their number, exact at the end."""
        left = count if count is not None else len(keys) if isinstance(keys, Sized) else 0
        seen: set[Key] = set()
        for key in keys:
            left = max(left - 1, 0)
            if key not in seen and (traced or kept(key) is None):
                seen.add(key)
                progress.total = len(seen) + left
                yield key
        progress.total = len(seen)

    todo = missing()
    first = next(todo, None)
    if first is None:
        return
    progress.start = time.perf_counter()
    libs = Libraries(progress, traced)
    try:
        with _collector_paused():
            _lower_all(itertools.chain([first], todo), traced, libs)
            libs.flush(parts=cores())  # before the collector runs again: its first pass overlaps the compilers
            libs.store()
    finally:
        libs.finish()
        progress.finish()


def _lower_all(missing: Iterator[Key], traced: bool, libs: Libraries) -> None:
    """Every kernel of missing lowered (read back, here, or in workers) and handed to libs; without workers, each
    taken from missing as the one before it is done."""
    if traced:
        _in_the_trace(list(missing), libs)
        return
    n = workers()
    if n == 0:
        for key in missing:
            for item in _from_disk([key], libs):
                _here(item, libs)
        return
    todo = _from_disk(list(missing), libs)
    if len(todo) < 2:
        for item in todo:
            _here(item, libs)
        return
    first = _before_the_pool(todo, n, libs)
    if first < len(todo):
        _shared(todo[first:], n, libs)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a schedule's kernels lower: lowering builds hundreds of thousands
    of nodes and no cycles, and the collector's passes over a heap that keeps growing took 9% of a cold GPT step's
    lowering (4.65 -> 4.25 s of CPU). Left as it was found (a caller that turned it off keeps it off)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _in_the_trace(missing: list[Key], libs: Libraries) -> None:
    """While a trace records: each kernel lowered here in schedule order under the trace, as compile_kernel would,
    and handed to libs. At the first that fails, the kernels before it are compiled and its error raised, as the
    caller's compile_kernel would raise it next (lowering it twice would file it twice); where one before it failed
    to compile, the caller raises that one's error first."""
    for i, key in enumerate(missing):
        try:
            kernel = lower_kernel(*key)
            check_bounds(kernel.linear, kernel.name)
        except Exception:
            libs.finish()
            if all(kept(k) is not None for k in missing[:i]):
                raise
            return
        stats["here"] += 1
        libs.add(key, kernel)


def _from_disk(missing: list[Key], libs: Libraries) -> list[Todo]:
    """Compile the kernels lowered_cache holds; the others (with their entries' names) are left to lower."""
    todo: list[Todo] = []
    for key in missing:
        ast, device, opts = key
        name = lowered_cache.key(ast, device, opts, devices.get(device).target)
        kernel = lowered_cache.load(name, devices.get(device).target) if name is not None else None
        if kernel is None:
            todo.append((key, name))
            continue
        stats["disk"] += 1
        libs.add(key, kernel)  # kept only once compile_kernel or _build checked its bounds
    return todo


def _here(item: Todo, libs: Libraries) -> None:
    """One kernel lowered in this process, its bounds checked, handed to libs and kept on disk (by libs.store); its
    failure left to the caller."""
    (ast, device, opts), name = item
    target = devices.get(device).target
    try:
        kernel = lower(ast, target, opts)
        check_bounds(kernel.linear, kernel.name)
    except Exception:
        libs.failed()  # raised again, in schedule order, by the caller's compile_kernel
        return
    stats["here"] += 1
    if name is not None:
        libs.stores.append((name, kernel, target))
    libs.add(item[0], kernel)


class Libraries:
    """Lowered kernels on their way to compile_kernel (which compiles and keeps each, its bounds already checked),
    each counted done on `progress` once handed over: a CPU kernel's library (a CL kernel's program) is first
    compiled in a batch (CPURuntime.libraries, CLRuntime.libraries: one compiler run for several kernels) on a
    background thread, once BATCH_BYTES of source are waiting (IDLE_BYTES while no compiler runs), while this process
    goes on lowering (the compiler is a child process, or CL's compile worker, so the two run side by side); a
    batch's kernels are handed over once it is compiled, and `finish` compiles the rest and waits. Other devices'
    kernels are handed over at once."""

    def __init__(self, progress: Progress, traced: bool = False) -> None:
        """traced: the kernels were lowered under the trace recording now (compile_kernel's `traced`)."""
        self.progress, self.traced = progress, traced
        self.waiting: dict[CPURuntime | CLRuntime, list[tuple[Key, Kernel]]] = {}
        self.size = 0
        self.builds: list[tuple[Future[None], list[tuple[Key, Kernel]]]] = []
        self.stores: list[tuple[str, Kernel, Target]] = []
        """Kernels lowered here to keep on disk (lowered_cache.store, by `store`) under their entries' names."""

    def add(self, key: Key, kernel: Kernel) -> None:
        rt = devices.get(key[1])
        if not isinstance(rt, CPURuntime | CLRuntime) or kernel.source is None:
            self._hand_over(key, kernel)
        else:
            self.waiting.setdefault(rt, []).append((key, kernel))
            self.size += len(kernel.source)
            if self.size >= BATCH_BYTES or (self.size >= IDLE_BYTES and self._idle()):
                self.flush()
        self.collect()

    def _idle(self) -> bool:
        """No batch of this realize is compiling (IDLE_BYTES)."""
        return all(f.done() for f, _ in self.builds)

    def store(self) -> None:
        """The kernels lowered here kept on disk, once lowering has ended and the last batches compile: storing
        (the JSON form and its check) was 8% of a cold GPT step's lowering, which the compilers waited on, and is
        time this process would spend waiting for them."""
        for name, kernel, target in self.stores:
            lowered_cache.store(name, kernel, target)
        self.stores.clear()

    def failed(self) -> None:
        """A kernel that will not come (its lowering failed): done, its error left to the caller."""
        self.progress.step()

    def flush(self, parts: int = 1) -> None:
        """The kernels waiting, per runtime, sent to compiler threads: one batch, or up to `parts` batches of about
        the same source size (each at least SPLIT_BYTES) that compile side by side (CPU kernels: CL's compile worker
        takes one request at a time, so its parts would only pay the fixed cost more often)."""
        for rt, items in self.waiting.items():
            size = sum(len(k.source or "") for _, k in items)
            split = parts if isinstance(rt, CPURuntime) else 1
            for part in _balanced(items, max(1, min(split, len(items), size // SPLIT_BYTES))):
                self.builds.append((_compilers().submit(rt.libraries, [k for _, k in part]), part))
        self.waiting.clear()
        self.size = 0

    def collect(self, wait: bool = False) -> None:
        """The kernels of every batch compiled by now (wait: of every batch) handed over."""
        while self.builds and (wait or self.builds[0][0].done()):
            f, items = self.builds.pop(0)
            with contextlib.suppress(Exception):  # a batch that failed: each kernel compiles alone in compile_kernel
                f.result()
            for key, kernel in items:
                self._hand_over(key, kernel)

    def finish(self) -> None:
        """The last batch compiled (split across the cores: lowering has ended, so they would idle) and waited for,
        and every kernel handed over."""
        self.flush(parts=cores())
        self.collect(wait=True)

    def _hand_over(self, key: Key, kernel: Kernel) -> None:
        """kernel (lowered for key, its bounds checked) compiled and kept by compile_kernel; its failure left to the
        caller's compile_kernel, which raises it again in schedule order."""
        with contextlib.suppress(Exception):
            compile_kernel(*key, lowered=kernel, checked=True, traced=self.traced)
        self.progress.step()


def _balanced(items: list[tuple[Key, Kernel]], parts: int) -> list[list[tuple[Key, Kernel]]]:
    """items in `parts` groups of about equal source size (largest first, each to the smallest group so far)."""
    groups: list[list[tuple[Key, Kernel]]] = [[] for _ in range(parts)]
    sizes = [0] * parts
    for item in sorted(items, key=lambda kv: -len(kv[1].source or "")):
        i = sizes.index(min(sizes))
        groups[i].append(item)
        sizes[i] += len(item[1].source or "")
    return [g for g in groups if g]


def _compilers() -> ThreadPoolExecutor:
    """The threads that wait on batches' C compilers (one per core: the compilers are processes)."""
    with _pool_lock:
        if not _compiler_threads:
            _compiler_threads.append(ThreadPoolExecutor(max(cores(), 1), thread_name_prefix="uopviz-cc"))
        return _compiler_threads[0]


_compiler_threads: list[ThreadPoolExecutor] = []


def _before_the_pool(todo: list[Todo], n: int, libs: Libraries) -> int:
    """How many of todo's kernels this process compiled before it started the workers: where none has started yet,
    kernels are done here one by one until the rest would take longer than START_POOL_AFTER_S at the pace so far
    (a script that compiles a few quick kernels never starts a worker, nor waits at exit for one to start)."""
    if START_POOL_AFTER_S <= 0 or (_pool and _pool[0][0] == n):
        return 0
    t0 = time.perf_counter()
    for i, item in enumerate(todo):
        _here(item, libs)
        if (time.perf_counter() - t0) / (i + 1) * (len(todo) - i - 1) > START_POOL_AFTER_S:
            return i + 1
    return len(todo)


def _shared(todo: list[Todo], n: int, libs: Libraries) -> None:
    """todo built by n workers (from the front) and this process (from the back)."""
    pool = _get_pool(n)
    env = {k: os.environ[k] for k in ENV_PASSED if k in os.environ}
    futures: list[Future[Built]] = []
    try:
        with _main_not_rerun():  # workers start as work is submitted
            for (ast, device, opts), name in todo:
                target = devices.get(device).target
                futures.append(pool.submit(_build, env, flatten(ast), [o.to_json() for o in opts], target, name))
    except BrokenProcessPool:
        _drop_pool()
    pending = dict(zip(futures, todo, strict=False))
    try:
        for f, item in reversed(list(pending.items()) if STEAL else []):
            if not f.cancel():
                break  # started (or queued for a worker): so are all before it
            del pending[f]
            _here(item, libs)
        for item in todo[len(futures):]:  # not submitted (the pool broke)
            _here(item, libs)
        while pending:
            done, _ = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            libs.collect()
            libs.progress.show()
            for f in done:
                item = pending.pop(f)
                built = _result(f)
                if built is None:  # the worker died: here, alone
                    _here(item, libs)
                elif built.error is None:
                    stats["workers"] += 1
                    libs.add(item[0], built.rebuild())
                else:
                    libs.failed()
    finally:
        for f in pending:  # interrupted: what no worker has started is not
            f.cancel()


def _build(env: dict[str, str], flat: FlatUOp, opts: OptsJson, target: Target, name: str | None) -> Built:
    """In a worker, under the requester's environment: the kernel lowered and its bounds checked (then kept under
    name). The requester compiles it (CPU kernels in batches: uopviz.parallel.Libraries)."""
    for k in ENV_PASSED:
        if k in env:
            os.environ[k] = env[k]
        else:
            os.environ.pop(k, None)
    t0 = time.perf_counter()
    try:
        kernel = lower(unflatten(flat), target, [Opt.from_json(o) for o in opts])
        check_bounds(kernel.linear, kernel.name)
    except Exception as e:  # the requester's compile_kernel raises it again, in schedule order
        return Built(time.perf_counter() - t0, f"{type(e).__name__}: {e}")
    if name is not None:
        lowered_cache.store(name, kernel, target)
    return Built(time.perf_counter() - t0, None, lowered_cache.fields_of(kernel), len(kernel.linear.src))


def _result(f: Future[Built]) -> Built | None:
    """f's build; None when its worker died (the pool is then replaced on next use)."""
    try:
        return f.result()
    except BrokenProcessPool:
        _drop_pool()
        return None
    except Exception:
        return None


def _get_pool(n: int) -> ProcessPoolExecutor:
    """This process's pool of n workers (kept between calls: its start is paid once)."""
    with _pool_lock:
        if _pool and _pool[0][0] != n:
            _drop_pool()
        if not _pool:
            _pool.append((n, process_pool(n)))
        return _pool[0][1]


def _drop_pool() -> None:
    if _pool:
        _pool.pop()[1].shutdown(wait=False, cancel_futures=True)


class Progress:
    """"compiling n of N kernels", once compiling has run PROGRESS_AFTER_S: on a terminal (stderr rewritten in
    place), in a notebook (hooks.compile_display), or where UOPVIZ_COMPILE_PROGRESS=1 asks, as lines."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total, self.done, self.start = total, 0, time.perf_counter()
        self.stream = stream or sys.stderr
        mode = os.environ.get("UOPVIZ_COMPILE_PROGRESS", "").strip().lower()
        self.tty = _isatty(self.stream)
        self.notebook = hooks.compile_display is not None and mode != "0" and not self.tty
        self.enabled = mode not in ("0", "false", "off") and (self.tty or mode in ("1", "true", "on"))
        self.display: Any = None
        self.shown = False
        self.last = 0.0

    def step(self) -> None:
        self.done += 1
        self.show()

    def show(self) -> None:
        now = time.perf_counter()
        if now - self.start < PROGRESS_AFTER_S or self.total < 2:  # one kernel is its own progress
            return
        line = f"uopviz: compiling {self.done} of {self.total} kernels ({now - self.start:.0f} s)"
        if self.enabled:
            if self.tty:
                self.stream.write(f"\r{line}\x1b[K")
            elif now - self.last >= 1.0 or self.done == self.total:
                self.stream.write(line + "\n")
                self.last = now
            self.stream.flush()
            self.shown = True
        elif self.notebook:
            if self.display is None:
                assert hooks.compile_display is not None
                self.display = hooks.compile_display()
                if self.display is None:
                    self.notebook = False
                    return
            self.display.update(line)

    def finish(self) -> None:
        if self.shown and self.tty:
            self.stream.write("\n")
            self.stream.flush()
        if self.display is not None:
            self.display.update(f"uopviz: compiled {self.done} of {self.total} kernels in "
                                f"{time.perf_counter() - self.start:.1f} s")


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
