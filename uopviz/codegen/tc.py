"""Tensor cores: the warp-level matrix multiply-accumulates a target has, the axes the TC opt splits a matmul-like
kernel into, and the pass that turns that kernel's reduction into Wmma.

A `TensorCore` (uop/ops.py) says, per operand, which coordinate bit every bit of a lane id and of an element's
place in the lane's fragment is. The TC opt splits the kernel's M, N and K axes by the config's tile along those
bits: the bits C's layout takes from the lane id become WARP axes (the warp's lanes), the bits it takes from the
element index UPCAST axes, and K becomes one UNROLL axis; each axis is a run of consecutive bits of one dimension
whose sources are consecutive too (m16n8k16 makes `w8_w4`, `u2_u2` and `r16`). In that output view every lane still
computes its own C elements. The `tensor cores` pass then writes the reduction as the warp computes it: operand A's
fragment element e is the A expression with its M and K axes replaced by what A's layout says they are for lane
(the WARP axes) and element e (constants), B's likewise, and the reduction becomes lane e of
`Reduce(Wmma(A fragment, B fragment, 0))`, e read from the UPCAST axes as C's layout says. Expand copies those
UPCAST axes as it copies any, and `wmma_accumulate` folds the accumulator's add into the Wmma's C operand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from uopviz.codegen.group_reduce import free_ranges
from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import AxisType, Ops, TensorCore, UOp
from uopviz.uop.pattern import PatternMatcher, UPat

Layout = tuple[tuple[str, ...], tuple[str, ...]]


class TensorCoreError(ValueError):
    """A kernel the TC opt cannot apply to (the message says why)."""


def _bit(name: str) -> tuple[str, int]:
    return name[0], int(name[1:])


def coordinates(layout: Layout, lane: int, element: int) -> dict[str, int]:
    """The matrix coordinates ({"m": row, "k": col} for A) of a lane's fragment element under a layout."""
    out: dict[str, int] = {}
    for value, names in ((lane, layout[0]), (element, layout[1])):
        for j, name in enumerate(names):
            dim, b = _bit(name)
            out[dim] = out.get(dim, 0) | (((value >> j) & 1) << b)
    return out


def elements(layout: Layout) -> int:
    """How many elements of the operand each lane holds."""
    return 1 << len(layout[1])


def threads(tc: TensorCore) -> int:
    """The lanes that compute one Wmma together (a warp)."""
    return 1 << len(tc.c[0])


def _check(tc: TensorCore) -> TensorCore:
    """tc, if each layout names every coordinate bit of its operand's matrix exactly once."""
    m, n, k = (int(math.log2(d)) for d in tc.dims)
    for layout, dims in ((tc.a, {"m": m, "k": k}), (tc.b, {"k": k, "n": n}), (tc.c, {"m": m, "n": n})):
        want = sorted(f"{d}{b}" for d, bits in dims.items() for b in range(bits))
        if sorted(layout[0] + layout[1]) != want or len(layout[0]) != len(tc.c[0]):
            raise ValueError(f"{tc.name}: layout {layout} does not name the bits {want} once each")
    return tc


def _mma_sync(shape: tuple[int, int, int], dt: DType) -> TensorCore:
    """PTX's mma.sync.aligned.m16n8k{8,16}.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (sm_80 and later): groupID =
    lane >> 2 picks rows of A and C and columns of B, the lane's place in its group of four picks columns of A and
    C and rows of B (PTX ISA, "Matrix Fragments for mma.m16n8k8" and "for mma.m16n8k16 with floating point type")."""
    k16 = shape[2] == 16
    return _check(TensorCore(f"m{shape[0]}n{shape[1]}k{shape[2]}", shape, dt, dtypes.float32,
                             a=(("k1", "k2", "m0", "m1", "m2"), ("k0", "m3", "k3") if k16 else ("k0", "m3")),
                             b=(("k1", "k2", "n0", "n1", "n2"), ("k0", "k3") if k16 else ("k0",)),
                             c=(("n1", "n2", "m0", "m1", "m2"), ("n0", "m3"))))


