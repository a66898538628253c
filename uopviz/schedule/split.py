"""The kernel split: which values of a Function are stored to memory, and the kernel that computes each.

A value is materialized (gets a buffer and a kernel of its own) when it is an output, when the program asks
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

The result is the command-buffer graph: `Sink(After(buf, Call(kernel, buf, *inputs, *binds)), ...)`, where each
Call's kernel is `Sink(Store(out.index(flat(ranges)), Index(value, *ranges)).end(*ranges))` over its own Params
(slot 0 is written), its inputs are Buffers or the After nodes of the kernels that write them, and its binds give
the values of the variables its sizes use: the kernel itself holds the unbound variables, so it is one kernel for
every value (compiled once), and a buffer of symbolic size is allocated for the largest value.
"""

from __future__ import annotations

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
    written: dict[UOp, UOp] = {}  # materialized value -> After(buffer, Call)
    for u in chosen:
        if u in written:
            continue
        if _is_call_output(u):
            written.update(_function_call(u.src[0], pinned, written, args, home))
            continue
        if (size := largest_size(u.shape)) == 0:
            continue
        if transfers(u):
            written[u] = _copy_call(u, pinned.get(u), written, args)
            continue
        buf = pinned[u] if u in pinned else new_buffer(size, u.dtype, u.device or home)
        written[u] = _kernel_call(u, buf, set(chosen), written, args)
    return UOp.sink(*(written[r] for r in body.src if r in written))  # output order; size-0 outputs have none


def _kernel_call(value: UOp, buf: UOp, chosen: set[UOp], written: Mapping[UOp, UOp], args: tuple[UOp, ...]) -> UOp:
    """After(buf, Call(kernel, buf, *inputs)) for one materialized value: its inputs (Buffers, or the After
    nodes of the kernels that write them) get Param slots 1.. in the order the value first reads them."""
    inputs: list[UOp] = []
    mapping: dict[UOp, UOp] = {}
    memory: dict[UOp, UOp] = {}  # a Param of the function -> the kernel's Param of its argument's flat memory

    def slot(src: UOp, b: UOp) -> UOp:
        inputs.append(src)
        return UOp.param(len(inputs), (b.arg.size,), b.arg.dtype, b.arg.device)

    for u in _walk(value, chosen):
        if u is not value and u in chosen:
            if u in written:  # (a size-0 value has no kernel: its readers never index it)
                mapping[u] = slot(written[u], written[u].src[0]).reshape(u.shape)
        elif u.op is Ops.PARAM:
            # the kernel's Param is flat memory: a Param the function reads as it is (a hand-built body; a Tensor's
            # data is Reshape(Param), below) is that memory viewed in the Param's own shape
            memory[u] = slot(args[u.arg.slot], args[u.arg.slot])
            mapping[u] = memory[u].reshape(u.shape)
        elif _is_buffer_view(u) and u.src[0] in memory:
            mapping[u] = memory[u.src[0]].reshape(u.shape)
    a = buf.arg
    for src in inputs:
        b = src.src[0] if src.op is Ops.AFTER else src
        if b.arg.device != a.device:
            raise DeviceMismatchError(f"a kernel on {a.device} reads a buffer on {b.arg.device}: every tensor of one "
                                      f"computation must be on one device (move one with .to({a.device!r}))")
    stored = untag(value.substitute(mapping))
    origins.same(value, stored)  # the kernel's nodes say which Tensor ops they compute (a trace's, a profile's)
    ast, binds = unbind(kernel_ast(stored, UOp.param(0, (a.size,), a.dtype, a.device)))
    origins.same(value, ast)  # and so do the Stores and indexing around them
    return buf.after(UOp(Ops.CALL, (ast, buf, *inputs, *binds)))


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
