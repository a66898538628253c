"""Kernel names in the tinygrad style: `r_` for kernels that reduce, `E_` for elementwise ones, then each axis
as its AxisType letter and size, in loop order (e.g. `r_g33_g7_R5`), so the name says the kernel's shape. A name
is a C identifier of at most MAX_NAME characters (what a generated source accepts): a longer one keeps its head
and ends in a digest of the whole, so kernels of many axes still get distinct names."""

from __future__ import annotations

import hashlib

from uopviz.uop.ops import AxisType, Ops, UOp

MAX_NAME = 64
"""The longest name spec.is_identifier accepts."""


def axes(k: UOp) -> list[tuple[AxisType, int | str]]:
    """(type, size) of each Range of a kernel, in idx order; a symbolic size is its expression."""
    ranges = sorted((u for u in k.toposort() if u.op is Ops.RANGE), key=lambda r: r.arg.idx)
    return [(r.arg.type, r.src[0].arg.value if r.src[0].op is Ops.CONST else r.src[0].render()) for r in ranges]


def kernel_name(k: UOp) -> str:
    ax = axes(k)
    reduces = any(t in (AxisType.REDUCE, AxisType.GROUP_REDUCE, AxisType.UNROLL) for t, _ in ax) or \
        any(u.op is Ops.REDUCE for u in k.toposort())
    parts = [f"{t.letter}{s}" if isinstance(s, int) else f"{t.letter}v" for t, s in ax]
    name = "_".join(["r" if reduces else "E", *parts])
    if len(name) <= MAX_NAME:
        return name
    return f"{name[:MAX_NAME - 9]}_{hashlib.blake2b(name.encode(), digest_size=4).hexdigest()}"
