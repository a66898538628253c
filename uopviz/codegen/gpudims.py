"""Hardware thread ids for targets that have them (OpenCL): output axes become GLOBAL, then Specials.

Without opts, the innermost output axes (up to the target's number of global dimensions) run as the global
work grid, gidx0 the innermost so neighbouring work-items touch neighbouring memory; outer ones stay loops.
"""

from __future__ import annotations

from uopviz.runtime.device import Target
from uopviz.uop.ops import AxisType, Ops, UOp
from uopviz.uop.pattern import PatternMatcher, UPat, graph_rewrite


def _output_ranges(k: UOp) -> list[UOp]:
    return sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg.type is AxisType.LOOP),
                  key=lambda r: r.arg.idx)


def global_axes(k: UOp, target: Target) -> UOp:
    """The innermost LOOP output ranges with constant bounds as GLOBAL (none on targets without ids)."""
    if not target.global_dims:
        return k
    loops = [r for r in _output_ranges(k) if r.src[0].op is Ops.CONST]
    chosen = loops[-target.global_dims:]
    return k.substitute({r: UOp.range(r.src[0], r.arg.idx, AxisType.GLOBAL) for r in chosen})


_drop_ends = PatternMatcher([(UPat(Ops.END, src=(UPat.var("body"), UPat(Ops.SPECIAL))), lambda body: body)],
                            name="close hardware ids")


def specials(k: UOp) -> UOp:
    """GLOBAL ranges as Special gidx0.. (innermost first); their Ends go, as the grid runs every index."""
    glob = sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg.type is AxisType.GLOBAL),
                  key=lambda r: -r.arg.idx)
    if not glob:
        return k
    k = k.substitute({r: UOp.special(r.src[0], f"gidx{i}") for i, r in enumerate(glob)})
    return graph_rewrite(k, _drop_ends)


to_specials = PatternMatcher([(UPat(Ops.SINK, name="k"), lambda k: specials(k) if _has_global(k) else None)],
                             name="hardware ids")


def _has_global(k: UOp) -> bool:
    return any(u.op is Ops.RANGE and u.arg.type is AxisType.GLOBAL for u in k.toposort())
