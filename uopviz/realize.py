"""realize(): schedule Tensor-level graphs into kernels, compile each for its device, and run them.

The schedule and each kernel's lowering are recorded (uopviz.pipeline), so `with uopviz.trace()` around a
realize shows every stage. A kernel compiles with the opts its caller gives, or, here, the default opts for it
on its device (uopviz.search.policy: tuned, searched with UOPVIZ_BEAM, or the heuristic's).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, NamedTuple

from uopviz.compiler import compile_kernel
from uopviz.pipeline import KernelCall, calls_of, schedule
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.device import Program
from uopviz.schedule.split import largest_size, unbind
from uopviz.search.policy import default_opts
from uopviz.target import Kernel
from uopviz.uop.alu import evaluate, size_value
from uopviz.uop.ops import Ops, UOp, prod


def is_realized(u: UOp) -> bool:
    """Data in a buffer, row-major: Reshape(Buffer, shape)."""
    return u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER


class Launch(NamedTuple):
    """One kernel run as it happened: the kernel, its program, its buffers and its variables' values (what a JIT
    replays)."""

    kernel: Kernel
    prog: Program
    buffers: list[UOp]
    vals: dict[str, int]


_captures: list[list[Launch]] = []  # open capture() blocks, innermost last


@contextmanager
def capture() -> Iterator[list[Launch]]:
    """Record every kernel run inside the block, in order (uopviz.tensor.jit replays them)."""
    launches: list[Launch] = []
    _captures.append(launches)
    try:
        yield launches
    finally:
        _captures.remove(launches)


def run_schedule(graph: UOp, timed: bool = False) -> float:
    """Run the graph's Calls in dependency order; with timed, wait for each and return the kernels' total
    time in seconds (device time where the device measures it). A graph over several devices runs each device's
    calls on a thread of its own, each call after the calls whose buffers it depends on."""
    steps = []
    for call in calls_of(graph):
        kernel, prog = _program(call)
        steps.append((call.buffers, prog, tuple(call.vals[v] for v in kernel.vars)))
        for launches in _captures:
            launches.append(Launch(kernel, prog, call.buffers, call.vals))
    if len({bufs[0].arg.device for bufs, _, _ in steps}) > 1:
        return _run_concurrently(steps, timed)
    return sum(prog([buffers.handle(b) for b in bufs], vals, wait=timed) or 0.0 for bufs, prog, vals in steps)


def _program(call: KernelCall) -> tuple[Kernel, Program]:
    """The kernel and program of a Call: a kernel compiled with its default opts on its device, or a copy between
    devices (a program that moves the source buffer's memory into the destination's)."""
    device = call.buffers[0].arg.device
    if call.ast.op is not Ops.COPY:
        return compile_kernel(call.ast, device, default_opts(call.ast, device))
    dst, src = call.buffers
    kernel = Kernel(f"copy_{src.arg.device}_to_{dst.arg.device}", call.ast, None, (dst.arg.dtype, src.arg.dtype))

    def copy(handles: Sequence[Any], vals: Sequence[int] = (), wait: bool = False) -> float | None:
        t0 = time.perf_counter()
        buffers.transfer(dst.arg.device, handles[0], src.arg.device, handles[1], src.arg.size, src.arg.dtype)
        return time.perf_counter() - t0 if wait else None
    return kernel, copy


def _run_concurrently(steps: list[tuple[list[UOp], Program, tuple[int, ...]]], timed: bool) -> float:
    """Run steps (in dependency order) on each device's worker thread: a step waits for the last writer of each
    buffer it reads and, for the buffer it writes, for its last writer and the readers since (memory the plan
    reuses). Steps reach each worker in order, so a step's dependencies are always queued before it. The
    workers are shared, so one graph is submitted and run at a time: two graphs' steps interleaved on two
    workers could each wait for a step queued behind the other."""
    from concurrent.futures import Future, wait

    def run(deps: list[Future[float]], prog: Program, handles: list[Any], vals: tuple[int, ...]) -> float:
        wait(deps)
        for d in deps:
            d.result()  # a failed dependency fails this step too
        return prog(handles, vals, wait=timed) or 0.0

    writer: dict[UOp, Future[float]] = {}
    readers: dict[UOp, list[Future[float]]] = {}
    futures: list[Future[float]] = []
    with _ONE_GRAPH_AT_A_TIME:
        try:
            for bufs, prog, vals in steps:
                out, ins = bufs[0], bufs[1:]
                deps = [writer[b] for b in (out, *ins) if b in writer] + readers.get(out, [])
                f = _device_worker(out.arg.device).submit(run, deps, prog, [buffers.handle(b) for b in bufs], vals)
                futures.append(f)
                writer[out], readers[out] = f, []
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
        buf = next(written).src[0] if largest_size(r.shape) else buffers.new_buffer(0, r.dtype, r.device or device)
        out[k] = buf.reshape(r.shape)
    return out


def assign(targets: Sequence[UOp], values: Sequence[UOp]) -> None:
    """Compute each value into its target's buffer (a target: Reshape(Buffer, shape) of its value's shape and dtype,
    all on one device), in one schedule."""
    for target, value in zip(targets, values, strict=True):
        if not is_realized(target):
            raise ValueError("assign needs a realized target (Reshape of a Buffer)")
        if target.shape != value.shape or target.dtype != value.dtype:
            raise ValueError(f"assign of {value.dtype.name}{value.shape} to {target.dtype.name}{target.shape}")
    bufs = [t.src[0] for t in targets]
    device = bufs[0].arg.device
    if set(bufs) & UOp.sink(*values).sparents():  # reading what is written: compute into new memory first, then copy
        values = realize(values, device=device)
    realize(values, outputs=dict(enumerate(bufs)), device=device)


def to_host(u: UOp) -> Any:
    """A NumPy array of a realized value's contents, in its shape."""
    shape = tuple(size_value(d) for d in u.shape)
    return buffers.to_numpy(u.src[0])[: int(prod(shape))].reshape(shape)


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
