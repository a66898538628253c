"""Split reductions: a large reduction to a single value becomes two, so that every core takes part.

A kernel's THREAD axes come from its output, and a reduction to one value has none: one core would read the whole
input while the others wait. Reducing the input as PARTS rows first (one kernel whose PARTS outputs the cores
share, each row's loop with its vector accumulators) and then the PARTS partial results (a second, tiny kernel)
reads memory with every core. The split changes only the order of an associative reduction's combining (a sum's
rounding, a few ulps at most; exact for max). Reductions smaller than SPLIT_MIN elements stay whole: there the
second kernel's launch costs more than the first one saves.
"""

from __future__ import annotations

from uopviz.schedule.program import program_order
from uopviz.schedule.rows import ROW
from uopviz.uop.ops import Ops, UOp, prod

SPLIT_MIN = 1 << 18
"""The fewest elements a reduction to one value must read to be split."""
PARTS = 256
"""The most partial results: enough rows for any core count to share evenly, few enough to sum in microseconds."""
MIN_PART = 1024
"""The fewest elements each partial result reduces."""
ASSOCIATIVE = frozenset({Ops.ADD, Ops.MAX, Ops.MUL})


def split_reductions(fn: UOp) -> UOp:
    """Function fn with its large reductions to one value split in two (unchanged when it has none)."""
    body = fn.src[0]
    order = [u for u in program_order(body) if u.op is not Ops.FUNCTION]
    if not any(_parts(u) for u in order):
        return fn
    new: dict[UOp, UOp] = {}
    for u in order:
        v = u.replace(src=tuple(new.get(s, s) for s in u.src))
        if parts := _parts(u):
            x = v.src[0]
            n = prod(x.shape)
            partial = UOp(Ops.CONTIGUOUS, (x.reshape((parts, n // parts)).reduce(u.arg.op, axes=(1,)),))
            v = partial.reduce(u.arg.op, axes=(0,)).reshape(u.shape)
        new[u] = v
    return fn.replace(src=(new[body], *fn.src[1:]))


def _parts(u: UOp) -> int:
    """How many partial results u is split into: 0 unless u is a large associative reduction to one value."""
    if u.op is not Ops.REDUCE or len(u.src) != 1 or u.tag == ROW or u.arg.op not in ASSOCIATIVE:
        return 0
    shape = u.src[0].shape
    if not all(isinstance(d, int) for d in (*shape, *u.shape)) or prod(u.shape) != 1:
        return 0
    n = prod(shape)
    if n < SPLIT_MIN:
        return 0
    return next((p for p in range(PARTS, 1, -1) if n % p == 0 and n // p >= MIN_PART), 0)
