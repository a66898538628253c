"""Memory plan of a schedule: intermediate buffers whose lives do not overlap share one allocation.

A buffer lives from the kernel that writes it to the last kernel that reads it. Walking the kernels in
order, a new intermediate takes over a buffer of equal size, dtype and device whose last reader has run; its
writer then also waits for every reader of the previous tenant (an After on the shared buffer), so running the
graph in any dependency order keeps the reuse safe: waiting for the last reader alone is not enough, since
another reader need not come before it in every such order (a GPT's attention gradient read a value after its
storage was overwritten). Outputs and the caller's buffers are never shared.
"""

from __future__ import annotations

from uopviz.schedule.split import outputs_of
from uopviz.uop.ops import Ops, UOp


def _buf(u: UOp) -> UOp:
    return u.src[0] if u.op is Ops.AFTER else u


def _outputs(call: UOp) -> tuple[UOp, ...]:
    """The buffers a Call writes, its first buffers (uopviz.schedule.split.outputs_of)."""
    return tuple(_buf(b) for b in call.src[1:1 + outputs_of(call.src[0])])


def plan_memory(graph: UOp) -> UOp:
    """The command-buffer graph with intermediates sharing storage (the same graph if nothing can be shared)."""
    calls = [u for u in graph.toposort() if u.op is Ops.CALL]
    outputs = {_buf(s) for s in graph.src}
    readers: dict[UOp, list[int]] = {}
    for i, c in enumerate(calls):
        for s in dict.fromkeys(_buf(s) for s in c.src[1 + outputs_of(c.src[0]):]):
            readers.setdefault(s, []).append(i)
    last_read = {b: r[-1] for b, r in readers.items()}
    tenant: dict[UOp, UOp] = {}  # buffer -> the storage it uses
    before: dict[UOp, UOp] = {}  # buffer -> the storage's previous tenant
    free: list[tuple[UOp, UOp]] = []  # (storage, its last tenant)
    for i, c in enumerate(calls):
        if c.src[0].op is Ops.FUNCTION:  # a function's outputs keep their own
            continue
        for b in _outputs(c):
            if b in outputs or b not in last_read:
                continue
            key = (b.arg.size, b.arg.dtype, b.arg.device)
            for storage, prev in free:
                if (storage.arg.size, storage.arg.dtype, storage.arg.device) == key and last_read[prev] < i:
                    free.remove((storage, prev))
                    tenant[b], before[b] = storage, prev
                    break
            free.append((tenant.get(b, b), b))
    if not tenant:
        return graph
    new: dict[UOp, UOp] = {}  # old After/Call -> rebuilt
    by_buffer: dict[UOp, UOp] = {}  # old buffer -> its rebuilt After (the writer)
    for c in calls:
        outs = _outputs(c)
        dsts = []
        for out in outs:
            dst = tenant.get(out, out)
            if out in tenant:  # wait for every reader of the storage's previous tenant
                dst = dst.after(*(new[calls[j]] for j in readers[before[out]]))
            dsts.append(dst)
        srcs = [by_buffer.get(_buf(s), s) if s.op is Ops.AFTER else s for s in c.src[1 + len(outs):]]
        call = new[c] = UOp(Ops.CALL, (c.src[0], *dsts, *srcs))
        for w in outs:
            by_buffer[w] = tenant.get(w, w).after(call)
    return UOp.sink(*(by_buffer[_buf(s)] for s in graph.src))
