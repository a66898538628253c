"""Response bodies built from stored traces: summaries, contexts with their passes, the graph at a step, and
kernel views. Everything is read from the node table, so saved traces and fresh recordings look the same."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

from pydantic import TypeAdapter
from uopviz.backend import display
from uopviz.backend.models import (
    Axis,
    Change,
    ContextInfo,
    Frame,
    GraphNode,
    KernelView,
    LaunchRow,
    NodeOrigin,
    OptSpec,
    OptStep,
    PassInfo,
    ProfileView,
    Roof,
    RuleInfo,
    RuleProfile,
    StepView,
    TraceDetail,
    TraceSummary,
    Work,
)
from uopviz.backend.recording import RecordError
from uopviz.backend.store import NotFound, StoredTrace

from uopviz.codegen.opt import KernelOptError, Opt
from uopviz.dtype import DTypeError, dtypes
from uopviz.profile import Profile
from uopviz.runtime.device import shard_free
from uopviz.search.keys import kernel_hash
from uopviz.trace import Trace, TraceContext, TraceFormatError, TracePass
from uopviz.uop.ops import AxisType, GroupOp, Ops, UOp

_LETTERS = {t.letter: t for t in AxisType}
SUMMARY_FROM = 40  # nodes added and removed from which a step is aligned and said in a few lines (StepView.summary)
SUMMARY_LINES = 6  # re-spellings a summary names
MAX_CHANGES = 200  # nodes a step's diff lists (a whole-graph pass changes them all; `changed` counts every one)


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
    return TraceSummary(id=st.id, name=st.name, source=st.source, contexts=len(st.trace.contexts), origin=st.origin)


def detail(st: StoredTrace) -> TraceDetail:
    """The trace's contexts and passes, with what the UI lists beside them: labels that tell kernels of one name
    apart, where each context was made, pass and rule times, and the opt each opt pass applied. It reads stored
    nodes only (no pass is replayed: a pass's folded steps come with its steps), so a trace of hundreds of kernels
    answers at once. Not kept: for a GPT step's trace it would hold a fifth as much again as the trace."""
    return _detail_head(st).model_copy(update={"contexts": list(_context_infos(st))})


def detail_json(st: StoredTrace) -> bytes:
    """`detail(st)` as JSON, written one context at a time. Made whole, a GPT step's outline is ~18k models at once,
    and the allocator keeps most of what they freed (8 MB, a server's for good); a context at a time, under 1 MB."""
    head = _DETAIL.dump_json(_detail_head(st))
    key = b'"contexts":[]'  # the key, unquoted: any string holding it is written escaped
    at = head.index(key) + len(key) - 1
    return b"".join([head[:at], b",".join(_CONTEXT.dump_json(c) for c in _context_infos(st)), head[at:]])


_DETAIL: TypeAdapter[TraceDetail] = TypeAdapter(TraceDetail)
_CONTEXT: TypeAdapter[ContextInfo] = TypeAdapter(ContextInfo)


def _detail_head(st: StoredTrace) -> TraceDetail:
    """The outline without its contexts."""
    return TraceDetail(id=st.id, name=st.name, source=st.source, device=st.device, origin=st.origin,
                       output=st.output, contexts=[], profiles=_profiles(st.trace))


def _context_infos(st: StoredTrace) -> Iterator[ContextInfo]:
    contexts, tr = st.trace.contexts, st.trace
    named = Counter(c.name for c in contexts)
    seen: Counter[str] = Counter()
    axes: dict[str, list[Axis]] = {}  # an opt pass's output is the next one's input
    for i, c in enumerate(contexts):
        seen[c.name] += 1
        opt_steps = _opt_steps(tr, c, axes)
        yield ContextInfo(
            index=i, name=c.name, label=c.name if named[c.name] == 1 else f"{c.name} #{seen[c.name]}",
            kind=c.kind, axes=_axes_of(c), kernel_hash=_kernel_hash(tr, c), opts=[OptSpec(**o) for o in c.opts],
            stack=[Frame(**f) for f in c.stack], time_ns=sum(p.time_ns for p in c.passes if p.depth == 0),
            passes=[PassInfo(index=j, name=p.name, stage=p.stage, depth=p.depth, parent=p.parent,
                             steps=len(p.steps), error=p.error, time_ns=p.time_ns, rules=_profile(tr, p),
                             opt=opt_steps.get(j)) for j, p in enumerate(c.passes)])


def _profiles(tr: Trace) -> list[ProfileView]:
    """The trace's profiles with the rates, shares and roofline places uopviz.profile derives, each launch tied to
    the kernel context that lowered its graph (the first one, where the graph was lowered again)."""
    firsts: dict[str, int] = {}
    for i, c in enumerate(tr.contexts):
        if c.kind == "kernel" and (first := _first_pass(c)) is not None:
            firsts.setdefault(first.input, i)
    out = []
    for doc in tr.profiles:
        p = Profile.from_dict(doc)
        launches = [LaunchRow(**{k: r[k] for k in LaunchRow.model_fields if k != "context"},
                              context=firsts.get(r["ast"]) if r["ast"] is not None else None) for r in p.rows()]
        out.append(ProfileView(wall_s=p.wall_s, kernel_s=p.kernel_s, launches=launches,
                               roofs={d: Roof(gflops=r.gflops, gbs=r.gbs) for d, r in p.roofs.items()}))
    return out


def _profile(tr: Trace, p: TracePass) -> list[RuleProfile]:
    """Matches and time per rule of a pass, most time first."""
    count: dict[int, int] = {}
    ns: dict[int, int] = {}
    for s in p.steps:
        count[s.rule] = count.get(s.rule, 0) + 1
        ns[s.rule] = ns.get(s.rule, 0) + s.time_ns
    rules = tr.rules
    return [RuleProfile(location=rules[r].location, matches=count[r], time_ns=ns[r])
            for r in sorted(count, key=lambda r: -ns[r])]


def graph_axes(tr: Trace, root: str) -> list[Axis]:
    """The axes of a kernel graph: its Ranges in idx order (as uopviz.codegen.naming names a kernel), each with its
    AxisType letter and its size (`v` where the bound is not a constant)."""
    ranges: dict[int, Axis] = {}
    for nid in tr.nodes_of(root):
        e = tr.node(nid)
        t = display.axis_type_of(e)
        idx = e["arg"]["RangeArg"].get("idx") if t is not None else None
        if t is None or t not in AxisType.__members__ or not isinstance(idx, int) or idx in ranges:
            continue
        bound = tr.node(e["src"][0]) if e["src"] else None
        value = display.const_value(bound) if bound is not None else None
        a = AxisType[t]
        ranges[idx] = Axis(letter=a.letter, size=value if isinstance(value, int) else "v", type=a.name,
                           color=a.colour)
    return [ranges[i] for i in sorted(ranges)]


def _opt_steps(tr: Trace, c: TraceContext, axes: dict[str, list[Axis]]) -> dict[int, OptStep]:
    """The passes of a kernel's Optimize stage that applied its opts (one pass per opt, named after it, in order),
    each with the opt and the axes before and after it; `axes` keeps graph_axes by root for the next call."""
    out: dict[int, OptStep] = {}
    queue = list(c.opts)
    for i, p in enumerate(c.passes):
        if not queue or p.depth != 0 or p.stage != "Optimize":
            continue
        try:
            opt = Opt.from_json(queue[0])
        except (KernelOptError, TypeError, ValueError):  # opts of a trace this uopviz cannot read: none shown
            return out
        if p.name != str(opt):
            continue
        spec = OptSpec(**queue.pop(0))
        before = _axes_at(tr, p.input, axes)
        after = _axes_at(tr, p.output, axes) if p.output is not None else before
        out[i] = OptStep(opt=spec, text=opt_text(spec, before, after), before=before, after=after)
    return out


def _axes_at(tr: Trace, root: str, axes: dict[str, list[Axis]]) -> list[Axis]:
    """graph_axes of root, kept in `axes`."""
    if root not in axes:
        axes[root] = graph_axes(tr, root)
    return axes[root]


def opt_text(o: OptSpec, before: list[Axis], after: list[Axis]) -> str:
    """An opt and what it did to the axes: "SPLIT a1 (L1024) → L64 × u16" (the axes it replaced, then those it made),
    "SWAP a0 ↔ a1: L16 L64 → L64 L16" where only their order changed."""
    head = o.op + (f" a{o.axis}" if o.axis is not None else "")
    if o.op == "PADTO":
        head += f" to {o.arg}"
    elif o.op == "SWAP":
        head += f" ↔ a{o.arg}"
    name = [f"{a.letter}{a.size}" for a in before], [f"{a.letter}{a.size}" for a in after]
    gone, made = Counter(name[0]) - Counter(name[1]), Counter(name[1]) - Counter(name[0])
    if gone or made:
        return f"{head} ({' '.join(_taking(name[0], gone))}) → {' × '.join(_taking(name[1], made)) or 'nothing'}"
    if name[0] != name[1]:
        return f"{head}: {' '.join(name[0])} → {' '.join(name[1])}"
    return f"{head}: the axes are unchanged"


def _axes_of(c: TraceContext) -> list[Axis]:
    return kernel_axes(c.name) if c.kind == "kernel" else []


def _first_pass(c: TraceContext) -> TracePass | None:
    """A context's first top-level pass: its input is the graph the context began with."""
    return next((p for p in c.passes if p.depth == 0), None)


def _kernel_hash(tr: Trace, c: TraceContext) -> str | None:
    """A kernel's content hash as the tuning database keys it: the id of the graph its lowering began with
    (trace ids are content ids), or, where its Params name an indexed device (a shard's kernel, keyed without the
    index: uopviz.search.keys), that graph's rebuilt hash."""
    first = _first_pass(c) if c.kind == "kernel" else None
    if first is None:
        return None
    named = {d for n in tr.nodes_of(first.input) if (d := _param_device(tr.node(n))) is not None}
    return kernel_hash(tr.uop(first.input)) if any(shard_free(d) != d for d in named) else first.input


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


def step_root(st: StoredTrace, ci: int, pi: int, k: int) -> str:
    """The root of the graph after the first k steps of pass pi (NotFound for a k out of its range)."""
    p = _pass(st, ci, pi)
    if not 0 <= k <= len(p.steps):
        raise NotFound(f"pass {pi} ({p.name}) has {len(p.steps)} steps; k runs 0..{len(p.steps)}, not {k}")
    with st.lock:
        return p.graph_at(k)


def _graph_node(nid: str, e: display.Entry, device: str | None = None,
                origin: dict[str, Any] | None = None) -> GraphNode:
    """A drawn node; `device` (where the graph spans several) joins its arg text, as `@ CPU:1`; `origin` is what
    made it (Trace.origin)."""
    arg = display.arg_text(e["arg"])
    if device is not None and e["op"] not in (Ops.COPY.value, Ops.BUFFER.value):  # their args name it already
        arg = f"{arg} @ {device}" if arg else f"@ {device}"
    return GraphNode(id=nid, op=e["op"], dtype=e["dtype"], arg=arg, src=list(e["src"]),
                     shape=e["shape"], group=display.group_of(e["op"]), axis_type=display.axis_type_of(e),
                     color=display.colour_of(e),
                     origin=None if origin is None else NodeOrigin.model_validate(origin))


def _taking(names: list[str], counts: Counter[str]) -> list[str]:
    """The names that `counts` holds, in the order of `names`, each as often as counted."""
    left, out = Counter(counts), []
    for n in names:
        if left[n] > 0:
            left[n] -= 1
            out.append(n)
    return out


def step(st: StoredTrace, ci: int, pi: int, k: int) -> StepView:
    """The graph after the first k steps of a pass (k=0: its input) and what step k changed, keyed by node
    identity: the match's nodes that left, the replacement's that came, and the ancestors that hash-consing rebuilt
    over them (which are the same nodes to a reader, not removed and added)."""
    p, tr = _pass(st, ci, pi), st.trace
    root = step_root(st, ci, pi, k)
    with st.lock:
        order = tr.toposort(root)
        before = set(tr.toposort(p.graph_at(k - 1))) if k else set(order)
        renamed = p.renamed(k) if k else {}
        folded = p.folded()
    on = display.devices(order, tr.node)
    nodes = [_graph_node(nid, tr.node(nid), on.get(nid), tr.origin(nid)) for nid in order]
    if k == 0:
        return StepView(root=root, steps=len(p.steps), nodes=nodes, added=[], removed=[], rebuilt=[], rule=None,
                        match=None, replacement=None, changes=[], changed=0, folded=folded, summary=[])
    s = p.steps[k - 1]
    now = set(order)
    # a node that merged into one the graph already held is removed, not rebuilt
    rebuilt = [(o, n) for o, n in renamed.items() if o != s.match and n in now and o not in now
               and n not in before and _same_node(tr.node(o), tr.node(n))]
    old_rebuilt, new_rebuilt = {o for o, _ in rebuilt}, {n for _, n in rebuilt}
    added = [n for n in order if n not in before and n not in new_rebuilt]
    removed = before - now - old_rebuilt
    big = len(added) + len(removed) >= SUMMARY_FROM  # a whole-graph rewrite; a local one's diff says it well
    same, respelled = _aligned(tr, removed, added) if big else ([], [])
    if same:  # the nodes it built again in place are rebuilt, not a second copy of the kernel
        rebuilt += same
        gone, came = {o for o, _ in same}, {n for _, n in same}
        removed -= gone
        added = [n for n in added if n not in came]
    rule = tr.rules[s.rule]
    changes = _changes(tr, renamed.get(s.match), s.match, added, removed, rebuilt)
    return StepView(root=root, steps=len(p.steps), nodes=nodes, added=added, removed=sorted(removed),
                    rebuilt=rebuilt, rule=RuleInfo(location=rule.location, text=rule.text, time_ns=s.time_ns),
                    match=s.match, replacement=s.replacement, changes=changes,
                    changed=len(added) + len(removed) + len(rebuilt) - (changes[0].kind == "changed" if changes else 0),
                    folded=folded, summary=_summary(tr, respelled, removed, added, len(rebuilt)) if big else [])


def _aligned(tr: Trace, removed: set[str], added: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Which added node (`added` sources first) stands where a removed one stood: ([before, after] pairs of the
    same op, dtype, arg and tag over the same sources, once earlier pairs are taken as one node; pairs of sources
    that differ where the rest of their users agree, which the step re-spelled). A rule that returns the whole
    graph rewritten (hardware ids turns a Range into a Special) is then a few re-spelled nodes and their rebuilt
    ancestors, not every node removed and added (a second copy of the kernel)."""
    def key(e: display.Entry, src: list[str]) -> tuple[Any, ...]:
        return e["op"], e["dtype"], json.dumps(e["arg"], sort_keys=True), json.dumps(e["tag"]), tuple(src)

    index: dict[tuple[Any, ...], list[str]] = {}
    for o in sorted(removed):
        e = tr.node(o)
        for i in range(-1, len(e["src"])):  # -1: the node as it is; i: with source i left open
            index.setdefault(key(e, e["src"] if i < 0 else [*e["src"][:i], "*", *e["src"][i + 1:]]), []).append(o)
    back: dict[str, str] = {}  # added -> the removed node it stands for
    same: list[tuple[str, str]] = []
    respelled: dict[str, str] = {}
    for n in added:
        e = tr.node(n)
        src = [back.get(s, s) for s in e["src"]]
        for i in range(-1, len(src)):
            hits = index.get(key(e, src if i < 0 else [*src[:i], "*", *src[i + 1:]]), [])
            hit = next((o for o in hits if o not in back.values()), None)
            if hit is None:
                continue
            back[n] = hit
            same.append((hit, n))
            old = tr.node(hit)["src"][i] if i >= 0 else None
            if old is not None and old in removed and e["src"][i] not in back:
                respelled.setdefault(old, e["src"][i])
            break
    # a re-spelling is a node in another op or arg over the same sources (Range r0 → Special tidx0, both over
    # Const 8), not any two nodes that happened to stand in one place
    return same, [(o, n) for o, n in respelled.items()
                  if [back.get(x, x) for x in tr.node(n)["src"]] == tr.node(o)["src"]]


def _summary(tr: Trace, respelled: list[tuple[str, str]], removed: set[str], added: list[str],
             rebuilt: int) -> list[str]:
    """A step that changes many nodes said once: each re-spelling with how many nodes it made ("Range r0 THREAD →
    Special tidx0"), the kinds that left and came, net ("Store void ×1 → ×16"), and how many nodes were rebuilt over
    them; for a step that changed many nodes."""
    def short(nid: str) -> str:
        e = tr.node(nid)
        return f"{e['op']} {display.arg_text(e['arg'])}".strip()

    spelled = Counter((a, b) for o, n in respelled if (a := short(o)) != (b := short(n)))  # not a shape alone
    out = [f"{a} → {b}" + (f" ×{c}" if c > 1 else "") for (a, b), c in spelled.most_common(SUMMARY_LINES)]
    if len(spelled) > SUMMARY_LINES:
        out.append(f"and {len(spelled) - SUMMARY_LINES} more re-spellings")
    def kind(nid: str) -> str:
        e = tr.node(nid)
        return f"{e['op']} {display.props(e)}"

    gone, came = Counter(kind(n) for n in removed), Counter(kind(n) for n in added)
    out += _kinds_changed(gone, came)
    if rebuilt:
        out.append(f"{rebuilt} node{'s' if rebuilt != 1 else ''} rebuilt over {'it' if len(out) == 1 else 'them'}"
                   " (the same op and arg over new sources)")
    return out


def _kinds_changed(gone: Counter[str], came: Counter[str]) -> list[str]:
    """What a step did to the kinds of node it removed and added, net: the kinds that left for others ("Where
    float32(16) ×27 → Where float32 ×432": vectors split into lanes), then kinds on both sides whose count changed
    ("Add index(16) ×14 → ×17"). A kind removed and added as often is the same nodes made again over new sources:
    not said (both sides of a summary naming it read as a change)."""
    def ops(c: Counter[str]) -> str:
        named = ", ".join(f"{op} ×{k}" for op, k in c.most_common(SUMMARY_LINES)) or "nothing"
        return named + (f" and {len(c) - SUMMARY_LINES} more kinds" if len(c) > SUMMARY_LINES else "")

    left = Counter({k: n for k, n in gone.items() if k not in came})
    new = Counter({k: n for k, n in came.items() if k not in gone})
    out = [f"{ops(left)} → {ops(new)}"] if left or new else []
    both = sorted((k for k in gone if k in came and gone[k] != came[k]), key=lambda k: -abs(came[k] - gone[k]))
    out += [f"{k} ×{gone[k]} → ×{came[k]}" for k in both[:SUMMARY_LINES]]
    if len(both) > SUMMARY_LINES:
        out.append(f"and {len(both) - SUMMARY_LINES} more kinds whose count changed")
    if alike := sum(min(gone[k], came[k]) for k in gone if k in came):
        out.append(f"{alike} node{'s' if alike != 1 else ''} removed and added again as the same kinds")
    return out


def _same_node(a: display.Entry, b: display.Entry) -> bool:
    """Whether b is a rebuilt over new sources (the same op, arg and tag)."""
    return (a["op"], a["arg"], a["tag"]) == (b["op"], b["arg"], b["tag"])


def _changes(tr: Trace, became: str | None, match: str, added: list[str], removed: set[str],
             rebuilt: list[tuple[str, str]]) -> list[Change]:
    """A step's diff by node identity: the match replaced by a node of its op is one changed node; the other nodes
    that left or came, users first; then the rebuilt ancestors."""
    def text(n: str) -> str:
        return display.node_text(n, tr.node)

    gone = sorted(removed, key=lambda n: -len(tr.nodes_of(n)))  # users before their sources
    came = added[::-1]
    out: list[Change] = []
    if became is not None and match in removed and became in came and tr.node(match)["op"] == tr.node(became)["op"]:
        out.append(Change(kind="changed", id=became, before=match, text=text(became), before_text=text(match)))
        gone.remove(match)
        came.remove(became)
    out += [Change(kind="removed", id=n, before=None, text=text(n), before_text=None) for n in gone]
    out += [Change(kind="added", id=n, before=None, text=text(n), before_text=None) for n in came]
    out += [Change(kind="rebuilt", id=n, before=o, text=text(n), before_text=text(o)) for o, n in rebuilt[::-1]]
    return out[:MAX_CHANGES]


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
    first = _first_pass(c)
    return KernelView(name=c.name, device=_device(st, linear["src"]), source=str(source["arg"] or ""),
                      linear=display.linear_listing(list(linear["src"]), tr.node),
                      opts=[OptSpec(**o) for o in c.opts], axes=_axes_of(c),
                      work=work(tr, first.input) if first is not None else Work(flops=None, bytes=None))


def work(tr: Trace, root: str) -> Work:
    """The work of a kernel graph as scheduled (Tensor-level, every value with its shape): one flop per element of
    each arithmetic op and per element reduced (index math left out), and the bytes of its buffers."""
    flops: int | None = 0
    nbytes: int | None = 0
    for nid in tr.nodes_of(root):
        e = tr.node(nid)
        op = Ops(e["op"])
        if op in GroupOp.Elementwise and e["dtype"] != "index" and flops is not None:
            flops = _add(flops, _elements(e["shape"]))
        elif op is Ops.REDUCE and flops is not None:
            flops = _add(flops, _elements(tr.node(e["src"][0])["shape"]))
        elif op is Ops.PARAM and nbytes is not None:
            try:
                size = dtypes.from_name(e["dtype"]).itemsize
            except DTypeError:
                size = None
            n = _elements(e["shape"])
            nbytes = _add(nbytes, None if size is None or n is None else n * size)
    return Work(flops=flops, bytes=nbytes)


def _elements(shape: list[int | str] | None) -> int | None:
    """How many elements a shape holds; None when it is not known or symbolic."""
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return math.prod(int(d) for d in shape)


def _add(total: int, n: int | None) -> int | None:
    return None if n is None else total + n


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
    return next((d for nid in nodes if (d := _param_device(st.trace.node(nid))) is not None), st.device)


def _param_device(e: display.Entry) -> str | None:
    """The device a Param node's entry names, if it is one that names a device."""
    arg = e["arg"]
    param = arg.get("ParamArg") if isinstance(arg, dict) else None
    return param["device"] if isinstance(param, dict) and isinstance(param.get("device"), str) else None
