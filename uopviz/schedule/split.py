"""The kernel split: which values of a Function are stored to memory, and the kernel that computes each.

A value is materialized (gets a buffer, and a kernel that stores it) when it is an output, when the program asks
(Contiguous), or when it is a Reduce whose result is used other than elementwise by its kernel's output: a
reduction broadcast or moved before use would otherwise be recomputed for every element that reads it (unless
the `fuse rows` pass tagged it a row reduction, computed once per row of its consumer's kernel: schedule/rows.py);
or a Reduce that two or more kernels would each compute, of `SHARED_WORK` terms or more (a matmul's result read by
the forward and by the backward).
Everything else fuses: elementwise chains into their consumer, and into the Reduce that consumes them. A call of
a user function (`GetTuple(Function(body, *args))`, from `@uopviz.function`) is one opaque step: its arguments
are materialized, and one `Call(Function(body), *outputs, *inputs, *binds)` writes all its outputs; its body is
scheduled apart, once per signature (uopviz.pipeline.function_schedule).

A Copy to another device is a step of its own too: its value is materialized on its device, and
`Call(Copy(Param 1, device), buf, src)` copies the memory whole into a buffer on the Copy's device.

Materialized values of one shape and device whose kernels are elementwise are siblings (`siblings`): one kernel
stores them all, so an optimizer step is a launch per parameter shape, not three per parameter.

The result is the command-buffer graph: `Sink(After(buf, Call(kernel, *bufs, *inputs, *binds)), ...)`, where each
Call's kernel is `Sink(Store(out.index(flat(ranges)), Index(value, *ranges)).end(*ranges))` over its own Params, or
for siblings `Sink(Group(Store(out0...), Store(out1...), ...).end(*ranges))`: slots 0..k-1 are written
(`outputs_of`), its inputs are Buffers or the After nodes of the kernels that write them, and its binds give the
values of the variables its sizes use: the kernel itself holds the unbound variables, so it is one kernel for
every value (compiled once), and a buffer of symbolic size is allocated for the largest value.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from uopviz.runtime.buffer import new_buffer
from uopviz.runtime.device import DeviceMismatchError
from uopviz.schedule.program import program_order, sources
from uopviz.schedule.rangeify import kernel_ast, transfers
from uopviz.schedule.rows import ROW, untag
from uopviz.trace import origins
from uopviz.uop.ops import GroupOp, Ops, UOp, prod, toposort
from uopviz.uop.spec import check

# ops through which a value reaches its kernel's output one element to one element
_DIRECT = GroupOp.Elementwise | {Ops.RESHAPE, Ops.BITCAST, Ops.CONTIGUOUS, Ops.DETACH, Ops.CONTIGUOUS_BACKWARD}


def materialized(body: UOp) -> list[UOp]:
    """The nodes of a Function body that get buffers, sources before users (outputs included)."""
    roots = set(body.src)
    order = program_order(body)[:-1]
    called = [u for u in order if u.op is Ops.FUNCTION]
    chosen = set(roots) | {u for u in order if u.op is Ops.CONTIGUOUS or _is_call_output(u) or transfers(u)}
    chosen |= {a for f in called for a in f.src[1:]}  # a called function reads its arguments from memory
    chosen |= {u.src[0] for u in order if transfers(u)}  # a copy between devices reads its value from memory
    direct: dict[UOp, bool] = {}  # reached only along direct paths from the kernel output above it
    owners: dict[UOp, set[UOp]] = {}  # the values chosen so far whose kernels would compute u
    for u in reversed(order):
        if u.op is Ops.REDUCE and u.tag != ROW and (not direct.get(u, True) or _shared(u, owners.get(u, set()))):
            chosen.add(u)
        here = u in chosen or direct.get(u, True)
        mine = {u} if u in chosen else owners.get(u, set())
        for s in sources(u):
            if s in chosen:
                continue
            d = here and u.op in _DIRECT
            direct[s] = direct.get(s, True) and d
            owners.setdefault(s, set()).update(mine)
    return [u for u in order if u in chosen and not _is_buffer_view(u)]


SHARED_WORK = 1 << 16
"""The fewest terms (the Reduce's input elements) of a reduction that two kernels would each compute for it to be
stored once instead: a GPT's MLP backward computed x W1 (a 512-wide matmul) again for GELU's derivative."""


def _shared(u: UOp, owners: set[UOp]) -> bool:
    """Whether Reduce u would be computed in more than one kernel and is work enough to store once. A selection
    (a sum over a one-hot: an embedding's rows picked by index) is not: inside its consumer's kernel the lowering
    folds it to one load, while stored alone it was a 256-term sum per element (the GPT's token embedding, 2.8 ms)."""
    terms = prod(u.src[0].shape)
    return len(owners) > 1 and isinstance(terms, int) and terms >= SHARED_WORK and not _selects(u)


def _selects(u: UOp) -> bool:
    """Whether Reduce u's terms test equality (a one-hot), looking through the values its kernel computes."""
    todo, seen = [u.src[0]], set()
    while todo:
        v = todo.pop()
        if v in seen or not (v.op in GroupOp.Elementwise or v.op in GroupOp.Movement):
            continue
        if v.op in (Ops.CMPEQ, Ops.CMPNE):
            return True
        seen.add(v)
        todo += v.src
    return False


def _is_call_output(u: UOp) -> bool:
    return u.op is Ops.GETTUPLE and u.src[0].op is Ops.FUNCTION


def _is_buffer_view(u: UOp) -> bool:
    """Already data in memory in row-major order: nothing to compute."""
    return u.op is Ops.RESHAPE and u.src[0].op is Ops.PARAM


def split(fn: UOp, outputs: Mapping[int, UOp] | None = None, device: str | None = None) -> UOp:
    """The command-buffer graph of Function `fn`; `outputs` pins output k to an existing buffer (assign).
    Values computed from constants alone have no device: they go to `device`, else to the device of the
    function's buffers, else to the default device."""
    body, args = fn.src[0], fn.src[1:]
    home = device or next((a.arg.device for a in args), None)
    pinned = {body.src[k]: b for k, b in (outputs or {}).items()}
    chosen = materialized(body)
    chosen += [u for u in pinned if u not in chosen]
    every = set(chosen)
    written: dict[UOp, UOp] = {}  # materialized value -> After(buffer, Call)
    for group in siblings(chosen, every, pinned, args, home):
        u = group[0]
        if u in written:
            continue
        if _is_call_output(u):
            written.update(_function_call(u.src[0], pinned, written, args, home))
            continue
        if largest_size(u.shape) == 0:
            continue
        if transfers(u):
            written[u] = _copy_call(u, pinned.get(u), written, args)
            continue
        bufs = [pinned[v] if v in pinned else new_buffer(largest_size(v.shape), v.dtype, v.device or home)
                for v in group]
        written.update(_kernel_call(group, bufs, every, written, args))
    return UOp.sink(*(written[r] for r in body.src if r in written))  # output order; size-0 outputs have none


MAX_BUFFERS = 32
"""The most buffers (outputs and inputs together) one kernel of siblings takes. Each is a kernel argument, and the
dialects bound those (OpenCL promises 1 KB of arguments, 128 pointers; CUDA 4 KB); a kernel of many outputs also
holds every one's expression in one loop body, which the lowering's passes walk whole. 32 takes an AdamW step's
updates of several parameters (3 outputs and 4 to 6 inputs each) in one launch."""


def siblings(chosen: list[UOp], every: set[UOp], pinned: Mapping[UOp, UOp], args: tuple[UOp, ...],
             home: str | None) -> list[list[UOp]]:
    """The materialized values (`chosen`, sources first) in groups that one kernel computes, in an order where each
    group comes after the groups it reads (a group of one is a value's own kernel, copy or call).

    Values of one shape and device whose kernels are elementwise (no Reduce in what they compute; movement ops over
    what they load are fine) share a kernel with one Store each: an optimizer step's m, v and p updates of a
    parameter, and those of other parameters of its shape, are one launch instead of three per parameter. A member
    that reads another member uses its expression instead of loading its buffer, which is right only where every
    path between them is elementwise at the same index (else no group: a path through a view reads another element,
    which another thread may not have computed yet). A value joins a group only where that adds no cycle (a member
    that reaches another through a value outside the group), where no member reads a buffer another one writes (an
    assign's target read other than through its own value's expression), and within MAX_BUFFERS."""
    group_of: dict[UOp, int] = {}
    members: list[list[UOp]] = []
    above: list[set[int]] = []  # per group, every group it reads, transitively
    reads: list[set[UOp]] = []  # per group, what its kernel loads: Params of the function and materialized values
    writes: list[set[UOp]] = []  # per group, the pinned buffers it writes (which its members might also read)
    open_groups: dict[tuple[object, ...], list[int]] = {}
    for u in chosen:
        leaves, elementwise = _reads(u, every)
        fusable = elementwise and largest_size(u.shape) > 0
        loads = set(leaves)
        own = {args[x.arg.slot] for x in leaves if x.op is Ops.PARAM}
        out = {pinned[u]} if u in pinned else set()
        needs = {group_of[x] for x in leaves if x in group_of}
        for g in open_groups.get((u.shape, u.device or home), []) if fusable else []:
            direct = {x for x in leaves if group_of.get(x) == g}
            if not all(leaves[x] for x in direct) or own & writes[g] or out & writes[g]:
                continue
            if out & {args[x.arg.slot] for x in reads[g] if x.op is Ops.PARAM}:
                continue  # a member reads the buffer u would write
            if any(g in above[h] for h in needs - {g}):
                continue  # a cycle: u reads, through a value outside the group, one of its members
            if len(members[g]) + 1 + len({_memory(x, args) for x in (loads - direct) | reads[g]}) > MAX_BUFFERS:
                continue
            members[g].append(u)
            group_of[u] = g
            reads[g] |= loads - direct
            writes[g] |= out
            grown = (needs - {g}).union(*(above[h] for h in needs - {g}))
            for h, a in enumerate(above):
                if h == g or g in a:
                    a |= grown
            break
        else:
            group_of[u] = len(members)
            members.append([u])
            above.append(needs.union(*(above[h] for h in needs)))
            reads.append(loads)
            writes.append(out)
            if fusable:
                open_groups.setdefault((u.shape, u.device or home), []).append(group_of[u])
    # a group reads every group in its `above` (transitively closed), so one that reads another has strictly more
    # above it: sorting by that count is a topological order; ties keep the order of first members
    return [members[g] for g in sorted(range(len(members)), key=lambda g: (len(above[g]), g))]


def _memory(x: UOp, args: tuple[UOp, ...]) -> UOp:
    """The buffer a kernel's input leaf is: a Param's argument, or the materialized value itself."""
    return args[x.arg.slot] if x.op is Ops.PARAM else x


def _reads(u: UOp, chosen: set[UOp]) -> tuple[dict[UOp, bool], bool]:
    """The materialized values and Params that u's kernel reads, each with whether every path from u to it keeps
    the element index (elementwise ops and markers only), and whether the kernel is elementwise: no reduction, call,
    copy or load (a Copy in a kernel is a Load), one element per output element, so it may share its loop with
    other values of its shape. A call's output reads its function's arguments."""
    if _is_call_output(u):
        return {a: False for a in u.src[0].src[1:] if a in chosen}, False
    order = _walk(u, chosen)
    same: dict[UOp, bool] = {u: True}
    elementwise = True
    for x in reversed(order):
        if x is not u and x in chosen:
            continue
        elementwise = elementwise and x.op not in _NOT_ELEMENTWISE
        keeps = same.get(x, True) and (x.op in GroupOp.Elementwise or x.op in GroupOp.Marker)
        for s in x.src:
            same[s] = same.get(s, True) and keeps
    return {x: same[x] for x in order if x is not u and (x in chosen or x.op is Ops.PARAM)}, elementwise


_NOT_ELEMENTWISE = GroupOp.Reduce | GroupOp.Call | GroupOp.Load


def _kernel_call(values: list[UOp], bufs: list[UOp], chosen: set[UOp], written: Mapping[UOp, UOp],
                 args: tuple[UOp, ...]) -> dict[UOp, UOp]:
    """After(buf_i, Call(kernel, *bufs, *inputs)) for the materialized values of one kernel (one value, or
    siblings), sources first: value i is stored to Param slot i, and the inputs (Buffers, or the After nodes of the
    kernels that write them) get Param slots len(values).. in the order the values first read them. A value that
    reads another of the kernel's values uses its expression."""
    inputs: list[UOp] = []
    mapping: dict[UOp, UOp] = {}
    memory: dict[UOp, UOp] = {}  # a Param of the function -> the kernel's Param of its argument's flat memory
    group = set(values)

    def slot(src: UOp, b: UOp) -> UOp:
        inputs.append(src)
        return UOp.param(len(values) + len(inputs) - 1, (b.arg.size,), b.arg.dtype, b.arg.device)

    for u in toposort(values, gate=lambda x: x in group or x not in chosen):
        if u in group:
            continue
        if u in chosen:
            if u in written:  # (a size-0 value has no kernel: its readers never index it)
                mapping[u] = slot(written[u], written[u].src[0]).reshape(u.shape)
        elif u.op is Ops.PARAM:
            # the kernel's Param is flat memory: a Param the function reads as it is (a hand-built body; a Tensor's
            # data is Reshape(Param), below) is that memory viewed in the Param's own shape
            memory[u] = slot(args[u.arg.slot], args[u.arg.slot])
            mapping[u] = memory[u].reshape(u.shape)
        elif _is_buffer_view(u) and u.src[0] in memory:
            mapping[u] = memory[u.src[0]].reshape(u.shape)
    a = bufs[0].arg
    for src in inputs:
        b = src.src[0] if src.op is Ops.AFTER else src
        if b.arg.device != a.device:
            raise DeviceMismatchError(f"a kernel on {a.device} reads a buffer on {b.arg.device}: every tensor of one "
                                      f"computation must be on one device (move one with .to({a.device!r}))")
    stored = []
    for value in values:
        mapping[value] = value.substitute(mapping)  # what a later sibling that reads this value computes
        stored.append(untag(mapping[value]))
        origins.same(value, stored[-1])  # the kernel's nodes say which Tensor ops they compute (a trace's, a profile's)
    outs = [UOp.param(k, (b.arg.size,), b.arg.dtype, b.arg.device) for k, b in enumerate(bufs)]
    ast, binds = unbind(kernel_ast(stored, outs))
    for value in values:
        origins.same(value, ast)  # and so do the Stores and indexing around them
    call = UOp(Ops.CALL, (ast, *bufs, *inputs, *binds))
    return {value: b.after(call) for value, b in zip(values, bufs, strict=True)}


def outputs_of(ast: UOp) -> int:
    """How many buffers a Call of this kernel writes, its first Param slots: each Store's of a kernel (siblings
    share one), each output of a called Function, one for a copy. The one place the count is derived."""
    if ast.op is Ops.FUNCTION:
        return len(ast.src[0].src)
    if ast.op is not Ops.SINK:
        return 1
    return _stored_slots(ast)


@functools.lru_cache(maxsize=4096)
def _stored_slots(ast: UOp) -> int:
    slots = {x.src[0].src[0].arg.slot for x in ast.toposort()
             if x.op is Ops.STORE and x.src[0].op is Ops.INDEX and x.src[0].src[0].op is Ops.PARAM}
    return max(slots, default=0) + 1


def _copy_call(value: UOp, pinned: UOp | None, written: Mapping[UOp, UOp], args: tuple[UOp, ...]) -> UOp:
    """After(buf, Call(Copy(Param 1, device), buf, src)): the source's memory (a buffer of the program, or the one a
    kernel wrote) copied whole into a buffer of the same size on the Copy's device."""
    x = value.src[0]
    src = args[x.src[0].arg.slot] if _is_buffer_view(x) else written[x]
    b = src.src[0] if src.op is Ops.AFTER else src
    buf = pinned or new_buffer(b.arg.size, b.arg.dtype, value.arg)
    if (buf.arg.size, buf.arg.dtype) != (b.arg.size, b.arg.dtype):
        raise ValueError(f"a copy to {value.arg} writes {b.arg.size} {b.arg.dtype.name} into a buffer of "
                                  f"{buf.arg.size} {buf.arg.dtype.name}")
    ast = UOp.param(1, (b.arg.size,), b.arg.dtype, b.arg.device).copy_to(value.arg)
    return buf.after(UOp(Ops.CALL, (ast, buf, src)))


def largest_size(shape: tuple[int | UOp, ...]) -> int:
    """The elements a value of this shape can have: a symbolic size at its variables' largest values."""
    n = prod(shape)
    return n if isinstance(n, int) else int(n.vmax)


class BindError(ValueError):
    """One computation binds a variable to two values."""


def unbind(ast: UOp) -> tuple[UOp, tuple[UOp, ...]]:
    """The kernel with every Bind replaced by its variable, so that it is the same kernel for every value, and
    the Binds that give this call its values."""
    binds = list(dict.fromkeys(u for u in ast.toposort() if u.op is Ops.BIND))
    values: dict[UOp, int] = {}
    for b in binds:
        var, value = b.src[0], b.src[1].arg.value
        if values.setdefault(var, value) != value:
            raise BindError(f"variable {var.arg.name} is bound to {values[var]} and to {value} in one computation")
    return (ast.substitute({b: b.src[0] for b in binds}), tuple(binds)) if binds else (ast, ())


def _walk(value: UOp, chosen: set[UOp]) -> list[UOp]:
    """value's graph down to (and including) the materialized values it reads, sources first."""
    return toposort([value], gate=lambda u: u is value or u not in chosen)


def _function_call(fn: UOp, pinned: Mapping[UOp, UOp], written: Mapping[UOp, UOp], args: tuple[UOp, ...],
                   home: str | None) -> dict[UOp, UOp]:
    """After(out_i, Call(Function(body), *outs, *inputs, *binds)) for every output of a called user function:
    each output gets a buffer (all of them, used or not: the function writes them all), each argument is read
    from memory, and the binds give the values of the variables in the arguments' sizes."""
    check(fn)  # a hand-built Function too: its Params against its arguments, by the spec's named rules
    body = fn.src[0]
    inputs = [args[a.src[0].arg.slot] if _is_buffer_view(a) else written[a] for a in fn.src[1:]]
    binds = list(dict.fromkeys(u for a in fn.src[1:] for u in program_order(a) if u.op is Ops.BIND))
    device = next((i.src[0].arg.device if i.op is Ops.AFTER else i.arg.device for i in inputs), home)
    outs = []
    for k, r in enumerate(body.src):
        out = UOp(Ops.GETTUPLE, (fn,), k)
        outs.append(pinned.get(out) or new_buffer(max(largest_size(r.shape), 1), r.dtype, r.device or device))
    call = UOp(Ops.CALL, (fn.replace(src=(body,)), *outs, *inputs, *binds))
    return {UOp(Ops.GETTUPLE, (fn,), k): b.after(call) for k, b in enumerate(outs)}
