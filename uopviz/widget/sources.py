"""What a view can show, put into a TraceStore: a Tensor's realize, a recorded trace, a saved trace file, a kernel."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from uopviz.backend.store import StoredTrace, TraceStore
from uopviz.trace import Trace
from uopviz.uop.ops import Ops, UOp

ACCEPTS = ("a Tensor (its realize is recorded), a Trace (`with uopviz.trace() as tr:`), the path of a saved trace "
           "file, or a kernel (a Sink UOp, as uopviz.pipeline.kernels_of gives it or as built by hand)")


def stored(x: Any, store: TraceStore, device: str | None = None) -> StoredTrace:
    """Put what `x` records into the store: TypeError (naming what is accepted) for anything else."""
    from uopviz.tensor import Tensor
    if isinstance(x, Tensor):
        on = x.device if isinstance(x.device, str) else None  # a multi-device tensor's graph names its devices
        return store.add_recorded(_realized(x), f"realize {x.dtype.name}{list(x.shape)}", on)
    if isinstance(x, Trace):
        return store.add_recorded(x, "trace", device)
    if isinstance(x, (str, os.PathLike)):
        return store.load_file(Path(x))
    if isinstance(x, UOp) and x.op is Ops.SINK:
        tr, name = _lowered(x, device)
        return store.add_recorded(tr, name, device)
    raise TypeError(f"uopviz.show takes {ACCEPTS}; got {type(x).__name__}"
                    + (f" ({x.op.name})" if isinstance(x, UOp) else ""))


def require_lazy(t: Any, what: str, instead: str) -> None:
    """ValueError where Tensor t is realized already: its graph is gone, so there is nothing to `what`; `instead`
    says what to do."""
    if t.is_realized:
        raise ValueError(f"this Tensor is realized already, so there is nothing left to {what}: call it before the "
                         f"Tensor's first .realize()/.numpy(), or {instead}")


def _realized(t: Any) -> Trace:
    import uopviz
    require_lazy(t, "record", "record that yourself (`with uopviz.trace() as tr:`) and show the trace")
    with uopviz.trace.record() as tr:
        t.realize()
    return tr


def _lowered(ast: UOp, device: str | None) -> tuple[Trace, str]:
    """A kernel lowered and compiled (not run) under the recorder, with the opts realize() would give it."""
    from uopviz.backend.recording import record_opts
    from uopviz.runtime.device import canonical
    from uopviz.search.policy import default_opts
    params = [u.arg.device for u in ast.toposort() if u.op is Ops.PARAM and u.arg.device is not None]
    dev = canonical(device or (params[0] if params else None))
    tr, kernel = record_opts(ast, dev, default_opts(ast, dev))
    return tr, kernel.name
