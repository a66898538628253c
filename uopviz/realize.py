"""realize(): schedule Tensor-level graphs into kernels, lower each for its device, and run them.

Scheduling (Callify, then the kernel split) is recorded under a "schedule" context and each kernel's lowering
under a context named after the kernel, so `with uopviz.trace()` around a realize shows every stage. Lowered
kernels are cached per (kernel graph, device) — graphs are hash-consed, so an equal kernel is the same node —
except while recording, when lowering runs again so that the trace has it. A kernel compiled without explicit
opts gets the tuning database's best, a BEAM search's (UOPVIZ_BEAM=N) or the heuristic's (`default_opts`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from uopviz.codegen.opt import Opt, Scheduler
from uopviz.codegen.pipeline import lower, scheduler
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.device import Program
from uopviz.schedule.callify import callify
from uopviz.schedule.memory import plan_memory
from uopviz.schedule.split import split
from uopviz.target import Kernel, Target
from uopviz.trace.recorder import context
from uopviz.uop.ops import Ops, UOp, prod
from uopviz.uop.pattern import function_pass, recording, set_recorder

_programs: dict[tuple[UOp, str, tuple[Opt, ...]], tuple[Kernel, Program]] = {}
_defaults: dict[tuple[UOp, str, str], tuple[Opt, ...]] = {}  # (kernel, device, tuning database) -> opts
_warned: set[str] = set()


def is_realized(u: UOp) -> bool:
    """Data in a buffer, row-major: Reshape(Buffer, shape)."""
    return u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER


def schedule(roots: Sequence[UOp], outputs: Mapping[int, UOp] | None = None, device: str | None = None) -> UOp:
    """The command-buffer graph (Sink of After(buffer, Call(kernel, buffers...))) computing roots; values made
    from constants alone are computed on `device`."""
    with context("schedule", "schedule"):
        fn = callify(roots)
        graph = function_pass(lambda f: split(f, outputs, device), fn, "kernel split", stage="Rangeify", origin=split)
        return function_pass(plan_memory, graph, "memory plan", stage="Register/Memory Plan")


def compile_kernel(ast: UOp, device: str, opts: Sequence[Opt] | None = None) -> tuple[Kernel, Program]:
    """The lowered kernel and its program for a device (cached unless recording).

    opts None: the kernel's default opts (`default_opts`: tuned, searched or the heuristic's); a sequence is
    used as given, so `[]` is the unoptimized kernel.
    """
    if opts is None:
        opts = default_opts(ast, device)
    key = (ast, device, tuple(opts))
    if key in _programs and not recording():
        return _programs[key]
    rt = devices.get(device)
    with context("kernel", "kernel"):
        kernel = lower(ast, rt.target, opts)
    _programs[key] = (kernel, rt.compile(kernel))
    return _programs[key]


def default_opts(ast: UOp, device: str) -> tuple[Opt, ...]:
    """The opts a kernel gets when none are given, decided once per kernel, device and database per process.

    The tuning database's best for this kernel and target when it has one (so tuning once speeds every later
    run), else, when UOPVIZ_BEAM=N, a BEAM search of width N (stored for next time), else the heuristic's. A
    database that does not exist is not created; one that cannot be used is reported once on stderr and skipped.
    """
    from uopviz.search.db import default_path
    path = default_path()
    key = (ast, device, str(path))
    if key not in _defaults:
        with unrecorded():
            opts = _tuned_opts(ast, device, path)
            if opts is None and (width := beam_width()):
                opts = _searched_opts(ast, device, path, width)
            if opts is None:
                from uopviz.codegen.opt.heuristic import heuristic_opts
                opts = tuple(heuristic_opts(scheduler_of(ast, devices.get(device).target)))
        _defaults[key] = opts
    return _defaults[key]


def forget_default_opts() -> None:
    """Decide every kernel's default opts again (after a search stored new results)."""
    _defaults.clear()


def beam_width() -> int:
    """`UOPVIZ_BEAM`: the width of the search realize runs for kernels not tuned yet (0 or unset: none)."""
    text = os.environ.get("UOPVIZ_BEAM", "").strip()
    if not text:
        return 0
    try:
        width = int(text)
    except ValueError:
        width = -1
    if width < 0:
        raise ValueError(f"UOPVIZ_BEAM must be a beam width (an integer >= 0), got {text!r}")
    return width


def scheduler_of(ast: UOp, target: Target) -> Scheduler:
    """The Scheduler lower() applies opts to: the kernel after its passes up to the Optimize stage (unrecorded)."""
    with unrecorded():
        return scheduler(ast, target)


@contextmanager
def unrecorded() -> Iterator[None]:
    """Keep a trace being recorded free of work done to decide opts (lookups, searches, schedulers)."""
    prev = set_recorder(None)
    try:
        yield
    finally:
        set_recorder(prev)