MMA_SYNC: tuple[TensorCore, ...] = tuple(_mma_sync(shape, dt) for shape in ((16, 8, 16), (16, 8, 8))
                                         for dt in (dtypes.float16, dtypes.bfloat16))
"""The tensor cores of NVIDIA GPUs from sm_80 (Ampere) on, larger K first: half and bfloat16 in, float32 out."""


# ---- the TC opt's axes ----
@dataclass(frozen=True)
class Field:
    """An axis the TC opt makes: bits [lo, lo + bits) of dimension `dim` ("m", "n" or "k"), taken (for WARP and
    UPCAST axes) from bits [at, at + bits) of C's lane id or element index."""

    type: AxisType
    dim: str
    lo: int
    bits: int
    at: int = 0

    @property
    def size(self) -> int:
        return 1 << self.bits


def _runs(names: tuple[str, ...], kind: AxisType) -> list[Field]:
    """C's lane or element bits as runs of consecutive bits of one dimension."""
    out: list[Field] = []
    for j, name in enumerate(names):
        dim, b = _bit(name)
        last = out[-1] if out else None
        if last is not None and last.dim == dim and last.lo + last.bits == b:
            out[-1] = Field(kind, dim, last.lo, last.bits + 1, last.at)
        else:
            out.append(Field(kind, dim, b, 1, j))
    return out


def fields(tc: TensorCore) -> list[Field]:
    """The axes the TC opt adds, in the order they are placed: WARP axes from the lane id's high bits to its low
    ones (so the innermost WARP axis is the lowest bits of the lane: gpudims composes lidx0 so), UPCAST axes from
    the element index's high bits to its low ones, then K's UNROLL axis."""
    warps = sorted(_runs(tc.c[0], AxisType.WARP), key=lambda f: -f.at)
    upcasts = sorted(_runs(tc.c[1], AxisType.UPCAST), key=lambda f: -f.at)
    return [*warps, *upcasts, Field(AxisType.UNROLL, "k", 0, int(math.log2(tc.dims[2])))]


def tc_axes(ranges: list[UOp], tc: TensorCore) -> dict[Field, UOp]:
    """Which of a kernel's ranges (in axis order) are the TC's: every WARP range, and the innermost UPCAST and
    UNROLL ones (the TC opt places its own innermost; later splits place theirs outside, and the Scheduler refuses
    to swap the TC's). TensorCoreError if they do not fit the config."""
    fs = fields(tc)
    out: dict[Field, UOp] = {}
    for t in (AxisType.WARP, AxisType.UPCAST, AxisType.UNROLL):
        want = [f for f in fs if f.type is t]
        have = [r for r in ranges if r.arg.type is t]
        have = have[len(have) - len(want):] if t is not AxisType.WARP else have
        if len(have) != len(want) or any(r.src[0].op is not Ops.CONST or r.src[0].arg.value != f.size
                                         for f, r in zip(want, have)):
            raise TensorCoreError(f"the kernel's {t.name} axes do not fit tensor core {tc.name}")
        out.update(zip(want, have))
    return out


# ---- the reduction the TC computes ----
@dataclass(frozen=True)
class Product:
    """A reduction's value as a product of two operands of the TC's input dtype, accumulated in its output dtype;
    `valid` is the mask padding put on it (None: unmasked)."""

    x: UOp
    y: UOp
    valid: UOp | None


def product(red: UOp, dtype_in: DType, dtype_out: DType) -> Product | None:
    """red's value as Product: `Σ cast(x)·cast(y)` or `Σ cast(x·y)` (the Wmma computes the products exactly, as
    the first form does), possibly masked by padding (`where(valid, ·, 0)`, once per padded axis); None if it is
    neither."""
    if red.op is not Ops.REDUCE or red.arg.op is not Ops.ADD or red.dtype != dtype_out:
        return None
    v, valid = red.src[0], None
    while v.op is Ops.WHERE and v.src[2].op is Ops.CONST and v.src[2].arg.value == 0:  # padding's masks
        valid, v = v.src[0] if valid is None else valid & v.src[0], v.src[1]
    if v.op is Ops.MUL and all(s.op is Ops.CAST for s in v.src):
        x, y = v.src[0].src[0], v.src[1].src[0]
    elif v.op is Ops.CAST and v.src[0].op is Ops.MUL:
        x, y = v.src[0].src
    else:
        return None
    return Product(x, y, valid) if x.dtype == dtype_in and y.dtype == dtype_in else None


