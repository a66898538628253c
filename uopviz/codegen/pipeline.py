"""The lowering of one kernel, from its Store over a Tensor-level value to rendered source: the ordered list of
named passes, each filed under its SPEC stage (Rangeify, Optimize, Instruction Selection, Linearize,
Register/Memory Plan, Render). This is the one place that says what runs in which order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uopviz.codegen.accumulate import Accumulators, accumulate, merge_loops
from uopviz.codegen.decompositions import decompose
from uopviz.codegen.devectorize import devectorize
from uopviz.codegen.expand import expander, lane_axis
from uopviz.codegen.gpudims import global_axes, launch_dims, threads, to_specials
from uopviz.codegen.group_reduce import GroupContext, gate_blocks, group_reduce
from uopviz.codegen.linearize import linearize
from uopviz.codegen.naming import kernel_name
from uopviz.codegen.opt import Opt, Scheduler
from uopviz.codegen.regplan import plan_registers
from uopviz.dtype import DType
from uopviz.renderer.cstyle import render
from uopviz.schedule.rangeify import RangeCounter, collapse, pushdown, range_start
from uopviz.target import Kernel, Target
from uopviz.trace.recorder import context_opts, rename_context
from uopviz.uop.ops import Ops, UOp
from uopviz.uop.pattern import PatternMatcher, function_pass, graph_rewrite
from uopviz.uop.symbolic import symbolic

simplify = PatternMatcher([*symbolic.rules, *collapse.rules], name="simplify")  # type: ignore[list-item]


@dataclass(frozen=True)
class Pass:
    """One pipeline step under a SPEC stage: a rule set (run by graph_rewrite, with ctx made per kernel) or a
    whole-graph function of (graph, target)."""

    name: str
    stage: str
    rules: PatternMatcher | Callable[[Target], PatternMatcher] | None = None
    ctx: Callable[[UOp, Target], Any] | None = None
    fn: Callable[[UOp, Target], UOp] | None = None
    origin: Callable[..., Any] | None = None  # what a trace names as the rule of a fn pass (default: fn)

    def run(self, u: UOp, target: Target) -> UOp:
        if self.fn is not None:
            return function_pass(lambda x: self.fn(x, target), u, self.name,  # type: ignore[misc]
                                 origin=self.origin or self.fn)
        pm = self.rules if isinstance(self.rules, PatternMatcher) else self.rules(target)  # type: ignore[misc]
        return graph_rewrite(u, pm, self.ctx(u, target) if self.ctx else None, name=self.name)


PASSES: tuple[Pass, ...] = (
    Pass("rangeify", "Rangeify", pushdown, ctx=lambda u, t: RangeCounter(range_start(u))),
    Pass("simplify", "Rangeify", simplify),
    Pass("global axes", "Optimize", fn=global_axes),
    Pass("group reduce", "Optimize", group_reduce, ctx=lambda u, t: GroupContext(u, t.device)),
    Pass("expand", "Expand", expander, ctx=lambda u, t: lane_axis(u)),
    Pass("reduce to accumulator", "Instruction Selection", accumulate, ctx=lambda u, t: Accumulators(t.device)),
    Pass("merge loops", "Instruction Selection", fn=lambda u, t: merge_loops(u), origin=merge_loops),
    Pass("decompose", "Instruction Selection", lambda t: decompose(t.native)),
    Pass("simplify", "Instruction Selection", symbolic),
    Pass("devectorize", "Instruction Selection", fn=devectorize),
    Pass("hardware ids", "Instruction Selection", to_specials),
    Pass("linearize", "Linearize", fn=lambda u, t: linearize(u), origin=linearize),
    Pass("gate blocks", "Linearize", fn=lambda u, t: gate_blocks(u), origin=gate_blocks),
    Pass("register plan", "Register/Memory Plan", fn=lambda u, t: plan_registers(u), origin=plan_registers),
)


OPTIMIZE_AT = "global axes"  # opts apply to the kernel this pass leaves


def lower(ast: UOp, target: Target, opts: Sequence[Opt] = ()) -> Kernel:
    """Run every pass on a kernel (recorded when tracing), applying `opts` in the Optimize stage (each a named
    step; KernelOptError for an illegal one), and render it for the target."""
    from uopviz.trace.recorder import stage
    slots = {x.arg.slot: x.arg.dtype for x in ast.toposort() if x.op is Ops.PARAM}
    params = tuple(slots[k] for k in range(len(slots)))  # every slot, even one whose reads fold away
    u, name, sched = ast, "", None
    for p in PASSES:
        with stage(p.stage):
            u = p.run(u, target)
            if p.name == OPTIMIZE_AT:
                sched, u = optimize(u, target, opts)
        if p.name == OPTIMIZE_AT:  # named by its axes, before later passes add ranges of their own
            name = kernel_name(u)
            rename_context(name)
            context_opts([o.to_json() for o in sched.opts] if sched else [])
    with stage("Render"):
        prog = function_pass(lambda lin: _program(lin, name, target, params), u, "render", origin=render)
    linear, source = prog.src[0], prog.src[1].arg
    gsize, lsize = launch_dims(linear)
    return Kernel(name, linear, source or None, params, global_size=gsize, local_size=lsize,
                  vars=tuple(x.arg.name for x in linear.src if x.op is Ops.DEFINE_VAR), threads=threads(linear),
                  meta={"opts": sched.opts if sched else ()})


def scheduler(ast: UOp, target: Target) -> Scheduler:
    """The Scheduler lower() applies opts to: the kernel after the passes before OPTIMIZE_AT's opts."""
    u = ast
    for p in PASSES:
        u = p.run(u, target)
        if p.name == OPTIMIZE_AT:
            break
    return Scheduler.of(u, target)


def optimize(u: UOp, target: Target, opts: Sequence[Opt]) -> tuple[Scheduler, UOp]:
    """The kernel with its axes in canonical order, then each opt applied: one recorded step apiece."""
    sched = Scheduler.of(u, target)
    u = function_pass(lambda _: sched.ast, u, "order axes", origin=Scheduler.of)
    for opt in opts:
        sched = sched.apply_opt(opt)
        u = function_pass(lambda _, s=sched: s.ast, u, str(opt), origin=Scheduler.apply_opt)  # type: ignore[misc]
    return sched, u


def _program(linear: UOp, name: str, target: Target, params: tuple[DType, ...]) -> UOp:
    """Program(linear, Source) — the PYTHON target interprets the Linear program and has no source."""
    text = render(linear, name, target.dialect, params, target.emulated) if target.dialect is not None else ""
    return UOp(Ops.PROGRAM, (linear, UOp(Ops.SOURCE, (), text)), name)