def _tuned_opts(ast: UOp, device: str, path: Path) -> tuple[Opt, ...] | None:
    """The database's opts for the kernel on device, if the file exists, answers, and they still apply."""
    if not path.exists():
        return None
    from uopviz.codegen.opt import KernelOptError
    from uopviz.search.beam import cache_key
    from uopviz.search.db import TuningDB, TuningDBError
    try:
        with TuningDB(path) as db:
            hit = db.lookup(cache_key(ast, device))
    except TuningDBError as e:
        _warn_once(f"uopviz: not using the tuning database: {e}")
        return None
    if hit is None:
        return None
    try:
        if not isinstance(hit.opts, list):
            raise KernelOptError(f"opts must be a list, got {hit.opts!r}")
        opts = tuple(Opt.from_json(o) for o in hit.opts)
        s = scheduler_of(ast, devices.get(device).target)
        for o in opts:
            s = s.apply_opt(o)
    except KernelOptError as e:
        _warn_once(f"uopviz: ignoring stored opts for a {device} kernel in {path}: {e}")
        return None
    return opts


def _searched_opts(ast: UOp, device: str, path: Path, width: int) -> tuple[Opt, ...] | None:
    """A BEAM search's opts for the kernel (None where it cannot be searched: realize goes on without)."""
    from uopviz.search.beam import BeamError, beam
    from uopviz.search.db import TuningDBError
    from uopviz.search.timing import symbolic
    if symbolic(ast):
        return None
    try:
        return beam(ast, width, device, db=path).opts
    except (TuningDBError, BeamError) as e:
        _warn_once(f"uopviz: UOPVIZ_BEAM search skipped: {e}")
        return None


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(message, file=sys.stderr)


def kernels_of(graph: UOp) -> list[tuple[UOp, list[UOp]]]:
    """(kernel, buffers) of each Call of a command-buffer graph, in dependency order."""
    return [(c.src[0], [b.src[0] if b.op is Ops.AFTER else b for b in c.src[1:]])
            for c in graph.toposort() if c.op is Ops.CALL]


def run_schedule(graph: UOp, timed: bool = False) -> float:
    """Run the graph's Calls in dependency order; with timed, wait for each and return the kernels' total
    time in seconds (device time where the device measures it)."""
    total = 0.0
    for ast, bufs in kernels_of(graph):
        _, prog = compile_kernel(ast, bufs[0].arg.device)
        total += prog([buffers.handle(b) for b in bufs], wait=timed) or 0.0
    return total


def realize(roots: Sequence[UOp], outputs: Mapping[int, UOp] | None = None, device: str | None = None) -> list[UOp]:
    """Each root as Reshape(Buffer, shape), computing what is not in memory yet (values made from constants
    alone on `device`, default: the device of the buffers they are used with)."""
    todo = [k for k, r in enumerate(roots) if not is_realized(r) or (outputs and k in outputs)]
    if not todo:
        return list(roots)
    pins = {i: outputs[k] for i, k in enumerate(todo) if outputs and k in outputs}
    graph = schedule([roots[k] for k in todo], pins, device)
    run_schedule(graph)
    written = iter(graph.src)
    out = list(roots)
    for k in todo:
        r = roots[k]
        buf = next(written).src[0] if prod(r.shape) != 0 else buffers.new_buffer(0, r.dtype, r.device or device)
        out[k] = buf.reshape(r.shape)
    return out


def assign(target: UOp, value: UOp) -> None:
    """Compute value into target's buffer (target: Reshape(Buffer, shape) of value's shape and dtype)."""
    if not is_realized(target):
        raise ValueError("assign needs a realized target (Reshape of a Buffer)")
    if target.shape != value.shape or target.dtype != value.dtype:
        raise ValueError(f"assign of {value.dtype.name}{value.shape} to {target.dtype.name}{target.shape}")
    buf = target.src[0]
    if buf in value.sparents():  # reading what is written: compute into new memory first, then copy
        value = realize([value], device=buf.arg.device)[0]
    realize([value], outputs={0: buf}, device=buf.arg.device)


def to_host(u: UOp) -> Any:
    """A NumPy array of a realized value's contents, in its shape."""
    arr = buffers.to_numpy(u.src[0])
    return arr[: int(prod(u.shape))].reshape(u.shape)


class KernelArgumentError(ValueError):
    """Arrays that do not fit a hand-built kernel's Params (count, size or dtype)."""


def run_kernel(sink: UOp, arrays: Sequence[Any], device: str | None = None) -> list[Any]:
    """Lower, compile and run a hand-built kernel (a Sink of Stores over Params, Ranges, Index, Load, End) on a
    device, with arrays bound to the Param slots in order; returns every buffer's contents after the run."""
    import numpy as np

    from uopviz.dtype import dtypes
    params = {u.arg.slot: u for u in sink.toposort() if u.op is Ops.PARAM}
    if sorted(params) != list(range(len(arrays))):
        raise KernelArgumentError(f"the kernel has Param slots {sorted(params)} but {len(arrays)} arrays were given")
    bufs = []
    for k, arr in enumerate(arrays):
        p, a = params[k], np.asarray(arr)
        want = (int(prod(p.shape)), p.arg.dtype)
        if (a.size, dtypes.from_numpy(a.dtype)) != want:
            raise KernelArgumentError(f"slot {k}: Param of {want[0]} {want[1].name} got an array of {a.size} {a.dtype}")
        bufs.append(buffers.from_numpy(a, device))
    _, prog = compile_kernel(sink, devices.canonical(device))
    prog([buffers.handle(b) for b in bufs])
    return [buffers.to_numpy(b) for b in bufs]