@dataclass(frozen=True)
class Plan:
    """What the TC opt does to a kernel: the config, and the axis numbers of its M, N and K axes."""

    tc: TensorCore
    m: int
    n: int
    k: int


def plan(ast: UOp, axes: list[UOp], k: int, tcs: tuple[TensorCore, ...], which: int, pad: bool,
         choice: int) -> list[Plan]:
    """How the TC can apply to reduce axis k of kernel `ast` (its ranges `axes`, in axis order), best first: config
    `which` of `tcs` (-1: each whose dtypes fit, in order), output axes M and N the `choice`-th pair (0: N the
    innermost output axis that one operand alone reads, M the innermost the other alone reads). Without `pad` only
    configs whose tile divides the sizes; with it every fitting config (the caller pads). TensorCoreError says why
    there is none."""
    r = axes[k]
    if r.arg.type is not AxisType.REDUCE or r.src[0].op is not Ops.CONST:
        raise TensorCoreError(f"axis {k} is {r.arg.type.name}{'' if r.src[0].op is Ops.CONST else ' (symbolic)'}; "
                              "the TC reduces a REDUCE axis of constant size")
    reduces = [u for u in ast.toposort() if u.op is Ops.REDUCE and r in u.src[1:]]
    if len(reduces) != 1:
        raise TensorCoreError(f"axis {k} is reduced by {len(reduces)} reductions; the TC needs exactly one")
    red = reduces[0]
    configs = tcs if which == -1 else (tcs[which],)
    matched = [(tc, p) for tc in configs if (p := product(red, tc.dtype_in, tc.dtype_out)) is not None]
    if not matched:
        kinds = ", ".join(sorted({f"{tc.dtype_in.name} products summed in {tc.dtype_out.name}" for tc in configs}))
        raise TensorCoreError(f"the reduction over axis {k} ({red.dtype.name}) is not one of {kinds}")
    pairs = _output_pairs(axes, matched[0][1])
    if not pairs:
        raise TensorCoreError(f"no two output axes of constant size are each read by one operand alone of the "
                              f"product reduced over axis {k}")
    if not 0 <= choice < len(pairs):
        raise TensorCoreError(f"choice {choice} of the output axes: the kernel has {len(pairs)} pairs "
                              f"(0..{len(pairs) - 1})")
    m, n = pairs[choice]
    out, misfits = [], []
    for tc, _ in matched:
        bad = [f"{d} (axis {i}, size {_size(axes[i])}) is not a multiple of {t}"
               for d, i, t in (("M", m, tc.dims[0]), ("N", n, tc.dims[1]), ("K", k, tc.dims[2])) if _size(axes[i]) % t]
        if not bad or pad:
            out.append(Plan(tc, m, n, k))
        else:
            misfits.append(f"{tc.name}: {', '.join(bad)}")
    if not out:
        raise TensorCoreError("; ".join(misfits) + " (opt 1 pads them)")
    return out


def _size(r: UOp) -> int:
    return int(r.src[0].arg.value)


def _output_pairs(axes: list[UOp], p: Product) -> list[tuple[int, int]]:
    """(M, N) axis numbers: output axes of constant size read by one operand alone, M's and N's by different
    operands, innermost N first, then innermost M."""
    reads = (free_ranges(p.x), free_ranges(p.y))
    alone = {i: (r in reads[1]) for i, r in enumerate(axes) if r.arg.type in (AxisType.GLOBAL, AxisType.LOOP)
             and r.src[0].op is Ops.CONST and (r in reads[0]) != (r in reads[1])}  # axis -> read by y (not x)
    pairs = [(m, n) for n in alone for m in alone if alone[m] != alone[n]]
    return sorted(pairs, key=lambda mn: (-mn[1], -mn[0]))


