"""realize(): schedule Tensor-level graphs into kernels, compile each for its device, and run them.

The schedule and each kernel's lowering are recorded (uopviz.pipeline), so `with uopviz.trace()` around a
realize shows every stage. A kernel compiles with the opts its caller gives, or, here, the default opts for it
on its device (uopviz.search.policy: tuned, searched with UOPVIZ_BEAM, or the heuristic's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, schedule
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.search.policy import default_opts
from uopviz.uop.ops import Ops, UOp, prod


def is_realized(u: UOp) -> bool:
    """Data in a buffer, row-major: Reshape(Buffer, shape)."""
    return u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER


def run_schedule(graph: UOp, timed: bool = False) -> float:
    """Run the graph's Calls in dependency order; with timed, wait for each and return the kernels' total
    time in seconds (device time where the device measures it)."""
    total = 0.0
    for ast, bufs in kernels_of(graph):
        device = bufs[0].arg.device
        _, prog = compile_kernel(ast, device, default_opts(ast, device))
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
    device = devices.canonical(device)
    _, prog = compile_kernel(sink, device, default_opts(sink, device))
    prog([buffers.handle(b) for b in bufs])
    return [buffers.to_numpy(b) for b in bufs]
