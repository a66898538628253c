"""BEAM on a Ray cluster: candidates are lowered and compiled by Ray tasks anywhere in the cluster, and verified and
timed only by timing actors on the machines that own the device, one candidate at a time per device.

    from uopviz.search.ray_executor import RayExecutor
    with RayExecutor("auto") as ex:                      # or "HOST:PORT", or None: a cluster of this machine alone
        beam(ast, 4, "CPU", executor=ex)                 # the beam, the decisions and the database stay here

A machine owns a device for the cluster when its node advertises the device's resources, which `device_resources`
computes there (`uopviz ray-resources CPU CL` prints them for `ray start --resources`): "uopviz:<DEVICE>" and
"uopviz:<DEVICE>:<digest of its target>" (the device's name, driver and compiler), each 1, so one actor per
machine and device times, and a tuning key is only ever timed on machines that match it.

Several searches share one executor (`beam_many`, up to `searches` at once, each in a thread of the calling
process): builds of all of them go to the cluster's CPUs, at most one task per CPU in flight; each timing actor
takes one candidate at a time from whichever search asks first.

Faults: a timing actor that dies (its worker or machine killed) or outlives the per-candidate timeout (then it is
killed) loses only its candidate, which is retried on another timing actor, up to MAX_ATTEMPTS times, then
recorded as failed with why. A build task whose worker dies is retried by Ray once; one that outlives the
per-candidate timeout and `build_grace_s` (a hang its own timer cannot interrupt, in native code or a frozen
worker) is cancelled, which kills its worker (Ray starts another), and its candidate is recorded as failed. The
search's process remains the only writer of the tuning database, so killing it leaves the database as a local
search's kill does.

Ray sends task arguments with its own serializer (pickle underneath), as the local process pool does: connect only
to a cluster you own.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from typing import Any, cast

from uopviz.runtime import device as devices
from uopviz.search.executor import (
    GIVEN_UP,
    Built,
    DeviceBench,
    Executor,
    FlatUOp,
    Measured,
    OptsJson,
    SearchStopped,
    Station,
    build_candidate,
    flatten,
    here,
)
from uopviz.search.keys import TargetInfo, describe_target
from uopviz.search.timing import Timing
from uopviz.target import Target
from uopviz.trace.ids import node_id
from uopviz.uop.ops import UOp

RESOURCE_PREFIX = "uopviz:"
MAX_ATTEMPTS = 2
"""Timing actors a candidate may lose (died or timed out) before it is recorded as failed."""
INSTALL_HINT = "pip install 'uopviz[ray]'"
FREE_WAIT_S = 10.0
"""How long a new executor waits for a device's timing resources to be released before giving up."""
SEARCHES = 4
"""Kernels a RayExecutor searches at once by default (beam_many): enough that some build while others are timed."""
BUILD_GRACE_S = 10.0
"""How long a build task may run past the per-candidate timeout (its worker starting, the transfers) before the
search gives it up and kills its worker: the task's own timer cannot interrupt a hang in native code."""
POLL_S = 0.2
"""How often a search waiting on the cluster looks at its deadlines and whether it was told to stop."""


class RayUnavailableError(RuntimeError):
    """Ray is not installed: distributed search needs the `ray` extra."""


class RayClusterError(RuntimeError):
    """The cluster cannot time the device: no node owns it, or nodes of different targets do."""


