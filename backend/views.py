"""Response bodies built from stored traces: summaries, contexts with their passes, the graph at a step, and
kernel views. Everything is read from the node table, so saved traces and fresh recordings look the same."""

from __future__ import annotations

from backend import display
from backend.models import (
    Axis,
    ContextInfo,
    GraphNode,
    KernelView,
    OptSpec,
    PassInfo,
    RuleInfo,
    StepView,
    TraceDetail,
    TraceSummary,
)
from backend.recording import RecordError
from backend.store import NotFound, StoredTrace
from uopviz.trace import TraceContext, TraceFormatError, TracePass
from uopviz.uop.ops import AxisType, UOp

_LETTERS = {t.letter: t for t in AxisType}


def kernel_axes(name: str) -> list[Axis]:
    """The axes a kernel name spells (`r_g5_g3_R7`: AxisType letter + size, `v` for a symbolic size); [] for a
    name that is not a kernel name."""
    head, *parts = name.split("_")
    if head not in ("r", "E"):
        return []
    axes = []
    for part in parts:
        letter, size = part[:1], part[1:]
        if not (size == "v" or (size.isascii() and size.isdigit())) or letter not in _LETTERS:
            return []
        t = _LETTERS[letter]
        axes.append(Axis(letter=letter, size=size if size == "v" else int(size), type=t.name, color=t.colour))
    return axes


def summary(st: StoredTrace) -> TraceSummary:
    return TraceSummary(id=st.id, name=st.name, source=st.source, contexts=len(st.trace.contexts))


def detail(st: StoredTrace) -> TraceDetail:
    return TraceDetail(id=st.id, name=st.name, source=st.source, device=st.device, contexts=[
        ContextInfo(index=i, name=c.name, kind=c.kind, axes=_axes_of(c), kernel_hash=_kernel_hash(c), passes=[
            PassInfo(index=j, name=p.name, stage=p.stage, depth=p.depth, parent=p.parent, steps=len(p.steps),
                     error=p.error) for j, p in enumerate(c.passes)])
        for i, c in enumerate(st.trace.contexts)])


def _axes_of(c: TraceContext) -> list[Axis]:
    return kernel_axes(c.name) if c.kind == "kernel" else []


def _first_pass(c: TraceContext) -> TracePass | None:
    """A context's first top-level pass: its input is the graph the context began with."""
    return next((p for p in c.passes if p.depth == 0), None)


def _kernel_hash(c: TraceContext) -> str | None:
    """A kernel's content hash: the id of the graph its lowering began with, which is the node_id the tuning
    database keys the kernel by (trace ids are content ids)."""
    first = _first_pass(c) if c.kind == "kernel" else None
    return None if first is None else first.input


def _context(st: StoredTrace, ci: int) -> TraceContext:
    cs = st.trace.contexts
    if not 0 <= ci < len(cs):
        raise NotFound(f"trace {st.id!r} has {len(cs)} contexts (0..{len(cs) - 1}); there is no context {ci}")
    return cs[ci]


def _pass(st: StoredTrace, ci: int, pi: int) -> TracePass:
    c = _context(st, ci)
    if not 0 <= pi < len(c.passes):
        raise NotFound(f"context {ci} ({c.name}) has {len(c.passes)} passes; there is no pass {pi}")
    return c.passes[pi]


def _graph_node(nid: str, e: display.Entry) -> GraphNode:
    return GraphNode(id=nid, op=e["op"], dtype=e["dtype"], arg=display.arg_text(e["arg"]), src=list(e["src"]),
                     shape=e["shape"], group=display.group_of(e["op"]), axis_type=display.axis_type_of(e),
                     color=display.colour_of(e))


def step(st: StoredTrace, ci: int, pi: int, k: int) -> StepView:
    """The graph after the first k steps of a pass (k=0: its input) and what step k changed."""
    p, tr = _pass(st, ci, pi), st.trace
    if not 0 <= k <= len(p.steps):
        raise NotFound(f"pass {pi} ({p.name}) has {len(p.steps)} steps; k runs 0..{len(p.steps)}, not {k}")
    with st.lock:
        root = p.graph_at(k)
        order = st.trace.toposort(root)
        before = set(st.trace.toposort(p.graph_at(k - 1))) if k else set(order)
    now = set(order)
    nodes = [_graph_node(nid, tr.node(nid)) for nid in order]
    if k == 0:
        return StepView(root=root, steps=len(p.steps), nodes=nodes, added=[], removed=[], rule=None, match=None,
                        replacement=None, diff="")
    s = p.steps[k - 1]
    rule = tr.rules[s.rule]
    return StepView(root=root, steps=len(p.steps), nodes=nodes, added=[n for n in order if n not in before],
                    removed=sorted(before - now), rule=RuleInfo(location=rule.location, text=rule.text),
                    match=s.match, replacement=s.replacement, diff=display.subtree_diff(s.match, s.replacement,
                                                                                       tr.node))


def _kernel_context(st: StoredTrace, ci: int) -> TraceContext:
    c = _context(st, ci)
    if c.kind != "kernel":
        raise NotFound(f"context {ci} ({c.name}) is a {c.kind}, not a kernel")
    return c


def kernel(st: StoredTrace, ci: int) -> KernelView:
    """Source and Linear listing of a kernel context, from its 'render' pass: Program(Linear, Source(text))."""
    c, tr = _kernel_context(st, ci), st.trace
    render = next((p for p in reversed(c.passes) if p.name == "render"), None)
    prog = None if render is None or render.output is None else tr.node(render.output)
    if prog is None or prog["op"] != "Program" or len(prog["src"]) != 2:
        why = next((f": {p.name} failed with {p.error}" for p in c.passes if p.error), "")
        raise NotFound(f"kernel {c.name} has no rendered program{why}")
    linear, source = (tr.node(s) for s in prog["src"])
    return KernelView(name=c.name, device=_device(st, linear["src"]), source=str(source["arg"] or ""),
                      linear=display.linear_listing(list(linear["src"]), tr.node),
                      opts=[OptSpec(**o) for o in c.opts], axes=_axes_of(c))


def kernel_root(st: StoredTrace, ci: int) -> tuple[str, str]:
    """The id of the graph a kernel context's lowering began with (its first pass's input), and the device to
    lower it for: what applying opts and BEAM searches start from."""
    c = _kernel_context(st, ci)
    first = _first_pass(c)
    if first is None:
        raise NotFound(f"kernel {c.name} has no recorded passes")
    device = _device(st, sorted(st.trace.nodes_of(first.input)))
    if device is None:
        raise RecordError(f"kernel {c.name} names no device to lower it for")
    return first.input, device


def kernel_input(st: StoredTrace, ci: int) -> tuple[UOp, str]:
    """kernel_root's graph, rebuilt, and its device."""
    root, device = kernel_root(st, ci)
    try:
        return st.trace.uop(root), device
    except TraceFormatError as e:
        raise RecordError(f"kernel {st.trace.contexts[ci].name} cannot be rebuilt from this trace: {e}") from None


def _device(st: StoredTrace, nodes: list[str]) -> str | None:
    """The device the kernel's Params name (a saved trace says no more), else the trace's own device."""
    for nid in nodes:
        arg = st.trace.node(nid)["arg"]
        param = arg.get("ParamArg") if isinstance(arg, dict) else None
        if isinstance(param, dict) and isinstance(param.get("device"), str):
            return param["device"]
    return st.device
