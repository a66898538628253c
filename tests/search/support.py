"""What the search tests share: the repository's root and a zoo kernel to search."""

from __future__ import annotations

from pathlib import Path

from uopviz.kernels import ZOO

from uopviz.pipeline import kernels_of, schedule
from uopviz.uop.ops import UOp

REPO = Path(__file__).resolve().parents[2]


def kernel(name: str = "gemm") -> tuple[UOp, list[UOp]]:
    """The (first) kernel of a zoo program at its small sizes, with its buffers."""
    z = ZOO[name]
    out, _ = z.build(z.sizes(small=True), "CPU")
    return kernels_of(schedule([out.uop]))[0]
