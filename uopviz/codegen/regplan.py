"""Register plan: register buffers (accumulators) whose lifetimes in the Linear program do not overlap share
storage, so a kernel with several reductions in sequence (softmax, layernorm) declares one per live value."""

from __future__ import annotations

from uopviz.uop.ops import AddrSpace, Ops, UOp


def _owner(u: UOp) -> UOp | None:
    """The REG buffer an instruction uses (through After and Index), if any."""
    while u.op in (Ops.AFTER, Ops.INDEX, Ops.LOAD, Ops.STORE) and u.src:
        u = u.src[0]
    return u if u.op is Ops.BUFFER and u.arg.addrspace is AddrSpace.REG else None


def plan_registers(linear: UOp) -> UOp:
    """Linear with each REG buffer replaced by an earlier one of equal size and dtype that is dead by then."""
    span: dict[UOp, list[int]] = {}
    for i, u in enumerate(linear.src):
        b = _owner(u)
        if b is not None and u is not b:  # a life starts at the first use (the initial store), not the declaration
            span.setdefault(b, [i, i])[1] = i
    free: list[tuple[int, UOp]] = []  # (last use, buffer)
    remap: dict[UOp, UOp] = {}
    for b, (first, last) in sorted(span.items(), key=lambda kv: kv[1][0]):
        reuse = next((x for x in free if x[0] < first and (x[1].arg.size, x[1].arg.dtype) == (b.arg.size, b.arg.dtype)),
                     None)
        if reuse is not None:
            free.remove(reuse)
            remap[b] = reuse[1]
        free.append((last, remap.get(b, b)))
    if not remap:
        return linear
    out: dict[UOp, UOp] = {}
    lst = []
    for u in linear.src:
        if u in remap:
            out[u] = remap[u]
            continue
        new = u.replace(src=tuple(out.get(s, s) for s in u.src))
        out[u] = new
        lst.append(new)
    return UOp(Ops.LINEAR, tuple(lst))
