"""Hardware thread ids for targets that have them (OpenCL): output axes become GLOBAL, then Specials.

Before opts, the innermost output axes (up to the target's number of global dimensions) become the global
work grid, gidx0 the innermost so neighbouring work-items touch neighbouring memory; outer ones stay loops.
LOCAL and GROUP_REDUCE axes (made by opts) become the work-group's lidx ids; a kernel with them launches
work-groups, and its gidx ids then number the groups. The WARP axes of a tensor core (codegen/tc.py) are one
dimension, lidx0, the lane id: the innermost WARP axis its lowest digits, so 32 consecutive work-items are one
warp; LOCAL axes then start at lidx1. A CPU kernel's THREAD axes are digits of tidx0, an argument of the kernel
function, which the runtime calls once per index, concurrently: the innermost THREAD axis its lowest digit, as with
the WARP axes, so a kernel may split two of its loops over the cores (gemm 1000's column strips and row blocks)
and the runtime still hands out one index.
"""

from __future__ import annotations

import math

from uopviz.target import Target
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
_drop_digit_ends = PatternMatcher([(UPat(Ops.END, src=(UPat.var("body"), UPat(Ops.RANGE, name="r"))),
                                    lambda body, r: body if r.arg.type in (AxisType.WARP, AxisType.THREAD) else None)],
                                  name="close id digits")


def _digits(ranges: list[UOp], flat: UOp) -> dict[UOp, UOp]:
    """Each of ranges (innermost first) as a digit of the one id `flat` that counts them all: the innermost its
    lowest (no modulo on the outermost, which the id's bound already keeps in range)."""
    ids, stride = {}, 1
    for r in ranges:
        n = int(r.src[0].arg.value)
        digit = flat // stride if stride > 1 else flat
        ids[r] = digit % n if stride * n < flat.src[0].arg.value else digit
        stride *= n
    return ids


def specials(k: UOp) -> UOp:
    """GLOBAL ranges as Special gidx0.., LOCAL and GROUP_REDUCE ones (the work-items of a group) as lidx0..
    (innermost first), WARP ones as digits of lidx0 (then LOCAL starts at lidx1), THREAD ones as digits of tidx0;
    their Ends go, as the grid (or the CPU's pool) runs every index."""
    ids: dict[UOp, UOp] = {}
    warps, threads = ([u for u in k.toposort() if u.op is Ops.RANGE and u.arg.type is t] for t in
                      (AxisType.WARP, AxisType.THREAD))
    if warps or threads:
        k = graph_rewrite(k, _drop_digit_ends)
    for rs, name in ((warps, "lidx0"), (threads, "tidx0")):
        if rs:
            rs = sorted(rs, key=lambda r: -r.arg.idx)
            ids.update(_digits(rs, UOp.special(math.prod(int(r.src[0].arg.value) for r in rs), name)))
    for ts, prefix in (((AxisType.GLOBAL,), "gidx"), ((AxisType.LOCAL, AxisType.GROUP_REDUCE), "lidx")):
        rs = sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg.type in ts), key=lambda r: -r.arg.idx)
        first = 1 if warps and prefix == "lidx" else 0
        ids.update({r: UOp.special(r.src[0], f"{prefix}{i + first}") for i, r in enumerate(rs)})
    return graph_rewrite(k.substitute(ids), _drop_ends)


to_specials = PatternMatcher([(UPat(Ops.SINK, name="k"), lambda k: specials(k) if _has_ids(k) else None)],
                             name="hardware ids")


def _has_ids(k: UOp) -> bool:
    return any(u.op is Ops.RANGE and u.arg.type in (AxisType.GLOBAL, AxisType.LOCAL, AxisType.GROUP_REDUCE,
                                                    AxisType.WARP, AxisType.THREAD)
               for u in k.toposort())


def threads(linear: UOp) -> int:
    """How many calls of a CPU kernel cover its THREAD axis (1 without one)."""
    return next((int(x.src[0].arg.value) for x in linear.src if x.op is Ops.SPECIAL and x.arg == "tidx0"), 1)


def launch_dims(linear: UOp) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(global size in work-items, local size) per dimension for a kernel's ids; (None, None) without ids."""
    def sizes(prefix: str) -> list[int]:
        sp = sorted((x for x in linear.src if x.op is Ops.SPECIAL and x.arg.startswith(prefix)), key=lambda x: x.arg)
        return [int(x.src[0].arg.value) for x in sp]
    groups, lanes = sizes("gidx"), sizes("lidx")
    if not lanes:
        return (tuple(groups) or None), None
    dims = max(len(groups), len(lanes))
    lanes += [1] * (dims - len(lanes))
    groups += [1] * (dims - len(groups))
    return tuple(g * lane for g, lane in zip(groups, lanes)), tuple(lanes)
