"""The lowering, in order, in one place: the schedule's passes (a program's Tensor graph to a graph of kernel
calls) and each kernel's passes (one kernel to rendered source), side by side, each named and filed under its
SPEC stage: Callify, Rangeify, Optimize, Expand, Instruction Selection, Linearize, Register/Memory Plan, Render.

A pass is a rule set run by graph_rewrite (`Rules`), a whole-graph algorithm (`Transform`), or one of the two
kernel steps that need the kernel's lowering state (`Optimize`, which applies the opts and names the kernel,
and `Render`). To add a pass, write it where its stage's code lives and add one line here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from uopviz.codegen.accumulate import Accumulators, accumulate, merge_loops
from uopviz.codegen.blocked_sums import block_sums
from uopviz.codegen.decompositions import decompose, fused_multiply_add, no_rules
from uopviz.codegen.devectorize import devectorize
from uopviz.codegen.epilogue import loop_epilogues
from uopviz.codegen.expand import expander, lane_axes
from uopviz.codegen.gpudims import global_axes, launch_dims, threads, to_specials
from uopviz.codegen.group_reduce import GroupContext, gate_blocks, group_reduce
from uopviz.codegen.linearize import linearize
from uopviz.codegen.naming import kernel_name
from uopviz.codegen.opt import Opt, Scheduler
from uopviz.codegen.prefetch import prefetch
from uopviz.codegen.regplan import plan_registers
from uopviz.codegen.rowcache import cache_row_values
from uopviz.codegen.tc import tensor_cores, wmma_accumulate
from uopviz.dtype import DType
from uopviz.renderer.cstyle import render
from uopviz.runtime.buffer import new_buffer
from uopviz.schedule.callify import callify
from uopviz.schedule.memory import plan_memory
from uopviz.schedule.operands import store_operands
from uopviz.schedule.pack import pack
from uopviz.schedule.pads import store_pads
from uopviz.schedule.program import program_order
from uopviz.schedule.rangeify import RangeCounter, collapse, pushdown, range_start
from uopviz.schedule.reductions import split_reductions
from uopviz.schedule.rows import fuse_rows
from uopviz.schedule.split import largest_size, split
from uopviz.target import Kernel, Target
from uopviz.trace import origins
from uopviz.trace.recorder import context, context_opts, rename_context, stage
from uopviz.uop.ops import Ops, UOp
from uopviz.uop.pattern import PatternMatcher, function_pass, graph_rewrite, recording, unrecorded
from uopviz.uop.symbolic import symbolic

simplify = PatternMatcher([*symbolic.rules, *collapse.rules], name="simplify")


@dataclass(frozen=True)
class Schedule:
    """What one schedule is asked for: outputs pinned to existing buffers (assign), and the device of values
    made from constants alone (default: their buffers')."""

    outputs: Mapping[int, UOp] | None = None
    device: str | None = None


@dataclass
class Lowering:
    """One kernel's lowering as it goes: its target and the opts to apply; Optimize fills in the Scheduler (the
    opts applied) and the kernel's name, Render reads the name and the buffer parameters."""

    target: Target
    opts: Sequence[Opt] = ()
    params: tuple[DType, ...] = ()
    sched: Scheduler | None = None
    name: str = ""


Ctx = Any  # a pass's context: Schedule for the schedule's passes, Lowering for a kernel's


@dataclass(frozen=True)
class Rules:
    """A rule set run by graph_rewrite to a fixpoint; `ctx` makes the rewrite's context from the graph and the
    pass context, and `rules` may be chosen per target."""

    name: str
    stage: str
    rules: PatternMatcher | Callable[[Target], PatternMatcher]
    ctx: Callable[[UOp, Ctx], Any] | None = None

    def run(self, u: UOp, c: Ctx) -> UOp:
        pm = self.rules if isinstance(self.rules, PatternMatcher) else self.rules(c.target)
        return graph_rewrite(u, pm, self.ctx(u, c) if self.ctx else None, name=self.name)


@dataclass(frozen=True)
class Transform:
    """A whole-graph algorithm, recorded as one step whose rule is `origin` (default: fn)."""

    name: str
    stage: str
    fn: Callable[[UOp, Ctx], UOp]
    origin: Callable[..., Any] | None = None

    def run(self, u: UOp, c: Ctx) -> UOp:
        return function_pass(lambda x: self.fn(x, c), u, self.name, origin=self.origin or self.fn)


def _giving(ast: UOp) -> Callable[[UOp], UOp]:
    """A pass's function that returns `ast`, the kernel a Scheduler step already computed, in place of the root."""
    return lambda _: ast


@dataclass(frozen=True)
class Optimize:
    """The kernel with its axes in canonical order, then each opt applied (one recorded step apiece;
    KernelOptError for an illegal one); the kernel is named by its axes here, before later passes add ranges of
    their own. The Scheduler it starts from is what opts are searched over (`scheduler`)."""

    name: str = "optimize"
    stage: str = "Optimize"

    def run(self, u: UOp, c: Lowering) -> UOp:
        sched = Scheduler.of(u, c.target)
        u = function_pass(_giving(sched.ast), u, "order axes", origin=Scheduler.of)
        for opt in c.opts:
            sched = sched.apply_opt(opt)
            u = function_pass(_giving(sched.ast), u, str(opt), origin=Scheduler.apply_opt)
        c.sched, c.name = sched, kernel_name(u)
        rename_context(c.name)
        context_opts([o.to_json() for o in sched.opts])
        return u


@dataclass(frozen=True)
class Render:
    """Program(linear, Source): the Linear program rendered in the target's dialect (the PYTHON target interprets
    the Linear program and has no source)."""

    name: str = "render"
    stage: str = "Render"

    def run(self, u: UOp, c: Lowering) -> UOp:
        return function_pass(lambda lin: _program(lin, c), u, self.name, origin=render)


Pass = Rules | Transform | Optimize | Render

SCHEDULE: tuple[Pass, ...] = (
    Transform("callify", "Callify", lambda roots, s: callify(roots.src), origin=callify),
    Transform("fuse rows", "Rangeify", lambda f, s: fuse_rows(f), origin=fuse_rows),
    Transform("split reductions", "Rangeify", lambda f, s: split_reductions(f), origin=split_reductions),
    Transform("store pads", "Rangeify", lambda f, s: store_pads(f), origin=store_pads),
    Transform("store operands", "Rangeify", lambda f, s: store_operands(f), origin=store_operands),
    Transform("pack", "Rangeify", lambda f, s: pack(f), origin=pack),
    Transform("kernel split", "Rangeify", lambda f, s: split(f, s.outputs, s.device), origin=split),
    Transform("memory plan", "Register/Memory Plan", lambda g, s: plan_memory(g), origin=plan_memory),
)
"""A program's Tensor graph (a Tuple of the values to compute) to its command-buffer graph."""

KERNEL: tuple[Pass, ...] = (
    Rules("rangeify", "Rangeify", pushdown, ctx=lambda u, c: RangeCounter(range_start(u))),
    Rules("simplify", "Rangeify", simplify),
    Transform("global axes", "Optimize", lambda u, c: global_axes(u, c.target), origin=global_axes),
    Optimize(),
    Rules("group reduce", "Optimize", group_reduce, ctx=lambda u, c: GroupContext(u, c.target.device)),
    Transform("tensor cores", "Expand", lambda u, c: tensor_cores(u, c.sched.tc if c.sched else None),
              origin=tensor_cores),
    Transform("loop epilogues", "Expand", lambda u, c: loop_epilogues(u, lane_axes(u), c.target.private_memory),
              origin=loop_epilogues),
    Rules("expand", "Expand", expander, ctx=lambda u, c: lane_axes(u)),
    Transform("blocked sums", "Instruction Selection", lambda u, c: block_sums(u), origin=block_sums),
    Rules("reduce to accumulator", "Instruction Selection", accumulate,
          ctx=lambda u, c: Accumulators(c.target.device, u)),
    Transform("merge loops", "Instruction Selection", lambda u, c: merge_loops(u), origin=merge_loops),
    Transform("cache row values", "Instruction Selection", lambda u, c: cache_row_values(u, c.target),
              origin=cache_row_values),
    Rules("wmma accumulate", "Instruction Selection", wmma_accumulate),
    Rules("decompose", "Instruction Selection", lambda t: decompose(t.native)),
    Rules("simplify", "Instruction Selection", symbolic),
    Transform("devectorize", "Instruction Selection", lambda u, c: devectorize(u, c.target), origin=devectorize),
    Rules("fuse multiply-add", "Instruction Selection", lambda t: fused_multiply_add if t.fma else no_rules),
    Rules("hardware ids", "Instruction Selection", to_specials),
    Transform("prefetch", "Instruction Selection", lambda u, c: prefetch(u, c.target), origin=prefetch),
    Transform("linearize", "Linearize", lambda u, c: linearize(u), origin=linearize),
    Transform("gate blocks", "Linearize", lambda u, c: gate_blocks(u), origin=gate_blocks),
    Transform("register plan", "Register/Memory Plan", lambda u, c: plan_registers(u), origin=plan_registers),
    Render(),
)
"""One kernel (a Sink of Stores over a Tensor-level value) to Program(Linear, Source)."""


def _run(passes: Sequence[Pass], u: UOp, c: Ctx, until: type | None = None) -> UOp:
    for p in passes:
        if until is not None and isinstance(p, until):
            break
        with stage(p.stage):
            u, before = p.run(u, c), u
        origins.same(before, u)  # what each pass made says which Tensor ops it computes (while origins are noted)
    return u


def schedule(roots: Sequence[UOp], outputs: Mapping[int, UOp] | None = None, device: str | None = None) -> UOp:
    """The command-buffer graph (Sink of After(buffer, Call(kernel, buffers...))) computing roots, recorded under a
    "schedule" context; values made from constants alone are computed on `device`."""
    with context("schedule", "schedule"):
        return _run(SCHEDULE, UOp(Ops.TUPLE, tuple(roots)), Schedule(outputs, device))


class KernelCall(NamedTuple):
    """One kernel run of a command-buffer graph: the kernel, its buffers by Param slot, its variables' values. A
    copy between devices is one too: its ast is Copy(Param 1, device), its buffers the destination and source."""

    ast: UOp
    buffers: list[UOp]
    vals: dict[str, int]


class FunctionSchedule(NamedTuple):
    """A user function's body scheduled once for its signature: the command-buffer graph over placeholder buffers
    for its arguments (by Param slot) and its outputs; a call substitutes the real ones."""

    graph: UOp
    inputs: tuple[UOp, ...]
    outputs: tuple[UOp, ...]


_functions: dict[UOp, FunctionSchedule] = {}


def function_schedule(fn: UOp) -> FunctionSchedule:
    """The schedule of `Function(body)` (cached per body: the body's Params carry the signature, so a second call
    with new inputs of the same shapes, dtypes and devices schedules nothing), recorded under a context named
    after the function when it is first made or a trace is recording."""
    if fn in _functions and not recording():
        return _functions[fn]
    body = fn.src[0]
    params = {u.arg.slot: u for u in program_order(body) if u.op is Ops.PARAM}  # a called function's are its own
    inputs = tuple(new_buffer(largest_size(params[k].shape), params[k].arg.dtype, params[k].arg.device)
                   for k in range(len(params)))
    with context(f"function {fn.arg or 'f'}", "function"):
        graph = _run(SCHEDULE[1:], UOp(Ops.FUNCTION, (body, *inputs), fn.arg), Schedule())
    written = iter(graph.src)  # the outputs' writers, in order; an output of size 0 has none
    outputs = tuple(next(written).src[0] if largest_size(r.shape) else new_buffer(1, r.dtype, r.device)
                    for r in body.src)
    _functions[fn] = FunctionSchedule(graph, inputs, outputs)
    return _functions[fn]


def calls_of(graph: UOp, vals: Mapping[str, int] | None = None) -> list[KernelCall]:
    """The kernel runs of a command-buffer graph, in dependency order; a called function's are its schedule's,
    with its placeholders replaced by the call's buffers. `vals`: values of variables bound outside."""
    out: list[KernelCall] = []
    for c in graph.toposort():
        if c.op is not Ops.CALL:
            continue
        bufs = [b.src[0] if b.op is Ops.AFTER else b for b in c.src[1:] if b.op is not Ops.BIND]
        here = {**(vals or {}), **{b.src[0].arg.name: b.src[1].arg.value for b in c.src[1:] if b.op is Ops.BIND}}
        if c.src[0].op is not Ops.FUNCTION:
            out.append(KernelCall(c.src[0], bufs, here))
            continue
        fs = function_schedule(c.src[0])
        real = dict(zip((*fs.outputs, *fs.inputs), bufs, strict=True))
        out += [KernelCall(k.ast, [real.get(b, b) for b in k.buffers], k.vals) for k in calls_of(fs.graph, here)]
    return out


def kernels_of(graph: UOp) -> list[tuple[UOp, list[UOp]]]:
    """(kernel, buffers) of each kernel Call of a command-buffer graph (copies between devices left out), in
    dependency order."""
    return [(c.ast, c.buffers) for c in calls_of(graph) if c.ast.op is not Ops.COPY]


def lower(ast: UOp, target: Target, opts: Sequence[Opt] = ()) -> Kernel:
    """Run every kernel pass (recorded when tracing), applying `opts` in the Optimize stage, and render the kernel
    for the target."""
    slots = {x.arg.slot: x.arg.dtype for x in ast.toposort() if x.op is Ops.PARAM}
    c = Lowering(target, opts, tuple(slots[k] for k in range(len(slots))))  # every slot, even an unread one
    if recording():
        prog = _run(KERNEL, ast, c)
    else:
        prog = _run(KERNEL[_OPTIMIZE:], _prepared(ast, target), c)
    linear, source = prog.src[0], prog.src[1].arg
    gsize, lsize = launch_dims(linear)
    return Kernel(c.name, linear, source or None, c.params, global_size=gsize, local_size=lsize,
                  vars=tuple(x.arg.name for x in linear.src if x.op is Ops.DEFINE_VAR), threads=threads(linear),
                  meta={"opts": c.sched.opts if c.sched else ()})


def scheduler(ast: UOp, target: Target) -> Scheduler:
    """The Scheduler that Optimize applies opts to: the kernel after the passes before it (never recorded: it
    decides opts, it is not a lowering)."""
    with unrecorded():
        return Scheduler.of(_prepared(ast, target), target)


_OPTIMIZE = next(i for i, p in enumerate(KERNEL) if isinstance(p, Optimize))
_PREPARED_KEPT = 512
_prepared_graphs: OrderedDict[tuple[UOp, Target], UOp] = OrderedDict()
_prepared_lock = threading.Lock()


def _prepared(ast: UOp, target: Target) -> UOp:
    """The kernel after the passes before Optimize (which read only the graph and the target), kept for the
    _PREPARED_KEPT kernels used last: choosing a kernel's opts (scheduler) and lowering it both start there, and
    ran those passes twice for every kernel of a first call."""
    key = (ast, target)
    with _prepared_lock:
        if (hit := _prepared_graphs.get(key)) is not None:
            _prepared_graphs.move_to_end(key)
            return hit
    with unrecorded():
        hit = _run(KERNEL, ast, Lowering(target), until=Optimize)
    with _prepared_lock:
        _prepared_graphs[key] = hit
        while len(_prepared_graphs) > _PREPARED_KEPT:
            _prepared_graphs.popitem(last=False)
    return hit


def _program(linear: UOp, c: Lowering) -> UOp:
    return UOp(Ops.PROGRAM, (linear, UOp(Ops.SOURCE, (), source_of(linear, c.name, c.params, c.target) or "")), c.name)


def source_of(linear: UOp, name: str, params: tuple[DType, ...], target: Target) -> str | None:
    """A Linear program's source in the target's dialect (None for the PYTHON interpreter, which runs the program
    itself): machine code is compiled only from source rendered from the IR."""
    d = target.dialect
    return render(linear, name, d, params, target.emulated) if d is not None else None

