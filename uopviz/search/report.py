"""What searches found, as one JSON-ready document: per kernel the unoptimized, heuristic and BEAM times and the
chosen opts; for the whole program each variant's total time, GFLOP/s and GB/s (when the work is known) and its
speed-up. `uopviz beam --json` prints it, its table is drawn from it, and the notebook's BEAM widget shows it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uopviz.search.beam import BeamResult

VARIANTS = ("unoptimized", "heuristic", "beam")


def report(label: str, device: str, width: int, results: Sequence[BeamResult], wall_s: float,
           flops: int | None = None, nbytes: int | None = None) -> dict[str, Any]:
    """The document of searches of one program's kernels (flops, nbytes: its work, None where unknown)."""
    kernels: list[dict[str, Any]] = [{"kernel": r.kernel_name, "name": r.name, "opts": [o.to_json() for o in r.opts],
                "unoptimized_s": r.unoptimized_s, "heuristic_s": r.heuristic_s, "beam_s": r.time_s,
                "heuristic_opts": [o.to_json() for o in r.heuristic_opts], "search_id": r.search_id,
                "from_db": r.from_db, "rounds": r.rounds, "checked": r.checked, "candidates": r.candidates,
                "compiled": r.compiled,
                "opts_text": [str(o) for o in r.opts]} for r in results]
    total: dict[str, Any] = {}
    base = _sum([k["unoptimized_s"] for k in kernels])
    heur = _sum([k["heuristic_s"] for k in kernels])
    for v in VARIANTS:
        t = _sum([k[f"{v}_s"] for k in kernels])
        total[v] = {"time_s": t,
                    "gflops": flops / t / 1e9 if t and flops is not None else None,
                    "gbs": nbytes / t / 1e9 if t and nbytes is not None else None,
                    "vs_unoptimized": base / t if t and base else None,
                    "vs_heuristic": heur / t if t and heur else None}
    return {"program": label, "device": device, "beam": width, "flops": flops, "bytes": nbytes, "search_s": wall_s,
            "kernels": kernels, "total": total}


def _sum(xs: list[float | None]) -> float | None:
    """The total, unknown if a part is."""
    total = 0.0
    for x in xs:
        if x is None:
            return None
        total += x
    return total