# ---- the pass ----
def _field_value(f: Field, layout: Layout, e: int, warps: dict[Field, UOp]) -> UOp:
    """The value field f of an operand's dimension has at fragment element e of the operand's layout: element
    bits are constants, lane bits come from the WARP axes (runs of them read at once)."""
    source = {name: (j, True) for j, name in enumerate(layout[0])} | \
        {name: (j, False) for j, name in enumerate(layout[1])}
    const, out, b = 0, [], f.lo
    while b < f.lo + f.bits:
        j, is_lane = source[f"{f.dim}{b}"]
        if not is_lane:
            const |= ((e >> j) & 1) << (b - f.lo)
            b += 1
            continue
        w = next(w for w in warps if w.at <= j < w.at + w.bits)
        run = 1
        while b + run < f.lo + f.bits and source[f"{f.dim}{b + run}"] == (j + run, True) and j + run < w.at + w.bits:
            run += 1
        t, shift = warps[w], j - w.at
        t = t // (1 << shift) if shift else t
        t = t % (1 << run) if run < w.bits - shift else t
        out.append(t * (1 << (b - f.lo)) if b > f.lo else t)
        b += run
    terms = ([UOp.const(dtypes.index, const)] if const or not out else []) + out
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def _fragment(x: UOp, layout: Layout, dims: str, axes: dict[Field, UOp], warps: dict[Field, UOp]) -> UOp:
    """The lane's fragment of operand x: element e is x with the TC axes of its dimensions replaced by their
    values at e."""
    mine = [f for f in axes if f.dim in dims]
    return UOp(Ops.STACK, tuple(x.substitute({axes[f]: _field_value(f, layout, e, warps) for f in mine})
                                for e in range(elements(layout))))


def tensor_cores(sink: UOp, tc: TensorCore | None) -> UOp:
    """The kernel with the reduction the TC opt split (tc: its config, None where the kernel has no TC) computed
    by Wmma, as the module docstring says."""
    if tc is None:
        return sink
    axes = tc_axes(sorted((u for u in sink.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg.idx), tc)
    kr = next(r for f, r in axes.items() if f.type is AxisType.UNROLL)
    red = next(u for u in sink.toposort() if u.op is Ops.REDUCE and kr in u.src[1:])
    p = product(red, tc.dtype_in, tc.dtype_out)
    if p is None:
        raise TensorCoreError(f"the reduction over the TC's K axis is no longer a product of {tc.dtype_in.name}")
    m_axes = {r for f, r in axes.items() if f.dim == "m"}
    a, b = (p.x, p.y) if m_axes & free_ranges(p.x) else (p.y, p.x)
    if p.valid is not None:  # padded K: the padding reads zeros, so its products add nothing
        zero = UOp.const(tc.dtype_in, 0)
        a, b = p.valid.where(a, zero), p.valid.where(b, zero)
    warps = {f: r for f, r in axes.items() if f.type is AxisType.WARP}
    zeros = UOp(Ops.STACK, (UOp.const(tc.dtype_out, 0),) * elements(tc.c))
    wmma = UOp(Ops.WMMA, (_fragment(a, tc.a, "mk", axes, warps), _fragment(b, tc.b, "kn", axes, warps), zeros), tc)
    rest = [r for r in red.src[1:] if r is not kr]
    acc = wmma.reduce(Ops.ADD, *rest) if rest else wmma
    lane = None
    for f, r in axes.items():
        if f.type is AxisType.UPCAST:
            term = r * (1 << f.at) if f.at else r
            lane = term if lane is None else lane + term
    return sink.substitute({red: acc.index(lane if lane is not None else 0)})


def _fuse(x: UOp, w: UOp) -> UOp | None:
    """x + Wmma(a, b, c) = Wmma(a, b, x + c): the accumulator's add done by the Wmma."""
    c = w.src[2]
    zero = c.op is Ops.STACK and all(s.op is Ops.CONST and s.arg.value == 0 for s in c.src)
    return w.replace(src=(w.src[0], w.src[1], x if zero else x + c))


wmma_accumulate = PatternMatcher([
    (UPat(Ops.ADD, src=[UPat.var("x"), UPat(Ops.WMMA, name="w")]), _fuse),
], name="wmma accumulate")
