"""The profile of what ran inside a `uopviz.profile()` block: every kernel launch with its time, share, work, rates
and place under the device's roofs, grouped by the line of the user's code that ran it.

While a block is open every launch waits for its kernel (uopviz.realize.profiling), so a launch's time is its own:
its wall time from the call until the kernel is done (what the step pays for it: the launches' times add up to the
block's time in kernel launches), and its kernel's time as the device measures it (what its rates are taken over).
A launch is filed under the innermost line of the user's code that scheduled it: the line whose realize (numpy,
item, backward, an optimizer's step) ran it; for a `@jit` replay, the line that did so while the step was captured
(inside the step's function where it realizes there, else the line that called it for the capture). When the block
ends, the work of each launch is counted from its kernel graph (work.py), the roofs of each device used are looked
up (roofs.py: measured once per device), and the profile is filed into every trace recording then (`profiles`).
"""

from __future__ import annotations

import json
import os
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from uopviz.profile.roofs import Roofs, roofs_of
from uopviz.profile.work import Work, kernel_work
from uopviz.realize import Launch, profiling
from uopviz.trace import origins
from uopviz.trace.format import check_profile
from uopviz.trace.ids import node_id
from uopviz.trace.recorder import file_profile, frame_of, user_line
from uopviz.uop.ops import UOp


class Run(NamedTuple):
    """One kernel launch: its kernel's name and graph id (`ast`, a trace node id; None where unknown), its device,
    `time_s` (the launch's wall time from the call until its kernel was done: what the step pays for it),
    `device_s` (the kernel's own time as the device measures it: OpenCL's and CUDA's events; elsewhere the same
    wall time), its work, the line of the user's code that ran it ({"file", "line", "function", "code"}, or
    None), and `origin`, the Tensor op and line whose value the kernel computes ({"op", "file", "line",
    "function", "code", "grad_of"}: uopviz.trace.origins.nested; None where its graph was built before the block
    began). GFLOP/s and GB/s are the kernel's: work over device_s."""

    kernel: str
    ast: str | None
    device: str
    time_s: float
    device_s: float
    flops: int
    bytes: int
    line: dict[str, Any] | None
    origin: dict[str, Any] | None = None


@dataclass(repr=False)
class Profile:
    """Every launch of a profiled block (`runs`, in launch order), the block's wall time and each device's roofs.
    `rows()`, `by_kernel()` and `by_line()` are the data of the table that `table()` (and print) shows."""

    runs: list[Run] = field(default_factory=list)
    wall_s: float = 0.0
    roofs: dict[str, Roofs] = field(default_factory=dict)

    @property
    def kernel_s(self) -> float:
        """The launches' wall times added up: the block's time in kernel launches."""
        return sum(r.time_s for r in self.runs)

    @property
    def device_s(self) -> float:
        """The kernels' own times added up (as the devices measure them)."""
        return sum(r.device_s for r in self.runs)

    def rows(self) -> list[dict[str, Any]]:
        """Each launch as data: its Run's fields, its `share` of the launches' time, `gflops`, `gbs`, `roof` (its
        place under the roofline: 1.0 is on it) and `bound` ("compute" or "memory": the roof it is under)."""
        return [{**r._asdict(), **self._totals([r])} for r in self.runs]

    def by_kernel(self) -> list[dict[str, Any]]:
        """The launches of each kernel (one graph on one device) together, most time first: its `kernel`, `ast`,
        `device`, the `lines` that ran it, and `launches`, `time_s`, `share`, work, rates, `roof` and `bound` over
        all its launches."""
        return self._kernels(self.runs)

    def _kernels(self, runs: list[Run]) -> list[dict[str, Any]]:
        return [{"kernel": runs[0].kernel, "ast": runs[0].ast, "device": runs[0].device,
                 "lines": list({_line_key(r.line): r.line for r in runs}.values()), **self._totals(runs)}
                for runs in _grouped(runs, lambda r: (r.ast or r.kernel, r.device))]

    def by_line(self) -> list[dict[str, Any]]:
        """The launches of each Tensor line together, most time first: the line of the user's code whose Tensor
        op made the kernels' values (a gradient's kernels apart, under its forward op's line), else the line
        that ran them. Each: its `line` (None: no user code ran them), `op` (the Tensor op, where known),
        `backward` (whether these are the gradient's kernels), `launches`, `time_s`, `share`, work and rates, and
        its `kernels` (as `by_kernel` has them, over that line's launches)."""
        return [{**_made_by(runs[0]), **{k: v for k, v in self._totals(runs).items() if k not in ("roof", "bound")},
                 "kernels": self._kernels(runs)}
                for runs in _grouped(self.runs, _made_key)]

    def _totals(self, runs: list[Run]) -> dict[str, Any]:
        """launches, time_s and device_s, share (of the whole profile's launch time), flops, bytes, gflops and gbs
        (over device_s), and (for runs on one device) roof and bound."""
        t, dt = sum(r.time_s for r in runs), sum(r.device_s for r in runs)
        flops, nbytes = sum(r.flops for r in runs), sum(r.bytes for r in runs)
        gflops, gbs = (flops / dt / 1e9, nbytes / dt / 1e9) if dt > 0 else (0.0, 0.0)
        roof = self.roofs[runs[0].device]
        total = self.kernel_s
        return {"launches": len(runs), "time_s": t, "device_s": dt, "share": t / total if total else 0.0,
                "flops": flops, "bytes": nbytes, "gflops": gflops, "gbs": gbs, "roof": roof.fraction(gflops, gbs),
                "bound": roof.bound(flops, nbytes)}

    def table(self, top: int = 10) -> str:
        """The profile as text: the totals, each device's roofs, then each line of the user's code (most time
        first) with its `top` kernels."""
        from uopviz.profile.table import render
        return render(self, top)

    def __repr__(self) -> str:
        """The table (a profile that is a notebook cell's value shows it)."""
        return self.table()

    # ---- the document (docs/trace-format.md, "profiles") ----
    def to_dict(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s, "roofs": {d: r._asdict() for d, r in self.roofs.items()},
                "launches": [r._asdict() for r in self.runs]}

    @classmethod
    def from_dict(cls, doc: Any) -> Profile:
        """A profile from its document (a trace's `profiles` entry, a `--json` file); TraceFormatError if it is
        malformed."""
        check_profile(doc)
        return cls([Run(**{k: r[k] for k in Run._fields if k in r}) for r in doc["launches"]], float(doc["wall_s"]),
                   {d: Roofs(float(r["gflops"]), float(r["gbs"])) for d, r in doc["roofs"].items()})

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1, allow_nan=False)


