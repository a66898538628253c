"""Kernel optimizations: SPEC's OptOps applied to a kernel's ranges, each with its legality checked.

A kernel's axes are its Ranges in loop order. The order is kept in the ranges themselves: after every opt the
ranges are renumbered so that `idx` runs outer to inner, grouped by AxisType priority (GLOBAL, THREAD, LOCAL,
LOOP, GROUP_REDUCE, REDUCE, UPCAST, UNROLL), and every End chain and Reduce lists its ranges in that order. So
an axis number means the same thing as the position of its letter in the kernel's name (`r_g16_l4_R32_u4`).
A split by the axis's whole size changes the axis's type.

An opt rewrites the kernel graph: Split replaces a range r by `outer*k + inner` (or `inner*(n/k) + outer` when
`top`), Padto by a longer range clamped for indexing and masked (the identity) inside reductions, Swap
exchanges two axes' places, Nolocals forbids LOCAL and GROUP_REDUCE from then on. LOCAL and GROUP_REDUCE axes
are the work-items of a work-group: together they count against the target's local dimensions and work-items
per group, and group reductions against its local memory. TC (tensor cores, codegen/tc.py) splits a matmul-like
kernel's M, N and K axes into the WARP, UPCAST and UNROLL axes of a Wmma; it must come first, its WARP axes are one
local dimension of 32 work-items, and its axes keep their places (no Swap moves them, no group reduction splits
its reduction). What cannot be done raises `KernelOptError` saying why.
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass, replace
from typing import Any

from uopviz.codegen.expand import EXPANDED, lane_axes
from uopviz.codegen.group_reduce import LANES, free_by_node, local_memory
from uopviz.codegen.tc import Plan, TensorCoreError, fields, plan, tc_axes
from uopviz.schedule.rangeify import identity
from uopviz.target import Target
from uopviz.uop.ops import AxisType, Ops, TensorCore, UOp


class KernelOptError(ValueError):
    """An opt that is illegal for this kernel on this target; the message says why."""


class OptOps(enum.Enum):
    SPLIT = "SPLIT"
    PADTO = "PADTO"
    SWAP = "SWAP"
    NOLOCALS = "NOLOCALS"
    TC = "TC"


@dataclass(frozen=True)
class Opt:
    """(op, axis, arg) as in SPEC: Split's arg is (factor, target AxisType, top), Padto's the multiple, Swap's
    the other axis; Nolocals takes neither. TC's axis is the reduce axis and its arg (tc, opt, mode): tc the index of
    the target's tensor core (-1: the first that fits), opt 1 to pad M, N and K to the tile (0: they must divide),
    mode which pair of output axes become M and N (0: the innermost pair, see codegen/tc.py's `plan`)."""

    op: OptOps
    axis: int | None = None
    arg: Any = None

    def to_json(self) -> dict[str, Any]:
        arg = self.arg
        if self.op is OptOps.SPLIT:
            arg = [arg[0], arg[1].name, bool(arg[2])]
        return {"op": self.op.value, "axis": self.axis, "arg": arg}

    @staticmethod
    def from_json(d: Any) -> Opt:
        """The Opt a JSON object describes; KernelOptError if it is malformed."""
        if not isinstance(d, dict) or "op" not in d:
            raise KernelOptError(f"an opt is an object with op, axis and arg, got {d!r}")
        try:
            op = OptOps(str(d["op"]).upper())
        except ValueError:
            raise KernelOptError(f"unknown OptOp {d['op']!r}; one of {[o.value for o in OptOps]}") from None
        axis, arg = d.get("axis"), d.get("arg")
        if op is OptOps.TC and isinstance(arg, list):
            arg = tuple(arg)
        if op is OptOps.SPLIT:
            if not (isinstance(arg, (list, tuple)) and len(arg) in (2, 3)):
                raise KernelOptError(f"SPLIT's arg is [factor, axis type, top], got {arg!r}")
            try:
                target = AxisType[str(arg[1]).upper()]
            except KeyError:
                raise KernelOptError(f"unknown AxisType {arg[1]!r}; one of {[t.name for t in AxisType]}") from None
            arg = (arg[0], target, bool(arg[2]) if len(arg) == 3 else False)
        opt = Opt(op, axis, arg)
        opt.check_types()
        return opt

    def check_types(self) -> None:
        """Raise KernelOptError unless axis and arg have the types the op takes."""
        def integer(x: Any) -> bool:
            return isinstance(x, int) and not isinstance(x, bool)
        if self.op is OptOps.NOLOCALS:
            if self.axis is not None or self.arg is not None:
                raise KernelOptError("NOLOCALS takes no axis and no arg")
            return
        if not integer(self.axis):
            raise KernelOptError(f"{self.op.value} needs an integer axis, got {self.axis!r}")
        if self.op is OptOps.SPLIT and not (integer(self.arg[0]) and isinstance(self.arg[1], AxisType)):
            raise KernelOptError(f"SPLIT's arg is (factor, AxisType, top), got {self.arg!r}")
        if self.op in (OptOps.PADTO, OptOps.SWAP) and not integer(self.arg):
            raise KernelOptError(f"{self.op.value} needs an integer arg, got {self.arg!r}")
        if self.op is OptOps.TC and not (isinstance(self.arg, tuple) and len(self.arg) == 3
                                         and all(integer(x) for x in self.arg)):
            raise KernelOptError(f"TC's arg is (tc, opt, mode), three integers, got {self.arg!r}")

    def __str__(self) -> str:
        if self.op is OptOps.SPLIT:
            k, t, top = self.arg
            return f"split axis {self.axis} by {k} → {t.name}{' (top)' if top else ''}"
        if self.op is OptOps.PADTO:
            return f"pad axis {self.axis} to a multiple of {self.arg}"
        if self.op is OptOps.SWAP:
            return f"swap axes {self.axis} and {self.arg}"
        if self.op is OptOps.TC:
            return f"tensor cores on axis {self.axis} (tc {self.arg[0]}, opt {self.arg[1]}, mode {self.arg[2]})"
        return self.op.value.lower()


# SPEC's "Split from" column, plus plain tiling (a LOOP from a LOOP, a REDUCE from a REDUCE). THREAD also splits
# from LOOP: the CPU has no GLOBAL axes, and its output loops are what threads share.
SPLIT_FROM: dict[AxisType, frozenset[AxisType]] = {
    AxisType.LOCAL: frozenset({AxisType.GLOBAL, AxisType.LOOP}),
    AxisType.THREAD: frozenset({AxisType.GLOBAL, AxisType.LOOP}),
    AxisType.UPCAST: frozenset({AxisType.GLOBAL, AxisType.LOCAL, AxisType.LOOP}),
    AxisType.UNROLL: frozenset({AxisType.REDUCE, AxisType.GROUP_REDUCE}),
    AxisType.GROUP_REDUCE: frozenset({AxisType.REDUCE}),
    AxisType.LOOP: frozenset({AxisType.LOOP}),
    AxisType.REDUCE: frozenset({AxisType.REDUCE}),
}
REDUCING = frozenset({AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL})
MAX_THREADS = 256  # calls of a CPU kernel per run, all its THREAD axes together (the cores share them)
MAX_EXPANDED = 32  # UPCAST x UNROLL copies of the kernel body (a vector counts once), to bound code size


@dataclass(frozen=True)
class Scheduler:
    """A kernel (after Rangeify) and the opts applied to it; `apply_opt` returns a new Scheduler. `tc` is the
    tensor core a TC opt chose, which the `tensor cores` pass computes the kernel's reduction with."""

    ast: UOp
    target: Target
    opts: tuple[Opt, ...] = ()
    nolocals: bool = False
    tc: TensorCore | None = None

    @staticmethod
    def of(ast: UOp, target: Target) -> Scheduler:
        """Scheduler over a kernel, its ranges put in canonical order (idx order, grouped by AxisType)."""
        return _ordered(ast, target)

    @property
    def axes(self) -> list[UOp]:
        return sorted(_ranges(self.ast), key=lambda r: r.arg.idx)

    def shape(self) -> list[tuple[AxisType, int | None]]:
        """(AxisType, size) of each axis; size None where it is symbolic."""
        return [(r.arg.type, _size(r)) for r in self.axes]

    def apply_opt(self, opt: Opt) -> Scheduler:
        """This kernel with opt applied (KernelOptError where it does not apply), kept for the last KEPT made: the
        heuristic applies a kernel's opts to choose them, and its lowering's Optimize pass applies them again (3%
        of a cold GPT step's lowering)."""
        return _applied(self, opt)

    def _apply_opt(self, opt: Opt) -> Scheduler:
        opt.check_types()
        if opt.op is OptOps.NOLOCALS:
            used = [i for i, (t, _) in enumerate(self.shape()) if t in (AxisType.LOCAL, AxisType.GROUP_REDUCE,
                                                                        AxisType.WARP)]
            if used:
                raise KernelOptError(f"nolocals: axis {used[0]} is already {self.shape()[used[0]][0].name}")
            if self.nolocals:
                raise KernelOptError("nolocals: already applied")
            return replace(self, opts=(*self.opts, opt), nolocals=True)
        axes, i = self.axes, opt.axis
        assert i is not None  # check_types: every op but NOLOCALS has an integer axis
        if not 0 <= i < len(axes):
            raise KernelOptError(f"{opt.op.value.lower()} of axis {i}: the kernel has {len(axes)} axes"
                                 + (f" (0..{len(axes) - 1})" if axes else ""))
        if opt.op is OptOps.TC:
            return self._tc(opt, i)
        if opt.op is OptOps.SPLIT:
            ast = self._split(axes, i, *opt.arg)
        elif opt.op is OptOps.PADTO:
            ast = self._padto(axes, i, opt.arg)
        else:
            ast = self._swap(axes, i, opt.arg)
        return replace(self, ast=ast, opts=(*self.opts, opt))

    # ---- the opts, each returning the new kernel graph ----
    def _split(self, axes: list[UOp], i: int, k: int, target: AxisType, top: bool) -> UOp:
        r = axes[i]
        n, t = _size(r), r.arg.type
        what = f"split of axis {i} ({t.name}, size {'symbolic' if n is None else n}) by {k}"
        if n is None:
            raise KernelOptError(f"{what}: only constant sizes split")
        if target not in SPLIT_FROM:
            raise KernelOptError(f"{what}: {target.name} axes are not made by splitting")
        if t not in SPLIT_FROM[target]:
            froms = ", ".join(sorted(x.name for x in SPLIT_FROM[target]))
            raise KernelOptError(f"{what}: a {target.name} axis splits from {froms}, not {t.name}")
        if k < 2 or k > n:
            raise KernelOptError(f"{what}: the factor must be in 2..{n}")
        if n % k:
            raise KernelOptError(f"{what}: {n} is not divisible by {k}")
        if k == n and target is t:
            raise KernelOptError(f"{what}: a {t.name} part of the whole size changes nothing")
        self._check_target(what, target, k)
        descs: list[tuple[AxisType, UOp | int]] = [(x.arg.type, x.src[0]) for x in axes]
        if k == n:  # the whole axis changes type
            descs[i] = (target, n)
            new = _place(descs)
            return self._fits(what, _rebuild(self.ast, {x: ([y], y) for x, y in zip(axes, new)}))
        descs[i:i + 1] = [(target, k), (t, n // k)] if top else [(t, n // k), (target, k)]
        new = _place(descs)
        outer, inner = new[i], new[i + 1]
        mapping = {x: ([y], y) for x, y in zip(axes[:i] + axes[i + 1:], new[:i] + new[i + 2:])}
        mapping[r] = ([outer, inner], outer * inner.src[0].arg.value + inner)
        return self._fits(what, _rebuild(self.ast, mapping))

    def _fits(self, what: str, ast: UOp) -> UOp:
        """ast, unless its group reductions need more local memory than the target has, or Expand would copy some
        of its code more than MAX_EXPANDED times."""
        used = local_memory(ast)
        if used > self.target.local_memory:
            raise KernelOptError(f"{what}: the group reductions would take {used} bytes of local memory, "
                                 f"{self.target.device} has {self.target.local_memory}")
        mma = frozenset(tc_axes(sorted(_ranges(ast), key=lambda r: r.arg.idx), self.tc).values()) \
            if self.tc is not None else frozenset()
        if (copies := expanded_copies(ast, bool(self.target.vectors), mma)) > MAX_EXPANDED:
            raise KernelOptError(f"{what}: {copies} copies of the kernel body (the limit is {MAX_EXPANDED})")
        return ast

    def _padto(self, axes: list[UOp], i: int, m: int) -> UOp:
        r = axes[i]
        n = _size(r)
        what = f"padto of axis {i} ({r.arg.type.name}, size {'symbolic' if n is None else n}) to a multiple of {m}"
        if n is None:
            raise KernelOptError(f"{what}: only constant sizes pad")
        if m < 2:
            raise KernelOptError(f"{what}: the multiple must be at least 2")
        if r.arg.type not in (AxisType.GLOBAL, AxisType.LOOP, AxisType.REDUCE):
            raise KernelOptError(f"{what}: pad a GLOBAL, LOOP or REDUCE axis (before splitting it)")
        wide_n = math.ceil(n / m) * m
        if wide_n == n:
            raise KernelOptError(f"{what}: {n} is already a multiple of {m}")
        if wide_n > 2 * n:
            raise KernelOptError(f"{what}: padding {n} to {wide_n} would more than double the work")
        wide = UOp.range(wide_n, r.arg.idx, r.arg.type)
        mapping = {x: ([x], x) for x in axes if x is not r}
        mapping[r] = ([wide], (wide < n).where(wide, n - 1))  # clamped for indexing; reductions are masked
        return _rebuild(self.ast, mapping, masks={wide: n})

    def _swap(self, axes: list[UOp], i: int, j: int) -> UOp:
        if not 0 <= j < len(axes) or i == j:
            raise KernelOptError(f"swap of axis {i} with axis {j}: the other axis must be another of "
                                 f"0..{len(axes) - 1}")
        a, b = axes[i], axes[j]
        if self.tc is not None and {a, b} & set(tc_axes(axes, self.tc).values()):
            raise KernelOptError(f"swap of axis {i} with axis {j}: the tensor core's WARP, UPCAST and UNROLL axes "
                                 "keep their places (the Wmma's lanes and fragments are laid out by them)")
        if a.arg.type is not b.arg.type:
            raise KernelOptError(f"swap of axis {i} ({a.arg.type.name}) with axis {j} ({b.arg.type.name}): only "
                                 "axes of one AxisType trade places")
        order = list(axes)
        order[i], order[j] = b, a
        new = _place([(x.arg.type, x.src[0]) for x in order])
        return _rebuild(self.ast, {x: ([y], y) for x, y in zip(order, new)})

    def _check_target(self, what: str, target: AxisType, k: int) -> None:
        t, shape = self.target, self.shape()
        if target in (AxisType.LOCAL, AxisType.GROUP_REDUCE):
            if not t.local_dims:
                raise KernelOptError(f"{what}: the {t.device} target has no work-groups or local memory")
            if self.nolocals:
                raise KernelOptError(f"{what}: nolocals was applied")
            if target is AxisType.GROUP_REDUCE and self.tc is not None:
                raise KernelOptError(f"{what}: a tensor-core kernel's reduction stays in its warp's Wmma")
            warp = math.prod(s or 1 for x, s in shape if x is AxisType.WARP)  # the WARP axes: one dimension, lidx0
            if sum(x in LANES for x, _ in shape) + (warp > 1) >= t.local_dims:
                raise KernelOptError(f"{what}: {t.device} has {t.local_dims} local dimensions")
            local = math.prod(s or 1 for x, s in shape if x in LANES) * warp * k
            if local > t.max_local:
                raise KernelOptError(f"{what}: {local} work-items per group exceed {t.device}'s {t.max_local}")
        if target is AxisType.THREAD:
            if not t.threads:
                raise KernelOptError(f"{what}: the {t.device} target has no threads")
            calls = math.prod(s or 1 for x, s in shape if x is AxisType.THREAD) * k
            if calls > MAX_THREADS:
                raise KernelOptError(f"{what}: {calls} thread indices exceed {MAX_THREADS}")

    def _tc(self, opt: Opt, k: int) -> Scheduler:
        """SPEC's TC on reduce axis k (opt's axis): the kernel's M, N and K axes split into the tensor core's WARP,
        UPCAST and UNROLL axes (padded to the tile first with opt 1); the `tensor cores` pass writes its reduction
        as Wmma."""
        which, pad, mode = opt.arg
        t, axes = self.target, self.axes
        what = f"tc on axis {k}"
        if not t.tensor_cores:
            raise KernelOptError(f"{what}: the {t.device} target has no tensor cores")
        if self.opts:
            raise KernelOptError(f"{what}: TC must be the first opt (SPEC), after {self.opts[0]}")
        if not 0 <= k < len(axes):
            raise KernelOptError(f"{what}: the kernel has {len(axes)} axes")
        if not -1 <= which < len(t.tensor_cores):
            raise KernelOptError(f"{what}: tc {which} is not -1 or a tensor core of {t.device} "
                                 f"(0..{len(t.tensor_cores) - 1})")
        if pad not in (0, 1) or mode < 0:
            raise KernelOptError(f"{what}: opt is 0 or 1 (pad to the tile) and mode a pair of output axes (0, 1, "
                                 f"...), got opt {pad} and mode {mode}")
        try:
            plans = plan(self.ast, axes, k, t.tensor_cores, which, bool(pad), mode)
        except TensorCoreError as e:
            raise KernelOptError(f"{what}: {e}") from None
        warp = 1 << len(plans[0].tc.c[0])
        if not t.local_dims or warp > t.max_local:
            raise KernelOptError(f"{what}: a warp of {warp} lanes does not fit {t.device}'s work-groups")
        errors = []
        for p in plans:  # the first config whose padding (if any) is legal
            try:
                return self._tc_split(opt, p)
            except KernelOptError as e:
                errors.append(f"{p.tc.name}: {e}")
        raise KernelOptError(f"{what}: {'; '.join(errors)}")

    def _tc_split(self, opt: Opt, p: Plan) -> Scheduler:
        """The TC's axes for plan p, the M, N and K axes padded to the tile first where they need it."""
        what, axes = f"tc on axis {opt.axis}", self.axes
        tiles = {p.m: p.tc.dims[0], p.n: p.tc.dims[1], p.k: p.tc.dims[2]}
        s = self
        for i, tile in tiles.items():
            if _const_size(axes[i]) % tile:
                s = replace(s, ast=s._padto(s.axes, i, tile))
        axes = s.axes
        sizes = {i: _const_size(axes[i]) for i in tiles}
        kept = [i for i in range(len(axes)) if i not in tiles or sizes[i] > tiles[i]]  # the axes left outside
        descs: list[tuple[AxisType, UOp | int]] = [(axes[i].arg.type, sizes[i] // tiles[i] if i in tiles
                                                    else axes[i].src[0]) for i in kept]
        mine = fields(p.tc)
        new = _place(descs + [(f.type, f.size) for f in mine])
        outer = dict(zip(kept, new))
        made = dict(zip(mine, new[len(descs):]))
        mapping: dict[UOp, tuple[list[UOp], UOp]] = {x: ([outer[i]], outer[i]) for i, x in enumerate(axes)
                                                     if i not in tiles}
        for i, dim in ((p.m, "m"), (p.n, "n"), (p.k, "k")):
            parts = [(r, 1 << f.lo) for f, r in made.items() if f.dim == dim]
            expr = outer[i] * tiles[i] if i in outer else None
            for r, scale in parts:
                term = r * scale if scale > 1 else r
                expr = term if expr is None else expr + term
            assert expr is not None  # every tile dimension is at least 2, so the config has fields along it
            mapping[axes[i]] = ([outer[i]] if i in outer else []) + [r for r, _ in parts], expr
        s = replace(s, tc=p.tc)  # so that _fits counts the tensor core's own axes as one Wmma
        return replace(s, ast=s._fits(what, _rebuild(s.ast, mapping)), opts=(*self.opts, opt))


def expanded_copies(ast: UOp, vectors: bool, mma: frozenset[UOp] = frozenset()) -> int:
    """How many copies of its code Expand makes for the value copied most: the product of the UPCAST and UNROLL
    ranges it varies with, a lane axis counting once where the target has vectors, and the tensor core's own
    axes (`mma`) not at all, since one Wmma computes them."""
    skip = (lane_axes(ast) if vectors else frozenset()) | mma
    copies = 1
    for fs in free_by_node(ast).values():
        n = math.prod(_size(r) or 1 for r in fs if r.arg.type in EXPANDED and r not in skip)
        copies = max(copies, n)
    return copies


def _ranges(ast: UOp) -> list[UOp]:
    return [u for u in ast.toposort() if u.op is Ops.RANGE]


def _size(r: UOp) -> int | None:
    return r.src[0].arg.value if r.src[0].op is Ops.CONST else None


def _const_size(r: UOp) -> int:
    """The size of one of a TC's M, N and K axes, which `plan` only chooses among ranges of constant size."""
    n = _size(r)
    assert n is not None, f"range {r.arg.idx} of a TC plan has a symbolic size"
    return n


def _place(descs: list[tuple[AxisType, UOp | int]]) -> list[UOp]:
    """New ranges for (type, bound) axes listed outer to inner: numbered in loop order, which groups axes by
    AxisType priority and keeps the listed order within a type."""
    order = sorted(range(len(descs)), key=lambda j: descs[j][0].priority)
    pos = {j: p for p, j in enumerate(order)}
    return [UOp.range(bound, pos[j], t) for j, (t, bound) in enumerate(descs)]


def _rebuild(ast: UOp, mapping: dict[UOp, tuple[list[UOp], UOp]], masks: dict[UOp, int] | None = None) -> UOp:
    """The kernel with each old range replaced: as an index by its expression, in End chains and Reduces by its
    new ranges, which are listed outer to inner. A Reduce over a range in `masks` (range -> true size) reduces
    the identity where the range is past the true size."""
    masks = masks or {}
    out: dict[UOp, UOp] = {}

    def new_ranges(rs: list[UOp]) -> list[UOp]:
        return sorted((y for x in rs for y in mapping[x][0]), key=lambda y: y.arg.idx)

    for u in ast.toposort():
        if u.op is Ops.RANGE:
            out[u] = mapping[u][1]
        elif u.op is Ops.END:
            chain, body = [], u
            while body.op is Ops.END:
                chain.append(body.src[1])
                body = body.src[0]
            out[u] = out[body].end(*new_ranges(chain))
        elif u.op is Ops.REDUCE:
            rs = new_ranges(list(u.src[1:]))
            val = out[u.src[0]]
            valid = [r < masks[r] for r in rs if r in masks]
            if valid:
                cond = valid[0]
                for c in valid[1:]:
                    cond = cond & c
                val = cond.where(val, UOp.const(u.dtype, identity(u.arg.op, u.dtype)))
            out[u] = UOp(Ops.REDUCE, (val, *rs), u.arg)
        else:
            src = tuple(out[s] for s in u.src)
            out[u] = u if src == u.src else u.replace(src=src)
    return out[ast]


KEPT = 256
"""Schedulers kept by Scheduler.of and apply_opt (each a pure function of its arguments): a kernel's heuristic and
its lowering follow each other (realize's keys are made as each kernel's turn to lower comes), and a BEAM search's
thousands of candidates, each holding its own graph, are not all kept."""


@functools.lru_cache(maxsize=KEPT)
def _ordered(ast: UOp, target: Target) -> Scheduler:
    axes = sorted(_ranges(ast), key=lambda r: r.arg.idx)
    new = _place([(r.arg.type, r.src[0]) for r in axes])
    return Scheduler(_rebuild(ast, {r: ([x], x) for r, x in zip(axes, new)}), target)


@functools.lru_cache(maxsize=KEPT)
def _applied(sched: Scheduler, opt: Opt) -> Scheduler:
    return sched._apply_opt(opt)
