"""realize(): schedule Tensor-level graphs into kernels, compile each for its device, and run them.

The schedule and each kernel's lowering are recorded (uopviz.pipeline), so `with uopviz.trace()` around a
realize shows every stage. A kernel compiles with the opts its caller gives, or, here, the default opts for it
on its device (uopviz.search.policy: tuned, searched with UOPVIZ_BEAM, or the heuristic's).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Generic, NamedTuple, TypeVar

from uopviz import pipeline
from uopviz.compiler import compile_kernel, kept
from uopviz.parallel import compile_all
from uopviz.pipeline import KernelCall, calls_of, schedule
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.device import Program
from uopviz.schedule import pack, pads, reductions, rows
from uopviz.schedule.inplace import writes_in_place
from uopviz.schedule.split import largest_size, outputs_of, unbind
from uopviz.search import policy
from uopviz.search.policy import default_opts
from uopviz.target import Kernel
from uopviz.trace.recorder import user_line
from uopviz.uop.alu import evaluate, size_value
from uopviz.uop.ops import Ops, UOp, prod
from uopviz.uop.pattern import recording


def is_realized(u: UOp) -> bool:
    """Data in a buffer, row-major: Reshape(Buffer, shape)."""
    return u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER


class Launch(NamedTuple):
    """One kernel run as it happened: the kernel, its program, its buffers and its variables' values (what a JIT
    replays, and realize's schedule cache); `key`: what compile_kernel keeps the program under (None for a copy);
    `line`: the user's line that scheduled it (trace.recorder.user_line), noted while a capture() is open, so a
    profile of a @jit replay files each launch under the line in the function that made it."""

    kernel: Kernel
    prog: Program
    buffers: list[UOp]
    vals: dict[str, int]
    key: tuple[UOp, str, tuple[Any, ...]] | None = None
    line: tuple[str, int, str] | None = None

    @property
    def outputs(self) -> int:
        """How many of its buffers, the first ones, the launch writes (a kernel of siblings writes several)."""
        return outputs_of(self.key[0]) if self.key is not None else 1


_captures: list[list[Launch]] = []  # open capture() blocks, innermost last
_profiles: list[Callable[[Launch, tuple[int, ...], float, float], None]] = []  # open profiling() blocks, innermost last


@contextmanager
def capture() -> Iterator[list[Launch]]:
    """Record every kernel run inside the block, in order (uopviz.tensor.jit replays them)."""
    launches: list[Launch] = []
    _captures.append(launches)
    try:
        yield launches
    finally:  # by identity: list.remove compares by value, and an outer block's list may equal this one
        del _captures[next(i for i, c in enumerate(_captures) if c is launches)]


@contextmanager
def profiling(report: Callable[[Launch, tuple[int, ...], float, float], None]) -> Iterator[None]:
    """Inside the block every launch (realize's, a cached schedule's, a @jit replay's) waits for its kernel, and
    `report` is told the launch, its variables' values, its kernel's time as the device measures it and the
    launch's wall time from the call until the kernel is done, in seconds (uopviz.profile)."""
    _profiles.append(report)
    try:
        yield
    finally:
        _profiles.remove(report)


def run_launch(launch: Launch, handles: Sequence[Any], vals: tuple[int, ...], wait: bool = False) -> float:
    """Run one launch on these handles; its time in seconds where it waited (wait, or a profile is open), else 0."""
    if not _profiles:
        return launch.prog(handles, vals, wait=wait) or 0.0
    t0 = time.perf_counter()
    t = launch.prog(handles, vals, wait=True) or 0.0
    wall = time.perf_counter() - t0
    for report in _profiles:
        report(launch, vals, t, wall)
    return t


def run_launches(launches: Sequence[Launch], handles: Sequence[Sequence[Any]], vals: Sequence[tuple[int, ...]]) \
        -> None:
    """Run launches in order on these handles and values (a @jit replay): each one its program's call alone
    where no profile is open, the check made once for all of them."""
    if _profiles:
        for launch, hs, vs in zip(launches, handles, vals, strict=True):
            run_launch(launch, hs, vs)
        return
    for launch, hs, vs in zip(launches, handles, vals, strict=True):
        launch.prog(hs, vs)


def run_schedule(graph: UOp, timed: bool = False) -> float:
    """Run the graph's Calls in dependency order; with timed, wait for each and return the kernels' total
    time in seconds (device time where the device measures it). A graph over several devices runs each device's
    calls on a thread of its own, each call after the calls whose buffers it depends on."""
    steps = []
    calls = calls_of(graph)
    keys: list[tuple[UOp, str, tuple[Any, ...]] | None] = []

    def each_key() -> Iterator[tuple[UOp, str, tuple[Any, ...]]]:
        for call in calls:
            keys.append(_key(call) if call.ast.op is not Ops.COPY else None)
            if keys[-1] is not None:
                yield keys[-1]
    compile_all(each_key(), count=len(calls))  # side by side, before any runs; each key made as its turn comes
    for call, key in zip(calls, keys, strict=True):
        kernel, prog = _program(call, key)
        launch = Launch(kernel, prog, call.buffers, call.vals, key, user_line() if _captures else None)
        steps.append((launch, tuple(call.vals[v] for v in kernel.vars)))
        for launches in _captures:
            launches.append(launch)
    if len({launch.buffers[0].arg.device for launch, _ in steps}) > 1:
        return _run_concurrently(steps, timed)
    return sum(run_launch(launch, [buffers.handle(b) for b in launch.buffers], vals, timed) for launch, vals in steps)


def _program(call: KernelCall, key: tuple[UOp, str, tuple[Any, ...]] | None) -> tuple[Kernel, Program]:
    """The kernel and program of a Call: a kernel compiled with its default opts on its device (key: `_key(call)`,
    what compile_kernel keeps it under), or a copy between devices (a program that moves the source buffer's memory
    into the destination's; no key)."""
    if key is not None:
        return compile_kernel(*key)
    dst, src = call.buffers[0].arg, call.buffers[1].arg  # the memory's description only: a replay passes others
    kernel = Kernel(f"copy_{src.device}_to_{dst.device}", call.ast, None, (dst.dtype, src.dtype))

    def copy(handles: Sequence[Any], vals: Sequence[int] = (), wait: bool = False) -> float | None:
        t0 = time.perf_counter()
        buffers.transfer(dst.device, handles[0], src.device, handles[1], src.size, src.dtype)
        return time.perf_counter() - t0 if wait else None
    return kernel, copy


def _key(call: KernelCall) -> tuple[UOp, str, tuple[Any, ...]]:
    """What compile_kernel keeps a kernel's program under: the kernel with its default opts on its device."""
    device = call.buffers[0].arg.device
    return (call.ast, device, default_opts(call.ast, device))


def _run_concurrently(steps: list[tuple[Launch, tuple[int, ...]]], timed: bool) -> float:
    """Run steps (in dependency order) on each device's worker thread: a step waits for the last writer of each
    buffer it reads and, for each buffer it writes, for its last writer and the readers since (memory the plan
    reuses). Steps reach each worker in order, so a step's dependencies are always queued before it. The
    workers are shared, so one graph is submitted and run at a time: two graphs' steps interleaved on two
    workers could each wait for a step queued behind the other."""
    from concurrent.futures import Future, wait

    def run(deps: list[Future[float]], launch: Launch, handles: list[Any], vals: tuple[int, ...]) -> float:
        wait(deps)
        for d in deps:
            d.result()  # a failed dependency fails this step too
        return run_launch(launch, handles, vals, timed)

    writer: dict[UOp, Future[float]] = {}
    readers: dict[UOp, list[Future[float]]] = {}
    futures: list[Future[float]] = []
    with _ONE_GRAPH_AT_A_TIME:
        try:
            for launch, vals in steps:
                outs, ins = launch.buffers[:launch.outputs], launch.buffers[launch.outputs:]
                deps = [writer[b] for b in (*outs, *ins) if b in writer] + [r for o in outs for r in readers.get(o, [])]
                handles = [buffers.handle(b) for b in launch.buffers]
                f = _device_worker(outs[0].arg.device).submit(run, deps, launch, handles, vals)
                futures.append(f)
                for o in outs:
                    writer[o], readers[o] = f, []
                for b in ins:
                    readers.setdefault(b, []).append(f)
            return sum(f.result() for f in futures)
        finally:
            wait(futures)  # every step has ended (a failed one fails the rest) before the buffers may go


_ONE_GRAPH_AT_A_TIME = threading.Lock()


@functools.cache
def _device_worker(device: str) -> ThreadPoolExecutor:
    """The thread that runs a device's steps of multi-device graphs: one per device, kept between calls
    (starting threads for every call cost a third of a sharded elementwise chain's time)."""
    return ThreadPoolExecutor(1, thread_name_prefix=f"uopviz-{device}")


def realize(roots: Sequence[UOp], outputs: Mapping[int, UOp] | None = None, device: str | None = None, *,
            known: Structure | None = None) -> list[UOp]:
    """Each root as Reshape(Buffer, shape), computing what is not in memory yet (values made from constants
    alone on `device`, default: the device of the buffers they are used with). A graph of the structure of one
    realized before runs that one's kernels again without scheduling (`schedule_cache`). `known`: this realize's
    structure where the caller has it (every root to be computed, each root k into outputs[k])."""
    todo = [k for k, r in enumerate(roots) if not is_realized(r) or (outputs and k in outputs)]
    if not todo:
        return list(roots)
    pins = {i: outputs[k] for i, k in enumerate(todo) if outputs and k in outputs}
    values = [roots[k] for k in todo]
    found = schedule_cache.lookup(values, pins, device, known if len(todo) == len(roots) else None)
    if isinstance(found, list):
        written = found
    else:
        graph = schedule(values, pins, device)
        with capture() as launches:
            run_schedule(graph)
        out_iter = iter(graph.src)
        written = [next(out_iter).src[0] if largest_size(r.shape) else None for r in values]
        if found is not None:
            schedule_cache.add(found, launches, written)
    out = list(roots)
    for k, r, buf in zip(todo, values, written, strict=True):
        out[k] = (buf if buf is not None else buffers.new_buffer(0, r.dtype, r.device or device)).reshape(r.shape)
    return out


# ---------------------------------------------------------------- the schedule cache
PURE = "_schedule_cache_pure"
"""Marks (in a UOp's __dict__) a node whose graph holds no Buffer and no Bind, once a realize's structure walk met
it: the node itself, hash-consed, is its structure, so a walk takes it as it is and does not go below it again (nor
do other walks that look for buffers: reads_any, the front-end's cut_from_gradients)."""

OWN_GRADIENT = "_own_gradient"
"""Marks (in a UOp's __dict__) a node differentiated by a rule of its own (uopviz.tensor.gradient.own_gradient): the
rule is the op's that built the node, so it is a function of the node's structure, but a node of the same structure
built from plain ops has none; the structure key says which."""


class _Uncached(Exception):
    """A graph the schedule cache leaves to the scheduler (two values bound to one variable: its error)."""


class Structure(NamedTuple):
    """A graph as the schedule cache sees it: `key` (its structure: every node but a Buffer or a Bind's value, each
    Buffer as its size, dtype and device, numbered where it is first met), its Buffers in that order (the pins
    among them), the values its variables are bound to and how many nodes the key names."""

    key: tuple[Any, ...]
    buffers: list[UOp]
    values: dict[str, int]
    nodes: int


class _Entry(NamedTuple):
    """A schedule as its launches: per launch its compile key (None for a copy), a copy's kernel and program, the
    buffers it takes (numbers into the graph's Buffers, then the new buffers), its variables and their values no
    Bind gives; the new buffers' (size, dtype, device); each root's buffer (-1: a root of size 0); the buffers the
    launches and roots use, the roots' own first (`produced` of them), then the rest: the graph's inputs and the
    intermediates, which need no Buffer node of their own where no launch is recorded; what it was made under."""

    launches: list[tuple[Any, tuple[Kernel, Program] | None, tuple[int, ...], tuple[str, ...], dict[str, int]]]
    fresh: list[tuple[int, Any, Any]]
    outputs: list[int]
    used: list[int]
    produced: int
    nodes: int
    made_under: tuple[Any, ...]


def _settings() -> tuple[Any, ...]:
    """What a schedule depends on besides its graph: the schedule's passes and their tunables, the tuning
    database's state and UOPVIZ_BEAM (the opts realize chooses)."""
    return (pipeline.SCHEDULE, rows.ROW_BYTES, reductions.SPLIT_MIN, reductions.PARTS, reductions.MIN_PART,
            pack.ALIASED_SETS, pack.REUSE, pads.REUSE, policy.tuning_state())


def structure(roots: Sequence[UOp], pins: Mapping[int, UOp] | None = None, device: str | None = None) -> Structure:
    """The schedule cache's view of a realize of roots (pins: root index -> the Buffer it is written into): one
    walk of the graph, stopping at nodes known to hold no Buffer or Bind. Two realizes with the same key have the
    same schedule up to which buffers they read and write and the values their variables take: the same Buffer
    met twice is one node (so aliasing is in the key), and a Bind's value is not (a schedule never depends on it:
    kernels take variables, buffers are made for their largest values). _Uncached for a graph left to schedule().

    The key is one flat tuple: per node its op, then for a Buffer its size, dtype, device and address space, for a
    Bind its variable's reference, else its arg, tag, whether it has a gradient rule of its own (OWN_GRADIENT: what
    backward builds from it, which the front-end's gradient cache keys on this structure), source count and
    sources' references (a pure node itself, or the number of a node met before). The op and the count say where
    each node's part ends, so two graphs have equal keys only if they are the same; and a tuple per node would be
    thousands of objects that live through the realize, each one more for the garbage collector's young generation
    to scan."""
    flat: list[Any] = []
    add = flat.extend
    bufs: list[UOp] = []
    values: dict[str, int] = {}
    ref: dict[UOp, Any] = {}  # a node done -> how its users name it: itself if pure, else its number in the key
    named = ref.__getitem__
    pinned = list((pins or {}).items())
    # locals: the loop runs once per node of every eager realize
    BUFFER, BIND, pure, own = Ops.BUFFER, Ops.BIND, PURE, OWN_GRADIENT
    count = 0
    for root in (*roots, *(b for _, b in pinned)):
        if root in ref:
            continue
        if root.__dict__.get(pure):
            ref[root] = root
            continue
        stack = [(root, iter(_below(root)))]
        while stack:
            node, it = stack[-1]
            for s in it:
                if s not in ref:
                    if s.__dict__.get(pure):
                        ref[s] = s
                    else:
                        stack.append((s, iter(s.src[:1] if s.op is BIND else s.src)))  # _below, inlined
                        break
            else:
                stack.pop()
                op = node.op
                if op is BUFFER:
                    a = node.arg
                    ref[node] = count
                    count += 1
                    add((op, a.size, a.dtype, a.device, a.addrspace))
                    bufs.append(node)
                elif op is BIND:
                    name, value = node.src[0].arg.name, node.src[1].arg.value
                    if values.setdefault(name, value) != value:
                        raise _Uncached
                    ref[node] = count
                    count += 1
                    add((op, ref[node.src[0]]))
                else:
                    srcs = list(map(named, node.src))
                    if int in map(type, srcs):  # a source that is not pure: numbered
                        ref[node] = count
                        count += 1
                        add((op, node.arg, node.tag, own in node.__dict__, len(srcs)))
                        add(srcs)
                    else:
                        node.__dict__[pure] = True
                        ref[node] = node
    key = _Hashed((tuple(flat), tuple(ref[r] for r in roots), tuple((k, ref[b]) for k, b in pinned), device))
    return Structure(key, bufs, values, count)


class _Hashed(tuple):
    """A tuple that hashes its items once: the schedule cache's key (every node's op, arg and sources) and the
    compile keys of its launches (opts whose enums hash in Python) are looked up twice per use (get, then
    move_to_end), on every eager realize."""

    _hash: int

    def __new__(cls, items: tuple[Any, ...]) -> _Hashed:
        self = super().__new__(cls, items)
        self._hash = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._hash


def _below(u: UOp) -> tuple[UOp, ...]:
    """The sources the structure walk visits: a Bind's variable (not its value), a Buffer's none."""
    return u.src[:1] if u.op is Ops.BIND else u.src


class ScheduleCache:
    """Eager realizes of a graph seen before, without the schedule: `lookup` finds the schedule of an earlier realize
    of the same structure (ops, shapes, dtypes, devices, constants, which reads are of the same buffer; any buffers,
    any bound values) and runs its programs on this realize's buffers, as a @jit replay does: its inputs in place of
    the earlier ones, fresh buffers for its outputs and intermediates (from the memory pool), its variables at the
    values bound now. It keeps no Buffer and no program of its own (programs are looked up in compile_kernel's
    cache, so libraries of dropped programs are unloaded as before): only the kernels' keys and numbers.

    Left to the scheduler: a realize while a trace records (its passes must be recorded), a schedule over several
    devices, a graph that binds one variable to two values; a change of the tuning database, UOPVIZ_BEAM or the
    schedule's tunables makes a kept schedule stale (scheduled again). `hits` and `misses` count lookups (a realize
    left to the scheduler is neither); at most `max_entries` schedules of `max_nodes` graph nodes in all are kept,
    the least recently used dropped first. UOPVIZ_SCHEDULE_CACHE=0 turns it off (`enabled`)."""

    def __init__(self, max_entries: int = 256, max_nodes: int = 1_000_000) -> None:
        self.max_entries, self.max_nodes = max_entries, max_nodes
        self.enabled = os.environ.get("UOPVIZ_SCHEDULE_CACHE", "1").strip() != "0"
        self.hits = self.misses = 0
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._in_place: OrderedDict[tuple[Any, ...], bool] = OrderedDict()  # in_place's answers by structure
        self._nodes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Drop every kept schedule and zero the counters."""
        with self._lock:
            self._entries.clear()
            self._in_place.clear()
            self._nodes = self.hits = self.misses = 0

    def lookup(self, roots: Sequence[UOp], pins: Mapping[int, UOp], device: str | None,
               known: Structure | None = None) -> list[UOp | None] | Structure | None:
        """Run a kept schedule of this realize and return the roots' buffers (None for a root of size 0); else the
        realize's structure, to `add` its schedule under once it has run (None: not to be kept). `known`: the
        realize's structure, where the caller has it (`structure_of`)."""
        found = known if known is not None else self.structure_of(roots, pins, device)
        if found is None:
            return None
        if device is None and not found.buffers:
            return None  # computed on the default device: not part of the key
        written = self.run(found)
        if written is None:
            self.misses += 1
            return found
        return written

    def run(self, found: Structure) -> list[UOp | None] | None:
        """Run the kept schedule of found's structure on its buffers and bound values and return the roots' buffers
        (None for a root of size 0), counted as a hit; None where no schedule of it is kept or the kept one is stale
        (nothing run or counted). The front-end's caches of gradient and optimizer graphs call it with a structure
        they know without building its graph (uopviz.tensor.autograd, uopviz.nn.optim)."""
        with self._lock:
            entry = self._entries.get(found.key)
            if entry is not None:
                self._entries.move_to_end(found.key)
        if entry is None or entry.made_under != _settings():
            return None
        progs = []
        for key, copy, _, _, _ in entry.launches:
            kp = kept(key) if key is not None else copy
            if kp is None:  # compile_kernel dropped it: schedule again
                return None
            progs.append(kp)
        self.hits += 1
        plain = not (_captures or _profiles)  # neither recorded nor timed: each launch is its program's call
        base, fresh, used = len(found.buffers), entry.fresh, entry.used
        table: list[Any] = found.buffers + [None] * len(fresh)
        handles: list[Any] = [None] * len(table)
        scratch = []  # the intermediates' memory, back to the pool as this returns (as their Buffers' was)
        for k, i in enumerate(used):
            if i < base:
                handles[i] = buffers.handle(table[i])
            elif plain and k >= entry.produced:  # an intermediate: its memory alone, no Buffer node
                mem = buffers.scratch(*fresh[i - base])
                scratch.append(mem)
                handles[i] = mem.handle
            else:
                table[i] = buf = buffers.new_buffer(*fresh[i - base])
                handles[i] = buffers.handle(buf)
        values = found.values
        for (kernel, prog), (key, _, refs, names, fixed) in zip(progs, entry.launches, strict=True):
            vals = tuple(values[v] if v in values else fixed[v] for v in names) if names else ()
            if plain:
                prog([handles[i] for i in refs], vals)
                continue
            launch = Launch(kernel, prog, [table[i] for i in refs], dict(zip(names, vals)), key,
                            user_line() if _captures else None)
            run_launch(launch, [handles[i] for i in refs], vals)
            for launches in _captures:
                launches.append(launch)
        del handles  # before the intermediates' memory goes: the pool takes back only memory nothing else holds
        return [table[i] if i >= 0 else None for i in entry.outputs]

    def structure_of(self, roots: Sequence[UOp], pins: Mapping[int, UOp], device: str | None) -> Structure | None:
        """The structure a realize of roots (pins: root index -> the Buffer it is written into) is kept under; None
        where the cache leaves it to the scheduler (off, recording, a variable bound to two values)."""
        if not self.enabled or recording():
            return None
        try:
            return structure(roots, pins, device)
        except _Uncached:
            return None

    def in_place(self, found: Structure | None, decide: Callable[[], bool]) -> bool:
        """Whether an assign of found's structure writes its values straight into its targets: decide() once per
        structure (the answer is a function of it: which values read which targets, through what), kept as long as
        the structure's schedule could be (at most max_entries, least recently used dropped first)."""
        if found is None:
            return decide()
        with self._lock:
            answer = self._in_place.get(found.key)
            if answer is not None:
                self._in_place.move_to_end(found.key)
                return answer
        answer = decide()
        with self._lock:
            self._in_place[found.key] = answer
            while len(self._in_place) > self.max_entries:
                self._in_place.popitem(last=False)
        return answer

    def add(self, found: Structure, launches: Sequence[Launch], written: Sequence[UOp | None]) -> None:
        """Keep the schedule that ran as `launches` (writing the roots' buffers `written`) under found's key; a
        schedule over several devices is not kept."""
        if len({launch.buffers[0].arg.device for launch in launches}) > 1:
            return
        number = {b: i for i, b in enumerate(found.buffers)}
        fresh: list[tuple[int, Any, Any]] = []

        def ref(b: UOp) -> int:
            if b not in number:
                number[b] = len(found.buffers) + len(fresh)
                fresh.append((b.arg.size, b.arg.dtype, b.arg.device))
            return number[b]
        kept_launches = []
        for launch in launches:
            copy = (launch.kernel, launch.prog) if launch.key is None else None
            refs = tuple(ref(b) for b in launch.buffers)
            names = launch.kernel.vars
            fixed = {v: launch.vals[v] for v in names if v not in found.values}
            kept_launches.append((_Hashed(launch.key) if launch.key is not None else None, copy, refs, names, fixed))
        outputs = [ref(b) if b is not None else -1 for b in written]
        produced = sorted({i for i in outputs if i >= 0})
        used = produced + sorted({i for _, _, refs, _, _ in kept_launches for i in refs} - set(produced))
        entry = _Entry(kept_launches, fresh, outputs, used, len(produced), found.nodes, _settings())
        with self._lock:
            if (old := self._entries.pop(found.key, None)) is not None:
                self._nodes -= old.nodes
            self._entries[found.key] = entry
            self._nodes += entry.nodes
            while self._entries and (len(self._entries) > self.max_entries or self._nodes > self.max_nodes):
                self._nodes -= self._entries.popitem(last=False)[1].nodes


V = TypeVar("V")


class Recent(Generic[V]):
    """At most `size` values by key, the least recently used dropped first, under a lock (eager realizes may run on
    several threads): the front-end's answers kept per structure (backward's and the optimizers' replays,
    cut_from_gradients)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._kept: OrderedDict[Any, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, key: Any) -> V | None:
        with self._lock:
            value = self._kept.get(key)
            if value is not None:
                self._kept.move_to_end(key)
            return value

    def put(self, key: Any, value: V) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


schedule_cache = ScheduleCache()
"""realize()'s schedule cache (uopviz.realize.ScheduleCache): `schedule_cache.hits`, `.misses`, `.clear()`."""


def assign(targets: Sequence[UOp], values: Sequence[UOp]) -> Structure | None:
    """Compute each value into its target's buffer (a target: Reshape(Buffer, shape) of its value's shape and dtype,
    all on one device), in one schedule. Returns the structure of that one realize where it wrote in place and the
    schedule cache keeps it (`schedule_cache.run` of it does this assign again), else None."""
    for target, value in zip(targets, values, strict=True):
        if not is_realized(target):
            raise ValueError("assign needs a realized target (Reshape of a Buffer)")
        if target.shape != value.shape or target.dtype != value.dtype:
            raise ValueError(f"assign of {value.dtype.name}{value.shape} to {target.dtype.name}{target.shape}")
    bufs = [t.src[0] for t in targets]
    device = bufs[0].arg.device
    pins = dict(enumerate(bufs))
    found = schedule_cache.structure_of(values, pins, device)  # the in-place write's realize, if it is the one
    if reads_any(values, set(bufs)) and not schedule_cache.in_place(found, lambda: writes_in_place(targets, values)):
        # into new memory first, then copied, so that values see the old contents; a value that is a target itself
        # (a swap) is copied too, or the first copy would overwrite what the second reads
        fresh = {k: buffers.new_buffer(t.src[0].arg.size, t.dtype, device) for k, (t, v) in
                 enumerate(zip(targets, values, strict=True)) if v.op is Ops.RESHAPE and v.src[0] in bufs}
        values, found = realize(values, outputs=fresh, device=device), None
    realize(values, outputs=pins, device=device, known=found)
    return found


def reads_any(roots: Sequence[UOp], bufs: set[UOp]) -> bool:
    """Whether the graphs of roots read any of bufs: a walk that ends at the first one met (an optimizer's update
    reads its targets within a few nodes) and does not enter pure nodes (they read no Buffer)."""
    seen = set(roots)
    stack = list(roots)
    while stack:
        u = stack.pop()
        if u in bufs:
            return True
        for s in u.src:
            if s not in seen and not s.__dict__.get(PURE):
                seen.add(s)
                stack.append(s)
    return False


def to_host(u: UOp) -> Any:
    """A NumPy array of a realized value's contents, in its shape."""
    shape = tuple(size_value(d) for d in u.shape)
    return buffers.to_numpy(u.src[0])[: math.prod(shape)].reshape(shape)


class KernelArgumentError(ValueError):
    """Arrays that do not fit a hand-built kernel's Params (count, size or dtype)."""


def run_kernel(sink: UOp, arrays: Sequence[Any], device: str | None = None,
               vals: Mapping[str, int] | None = None) -> list[Any]:
    """Lower, compile and run a hand-built kernel (a Sink of Stores over Params, Ranges, Index, Load, End) on a
    device, with arrays bound to the Param slots in order; returns every buffer's contents after the run.

    Symbolic sizes: the kernel may use variables (DefineVar), given values here by name in `vals`, or bound in
    the graph (Bind): either way it compiles once for the variables' whole range. A Param of symbolic size takes
    an array of at least its size at these values; it runs in a buffer of its largest size (what compiling checked
    the kernel's accesses against, uopviz.uop.bounds), and the array's part of it comes back."""
    import numpy as np

    from uopviz.dtype import dtypes
    sink, binds = unbind(sink)
    values = {b.src[0].arg.name: b.src[1].arg.value for b in binds} | dict(vals or {})
    variables = {u.arg.name: u for u in sink.toposort() if u.op is Ops.DEFINE_VAR}
    _check_values(variables, values)
    params = {u.arg.slot: u for u in sink.toposort() if u.op is Ops.PARAM}
    if sorted(params) != list(range(len(arrays))):
        raise KernelArgumentError(f"the kernel has Param slots {sorted(params)} but {len(arrays)} arrays were given")
    device = devices.canonical(device)
    kernel, prog = compile_kernel(sink, device, default_opts(sink, device))
    bufs, sizes = [], []
    for k, arr in enumerate(arrays):
        p, a = params[k], np.asarray(arr).reshape(-1)
        size = prod(p.shape)
        n = size if isinstance(size, int) else int(evaluate(size, values))
        ok = a.size == n if isinstance(size, int) else a.size >= n
        if not ok or dtypes.from_numpy(a.dtype) != p.arg.dtype:
            raise KernelArgumentError(f"slot {k}: Param of {n} {p.arg.dtype.name} got an array of {a.size} {a.dtype}")
        room = largest_size(p.shape) - a.size
        bufs.append(buffers.from_numpy(np.concatenate([a, np.zeros(room, a.dtype)]) if room > 0 else a, device))
        sizes.append(a.size)
    prog([buffers.handle(b) for b in bufs], tuple(values[v] for v in kernel.vars))
    return [buffers.to_numpy(b)[:n] for b, n in zip(bufs, sizes, strict=True)]


def _check_values(variables: Mapping[str, UOp], values: Mapping[str, int]) -> None:
    """KernelArgumentError unless every variable has a value in its range, and every value a variable."""
    if missing := sorted(variables.keys() - values.keys()):
        raise KernelArgumentError(f"no value for variable {', '.join(missing)}: pass vals={{name: value}} or bind it")
    if unknown := sorted(values.keys() - variables.keys()):
        raise KernelArgumentError(f"the kernel has no variable {', '.join(unknown)} (it has "
                                  f"{', '.join(sorted(variables)) or 'none'})")
    for name, v in variables.items():
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, int) or not v.arg.min <= value <= v.arg.max:
            raise KernelArgumentError(f"variable {name} takes ints in {v.arg.min}..{v.arg.max}, got {value!r}")