def _grouped(runs: list[Run], key: Any) -> list[list[Run]]:
    """The runs in groups of equal key, most time first."""
    groups: dict[Any, list[Run]] = {}
    for r in runs:
        groups.setdefault(key(r), []).append(r)
    return sorted(groups.values(), key=lambda g: -sum(r.time_s for r in g))


def _made_by(r: Run) -> dict[str, Any]:
    """The line a run is filed under: {"line", "op", "backward"} (see Profile.by_line)."""
    o = r.origin
    if o is None:
        return {"line": r.line, "op": None, "backward": False}
    forward = o["grad_of"] or o
    frame = {k: forward[k] for k in ("file", "line", "function", "code")}
    return {"line": frame, "op": forward["op"], "backward": o["grad_of"] is not None}


def _made_key(r: Run) -> tuple[str, int, bool] | None:
    made = _made_by(r)
    return None if made["line"] is None else (made["line"]["file"], made["line"]["line"], made["backward"])


def _line_key(line: dict[str, Any] | None) -> tuple[str, int] | None:
    return None if line is None else (line["file"], line["line"])


class _Seen(NamedTuple):
    launch: Launch
    vals: tuple[int, ...]
    device_s: float
    time_s: float
    where: tuple[str, int, str] | None


@contextmanager
def profile() -> Iterator[Profile]:
    """Profile every kernel launch inside the block (realizes, cached schedules and `@jit` replays alike): the
    Profile is filled when the block ends, and filed into every trace recording then."""
    seen: list[_Seen] = []
    p = Profile()
    made: origins.Origins = weakref.WeakKeyDictionary()  # the nodes built in the block: which Tensor op made each

    def report(launch: Launch, vals: tuple[int, ...], device_s: float, time_s: float) -> None:
        seen.append(_Seen(launch, vals, device_s, time_s, launch.line or user_line()))

    t0 = time.perf_counter()
    try:
        with profiling(report), origins.noting(made):
            yield p
    finally:
        p.wall_s = time.perf_counter() - t0
        p.runs = _runs(seen, made)
        p.roofs = {d: roofs_of(d) for d in dict.fromkeys(r.device for r in p.runs)}
        file_profile(p.to_dict())


def _runs(seen: list[_Seen], made: origins.Origins) -> list[Run]:
    """Each launch seen as a Run (a kernel graph's work, id and origin found once per graph and variables'
    values)."""
    works: dict[tuple[UOp, tuple[int, ...]], Work] = {}
    ids: dict[UOp, str] = {}
    kernel_origin: dict[UOp, origins.Origin | None] = {}
    lines: dict[tuple[str, int, str], dict[str, Any]] = {}
    out = []
    for launch, vals, device_s, time_s, where in seen:
        ast = launch.key[0] if launch.key is not None else launch.kernel.linear  # a copy's kernel holds its Copy
        k = (ast, vals)
        if k not in works:
            works[k] = kernel_work(ast, dict(zip(launch.kernel.vars, vals, strict=True)))
        if ast not in ids:
            ids[ast], kernel_origin[ast] = node_id(ast), origins.of_kernel(ast, made)
        if where is not None and where not in lines:
            lines[where] = frame_of(*where)
        out.append(Run(launch.kernel.name, ids[ast], launch.buffers[0].arg.device, time_s, device_s, works[k].flops,
                       works[k].bytes, lines[where] if where is not None else None, origins.nested(kernel_origin[ast])))
    return out

