"""The action space of kernel search: every one-step opt BEAM may try, in a fixed order.

The list depends only on the kernel's axes and on whether its target has tensor cores (TC actions lead the list
there: SPEC puts TC first), so a search is reproducible, and `ACTION_SPACE_VERSION` (part of the tuning
database's cache key) changes whenever the list does for a target that had tuning results.
"""

from __future__ import annotations

from uopviz.codegen.opt.scheduler import KernelOptError, Opt, OptOps, Scheduler
from uopviz.uop.ops import AxisType

ACTION_SPACE_VERSION = 2
MAX_AXES = 8
FACTORS: dict[AxisType, tuple[int, ...]] = {
    AxisType.UPCAST: (2, 3, 4, 5, 7, 8),
    AxisType.UNROLL: (2, 3, 4, 5, 7, 8),
    AxisType.LOCAL: (2, 3, 4, 8, 13, 16, 29, 32),
    AxisType.GROUP_REDUCE: (2, 3, 4, 8, 16, 32, 64, 128, 256),
    AxisType.THREAD: (2, 3, 4, 6, 8, 16),
}
WHOLE = 16  # UPCAST/UNROLL of a whole axis up to this size
PADS = (4, 8, 16, 32)
TC_MODES = (0, 1, 2, 3)  # which pairs of output axes TC makes M and N, innermost first (codegen/tc.py's plan)


def actions(sched: Scheduler) -> list[Opt]:
    """Every candidate next opt, legal or not, in the search's order."""
    shape = sched.shape()[:MAX_AXES]
    out: list[Opt] = []
    if sched.target.tensor_cores and not sched.opts:
        out += [Opt(OptOps.TC, i, (-1, pad, mode)) for i, (t, _) in enumerate(shape) if t is AxisType.REDUCE
                for pad in (0, 1) for mode in TC_MODES]
    for target, factors in FACTORS.items():
        for i, (_, n) in enumerate(shape):
            ks = list(factors)
            if target in (AxisType.UPCAST, AxisType.UNROLL) and n is not None and n <= WHOLE and n not in ks:
                ks.append(n)
            out += [Opt(OptOps.SPLIT, i, (k, target, False)) for k in ks]
    out += [Opt(OptOps.PADTO, i, m) for i in range(len(shape)) for m in PADS]
    out += [Opt(OptOps.SWAP, i, j) for i in range(len(shape)) for j in range(i + 1, len(shape))]
    out.append(Opt(OptOps.NOLOCALS))
    return out


def legal_actions(sched: Scheduler) -> list[tuple[Opt, Scheduler]]:
    """The actions that apply to this kernel, each with the kernel it makes."""
    out = []
    for opt in actions(sched):
        try:
            out.append((opt, sched.apply_opt(opt)))
        except KernelOptError:
            continue
    return out
