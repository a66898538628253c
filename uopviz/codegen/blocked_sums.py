"""Blocked sums: a long floating-point sum accumulates in blocks, and each block's sum is added to the total.

One accumulator that runs through N terms rounds N times on a value that keeps growing, so its error grows with N: a
16M-term float32 sum of 0.1s was 3.8e-5 off, where NumPy's pairwise sum is 1.5e-7 off. Here a Reduce(+) of a float
over one loop of N >= BLOCKED_MIN iterations becomes a Reduce over N//B blocks of a Reduce over B iterations, plus a
Reduce over the N % B left: B is the divisor of N nearest √N where one lies within a factor of 2 of it, else ⌊√N⌋ with
a tail (a prime N, 1000003, was 1.2e-5 off): every accumulator rounds at most about 2·√N times. It runs after Expand,
on the loops left (UPCAST and UNROLL lanes are vectors by then), and only where the accumulator is narrow (a sum's
lanes, not a matmul's register tile, whose second set of accumulators would not fit in registers). Max, products,
integer sums and short sums keep one accumulator.
"""

from __future__ import annotations

import math

from uopviz.codegen.lanes import width
from uopviz.uop.ops import Ops, UOp

BLOCKED_MIN = 2048
"""The fewest iterations of a sum's loop that are accumulated in blocks."""
NARROW = 16
"""The widest accumulator (lanes) blocked: a sum's vector, not a register tile."""


def block_sums(sink: UOp) -> UOp:
    """sink with its long float sums over one loop accumulated in blocks (unchanged when it has none). The sums
    over one loop (Expand's copies of one reduction) share its new loops, so that merge loops still makes one
    pass over the data."""
    todo = [u for u in sink.toposort() if _blocks(u)]
    if not todo:
        return sink
    fresh = 1 + max(u.arg.idx for u in sink.toposort() if u.op is Ops.RANGE)
    split: dict[UOp, tuple[UOp, UOp, int, UOp | None]] = {}
    swap: dict[UOp, UOp] = {}
    for red in todo:
        r = red.src[1]
        if r not in split:
            n = r.src[0].arg.value
            b = _block(n)
            tail = UOp.range(n % b, fresh + 2, r.arg.type) if n % b else None
            split[r] = (UOp.range(n // b, fresh, r.arg.type), UOp.range(b, fresh + 1, r.arg.type), b, tail)
            fresh += 3
        outer, inner, b, tail = split[r]
        val = red.src[0].substitute({r: outer * b + inner})
        blocked = UOp(Ops.REDUCE, (UOp(Ops.REDUCE, (val, inner), red.arg), outer), red.arg)
        if tail is not None:
            start = (r.src[0].arg.value // b) * b
            blocked = blocked + UOp(Ops.REDUCE, (red.src[0].substitute({r: tail + start}), tail), red.arg)
        swap[red] = blocked
    return sink.substitute(swap)


def _blocks(u: UOp) -> bool:
    """Whether u is a float sum over one constant loop long enough to block, with a narrow accumulator."""
    if u.op is not Ops.REDUCE or len(u.src) != 2 or u.arg.op is not Ops.ADD or not u.dtype.is_float:
        return False
    r = u.src[1]
    n = r.src[0].arg.value if r.op is Ops.RANGE and r.src[0].op is Ops.CONST else None
    return isinstance(n, int) and n >= BLOCKED_MIN and width(u) <= NARROW


def _block(n: int) -> int:
    """The block length for a sum of n terms: the divisor of n nearest √n where one lies within a factor of 2 of
    it (no tail loop), else ⌊√n⌋ (the n % B terms left sum in a loop of their own)."""
    root = math.sqrt(n)
    near = [d for k in range(max(2, math.ceil(root / 2)), math.isqrt(n) + 1) if n % k == 0 for d in (k, n // k)
            if root / 2 <= d <= 2 * root]
    return min(near, key=lambda d: (abs(d - root), d), default=math.isqrt(n))