def import_ray() -> Any:
    """The ray module, or RayUnavailableError saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RayUnavailableError(f"distributed BEAM (--ray) needs Ray, which is not installed ({e}); install it "
                                  f"with `{INSTALL_HINT}`") from None
    return ray


def target_digest(info: TargetInfo) -> str:
    """A short name for a target (device, name, driver, compiler): timings are only comparable within one."""
    text = json.dumps([getattr(info, f.name) for f in fields(TargetInfo)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def device_resources(names: Sequence[str]) -> dict[str, float]:
    """The Ray resources a node owning these devices advertises (each device's runtime is started to describe it):
    one unit of the device's kind and one of its exact target."""
    out: dict[str, float] = {}
    for name in names:
        info = describe_target(devices.canonical(name))
        out[f"{RESOURCE_PREFIX}{info.device}"] = 1.0
        out[f"{RESOURCE_PREFIX}{info.device}:{target_digest(info)}"] = 1.0
    return out


def _where(ray: Any) -> str:
    ctx = ray.get_runtime_context()
    return f"{here()} (ray node {ctx.get_node_id()[:8]})"


class _Timer:
    """A timing actor: the device side of searches (DeviceBench), on a machine that owns the device; Ray runs its
    calls one at a time."""

    def __init__(self, keep: int) -> None:
        import ray
        self.where = _where(ray)
        self.keep = keep
        self.benches: OrderedDict[tuple[str, str, int], DeviceBench] = OrderedDict()

    def describe(self, device: str) -> tuple[TargetInfo, Target, str]:
        return describe_target(device), devices.get(device).target, self.where

    def _bench(self, kernel_hash: str, flat: FlatUOp, device: str, seed: int) -> DeviceBench:
        """The kernel's DeviceBench, made on first use; the `keep` latest used are kept (searches run side by side:
        making one again costs a run of the unoptimized kernel)."""
        key = (kernel_hash, device, seed)
        if key in self.benches:
            self.benches.move_to_end(key)
        else:
            from uopviz.search.executor import unflatten
            if len(self.benches) >= self.keep:
                self.benches.popitem(last=False)
            self.benches[key] = DeviceBench(unflatten(flat), device, seed)
        return self.benches[key]

    def measure(self, kernel_hash: str, flat: FlatUOp, device: str, seed: int, built: Built,
                best_s: float | None) -> Measured:
        return Measured(self._bench(kernel_hash, flat, device, seed).measure(built.rebuild(), best_s), self.where)

    def retime(self, kernel_hash: str, flat: FlatUOp, device: str, seed: int, opts_list: list[OptsJson],
               repeats: int) -> tuple[list[list[float]], str]:
        return self._bench(kernel_hash, flat, device, seed).retime(opts_list, repeats), self.where

    def wrong_at(self, kernel_hash: str, flat: FlatUOp, device: str, seed: int, opts: OptsJson) -> str | None:
        return self._bench(kernel_hash, flat, device, seed).wrong_at(opts)


def _build_task(flat: FlatUOp, opts: OptsJson, device: str, target: Target, timeout_s: float,
                info: TargetInfo) -> Built:
    """A Ray task: build_candidate, compiling only on a machine whose device is the search's target (elsewhere the
    program could not be used: the timing machine compiles it itself)."""
    import ray
    try:
        compile_here = (target.dialect is not None and target.dialect.compiles_in_worker
                        and describe_target(device) == info)
    except devices.DeviceError:  # this machine has no such device: lowering is all it can do
        compile_here = False
    return build_candidate(flat, opts, device, target, timeout_s, compile_here, _where(ray))


class RayExecutor(Executor):
    """Searches on a Ray cluster: `address` as ray.init takes it ("auto": the cluster this machine belongs to,
    "HOST:PORT"; None: start a one-machine cluster here). Connects on creation (unless Ray is already initialized);
    `close` (or leaving a with block) disconnects if it connected, and ends its timing actors.

    searches: kernels searched at once by `beam_many` (their builds share the cluster's CPUs, their timings the
    device's actors). build_grace_s: how long a build may run past the per-candidate timeout before it is given up.
    The executor is shared by those searches' threads: its actors, build slots and targets are guarded by a lock.
    """

    def __init__(self, address: str | None = "auto", searches: int = SEARCHES,
                 build_grace_s: float = BUILD_GRACE_S) -> None:
        if isinstance(searches, bool) or not isinstance(searches, int) or searches < 1:
            raise ValueError(f"searches must be an integer >= 1, got {searches!r}")
        self.ray = ray = import_ray()
        self._connected = not ray.is_initialized()
        if self._connected:
            ray.init(address=address, log_to_driver=False)
        self.searches, self.build_grace_s = searches, build_grace_s
        self.stopping = threading.Event()
        self._build = ray.remote(num_cpus=1, max_retries=1)(_build_task)
        self._timer_class = ray.remote(num_cpus=0, max_restarts=0, max_concurrency=1)(_Timer)
        self._lock = threading.RLock()
        self._starting = threading.Lock()  # one start of a device's timing actors at a time (see actors())
        self._targets: dict[str, tuple[TargetInfo, Target, str]] = {}
        self._actors: dict[str, list[Any]] = {}
        self._busy: set[Any] = set()  # timing actors at work for some search
        self._building = 0  # build tasks in flight, all searches together
        self._cpus = (0.0, -math.inf)  # the cluster's CPUs, and when they were counted

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            for actors in self._actors.values():
                for a in actors:
                    self.ray.kill(a)
            self._actors.clear()
            self._busy.clear()
        if self._connected and self.ray.is_initialized():
            self.ray.shutdown()

    def describe(self) -> str:
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        timers = sum(len(a) for a in self._actors.values())
        return (f"ray: {len(nodes)} node{'s' * (len(nodes) != 1)}, {int(self.ray.cluster_resources().get('CPU', 0))} "
                f"CPUs for builds, {timers} timing worker{'s' * (timers != 1)}, up to {self.searches} kernels at once")

    def resource(self, device: str) -> str:
        """The one target resource of device in the cluster (RayClusterError if none or several)."""
        kind = f"{RESOURCE_PREFIX}{device}:"
        found = sorted(r for r in self.ray.cluster_resources() if r.startswith(kind))
        if not found:
            raise RayClusterError(f"no node of the Ray cluster owns a {device} device: start one with "
                                  f"`ray start --address ... --resources \"$(uopviz ray-resources {device})\"`")
        if len(found) > 1:
            raise RayClusterError(f"the Ray cluster has {device} devices of {len(found)} different targets "
                                  f"({', '.join(found)}): their timings are not comparable; give each target its "
                                  "own cluster")
        return found[0]

    def target(self, device: str) -> tuple[TargetInfo, Target]:
        with self._lock:
            known = self._targets.get(device)
        if known is None:  # asked of an actor outside the lock: its first call starts a runtime, seconds at times
            known = self.ray.get(self.actors(device)[0].describe.remote(device))
            with self._lock:
                known = self._targets.setdefault(device, known)
        info, target, _ = known
        return info, target

    def actors(self, device: str) -> list[Any]:
        """The live timing actors of device, started as the cluster's resources allow (RayClusterError: none).
        Starting them may wait for the cluster to free a worker: that wait holds only `_starting`, so the other
        searches go on releasing actors and taking build slots meanwhile."""
        with self._starting:
            with self._lock:
                if have := self._actors.get(device):
                    return have
            res = self.resource(device)
            deadline = time.monotonic() + FREE_WAIT_S
            while (n := int(self.ray.available_resources().get(res, 0))) == 0 and time.monotonic() < deadline:
                time.sleep(POLL_S)  # a timing actor just ended (another executor's, or one killed) frees it soon
            if n == 0:
                raise RayClusterError(f"no worker owning {res} is free or alive in the Ray cluster (another "
                                      "search's timing workers may hold them)")
            made = [self._timer_class.options(resources={res: 1}).remote(self.searches + 2) for _ in range(n)]
            with self._lock:
                self._actors[device] = made
            return made

    def acquire(self, device: str) -> Any | None:
        """An idle timing actor of device, now busy for the caller (None: all are busy; RayClusterError: none is
        left). Each actor times one candidate at a time whichever search it comes from."""
        self.actors(device)  # started outside the lock, then read under it (one may have been dropped meanwhile)
        with self._lock:
            idle = [a for a in self._actors.get(device, []) if a not in self._busy]
            if idle:
                self._busy.add(idle[0])
                return idle[0]
            return None

    def release(self, actor: Any) -> None:
        with self._lock:
            self._busy.discard(actor)

    def drop(self, device: str, actor: Any) -> None:
        """Forget (and kill) a timing actor that died or hung."""
        with self._lock:
            self.ray.kill(actor)
            self._actors[device] = [a for a in self._actors.get(device, []) if a is not actor]
            self._busy.discard(actor)

    def take_build_slot(self) -> bool:
        """Whether a build may be submitted now: at most one per CPU of the cluster is in flight, so a submitted
        task starts at once and its deadline counts its own time, not a queue's."""
        with self._lock:
            n, when = self._cpus
            if time.monotonic() - when > 1.0:  # nodes come and go: count again now and then
                n = self.ray.cluster_resources().get("CPU", 0.0)
                self._cpus = (n, time.monotonic())
            if self._building < max(n, 1):
                self._building += 1
                return True
            return False

    def free_build_slot(self) -> None:
        with self._lock:
            self._building -= 1

    def station(self, ast: UOp, device: str, seed: int, timeout_s: float) -> Station:
        return RayStation(self, ast, device, seed, timeout_s)


class RayStation(Station):
    def __init__(self, ex: RayExecutor, ast: UOp, device: str, seed: int, timeout_s: float) -> None:
        self.ex, self.ray, self.device, self.seed, self.timeout_s = ex, ex.ray, device, seed, timeout_s
        self.info, self.target = ex.target(device)
        self.flat = flatten(ast)
        self.flat_ref = self.ray.put(self.flat)
        self.hash = node_id(ast)
        self.built = 0

    def _ready(self, refs: list[Any]) -> list[Any]:
        """Those of refs done within a short wait (SearchStopped when the search is told to stop)."""
        if self.ex.stopping is not None and self.ex.stopping.is_set():
            raise SearchStopped(f"the search of {self.hash[:12]} on {self.device} was stopped")
        if not refs:
            time.sleep(POLL_S)
            return []
        return self.ray.wait(refs, num_returns=1, timeout=POLL_S)[0]

    def build(self, opts_list: list[OptsJson], deadline: float | None = None) -> list[Built]:
        """Each candidate built by a Ray task. A task that outlives the per-candidate timeout and the executor's
        grace (a hang its own timer cannot interrupt: native code, a frozen worker) is cancelled, which kills its
        worker (Ray starts another), and its candidate fails; a task whose worker died twice fails likewise. Past
        the deadline the builds not done are given up (cancelled)."""
        out: list[Built | None] = [None] * len(opts_list)
        pending = deque(range(len(opts_list)))
        running: dict[Any, tuple[int, float]] = {}  # ref -> (candidate, submitted)
        limit = self.timeout_s + self.ex.build_grace_s
        try:
            while pending or running:
                if deadline is not None and time.perf_counter() > deadline:
                    for i in [*pending, *(i for i, _ in running.values())]:
                        out[i] = Built(None, GIVEN_UP)
                    break  # the running builds are given up below
                while pending and self.ex.take_build_slot():
                    i = pending.popleft()
                    try:
                        ref = self.ex._build.remote(self.flat_ref, opts_list[i], self.device, self.target,
                                                    self.timeout_s, self.info)
                    except BaseException:  # never submitted: its slot is not a running build's to free
                        self.ex.free_build_slot()
                        raise
                    running[ref] = (i, time.monotonic())
                for ref in self._ready(list(running)):
                    i, _ = running.pop(ref)
                    self.ex.free_build_slot()
                    try:
                        out[i] = self.ray.get(ref)
                    except self.ray.exceptions.RayError as e:  # its worker died twice, or the task could not run
                        out[i] = Built(None, f"the compile worker died while building this candidate "
                                             f"({type(e).__name__})")
                now = time.monotonic()
                for ref, (i, t0) in list(running.items()):
                    if now - t0 > limit:
                        del running[ref]
                        self.ex.free_build_slot()
                        self.ray.cancel(ref, force=True)
                        out[i] = Built(now - t0, f"the build did not end within {limit:g} s (the timeout and "
                                                 f"{self.ex.build_grace_s:g} s of grace): its worker was killed")
        finally:
            for ref in running:  # stopped, or past the deadline: give the builds up
                self.ex.free_build_slot()
                self.ray.cancel(ref)
        self.built += len(opts_list)
        return cast(list[Built], out)

    def measure(self, builts: Sequence[Built], best: Callable[[], float | None]) -> Iterator[Measured]:
        """Candidates spread over the device's idle timing actors (shared with the other searches), each busy with
        one at a time, yielded in the order given."""
        pending = deque(range(len(builts)))
        lost = [0] * len(builts)
        done: dict[int, Measured] = {}
        running: dict[Any, tuple[int, Any, float]] = {}  # ref -> (candidate, actor, start)
        nxt = 0
        try:
            while nxt < len(builts):
                none_left = False
                while pending:
                    try:
                        a = self.ex.acquire(self.device)
                    except RayClusterError:
                        none_left = True
                        break
                    if a is None:
                        break
                    i = pending.popleft()
                    ref = a.measure.remote(self.hash, self.flat_ref, self.device, self.seed, builts[i], best())
                    running[ref] = (i, a, time.monotonic())
                if none_left and not running:  # no actor left to time on
                    for i in pending:
                        done[i] = Measured(Timing([], f"no Ray worker owning {self.device} was left to time it"),
                                           None)
                    pending.clear()
                for ref in self._ready(list(running)):
                    i, a, _ = running.pop(ref)
                    try:
                        done[i] = self.ray.get(ref)
                    except self.ray.exceptions.RayActorError as e:
                        self._lost(i, a, lost, pending, done, f"its timing worker died ({type(e).__name__})")
                    finally:  # free for the next candidate whatever this call raised (a dropped actor: a no-op)
                        self.ex.release(a)
                now = time.monotonic()
                for ref, (i, a, t0) in list(running.items()):
                    if now - t0 > self.timeout_s:
                        del running[ref]
                        self._lost(i, a, lost, pending, done, f"timing took longer than {self.timeout_s:g} s")
                while nxt in done:
                    yield done.pop(nxt)
                    nxt += 1
        finally:
            for _, a, _ in running.values():  # stopped: the actors finish their candidate and serve others
                self.ex.release(a)

    def _lost(self, i: int, actor: Any, lost: list[int], pending: deque[int], done: dict[int, Measured],
              why: str) -> None:
        """Candidate i's timing actor died or hung: drop the actor; retry i elsewhere or record it failed."""
        self.ex.drop(self.device, actor)
        lost[i] += 1
        if lost[i] < MAX_ATTEMPTS:
            pending.appendleft(i)
        else:
            done[i] = Measured(Timing([], f"not measured: {why}, {lost[i]} times"), None)

    def _call(self, method: str, *args: Any, timeout_s: float) -> Any:
        """One actor call for the whole search (re-timing, checks) on an idle actor, retried on another if its
        actor dies or hangs."""
        for _ in range(MAX_ATTEMPTS):
            while (actor := self.ex.acquire(self.device)) is None:
                self._ready([])  # every actor is timing another search's candidate
            ref = getattr(actor, method).remote(self.hash, self.flat_ref, self.device, self.seed, *args)
            deadline = time.monotonic() + timeout_s
            try:
                while not self._ready([ref]):
                    if time.monotonic() > deadline:
                        break
                else:
                    return self.ray.get(ref)
            except self.ray.exceptions.RayActorError:
                pass
            finally:
                self.ex.release(actor)
            self.ex.drop(self.device, actor)
        raise RayClusterError(f"{method} of {self.device} candidates failed on {MAX_ATTEMPTS} timing workers")

    def retime(self, opts_list: list[OptsJson], repeats: int) -> tuple[list[list[float]], str | None]:
        samples, where = self._call("retime", opts_list, repeats, timeout_s=self.timeout_s * len(opts_list))
        return samples, where

    def wrong_at(self, opts: OptsJson) -> str | None:
        return self._call("wrong_at", opts, timeout_s=self.timeout_s)

    def close(self, wait: bool) -> None:
        """Nothing to stop: builds are awaited as they are asked for; the timing actors serve the next search."""
