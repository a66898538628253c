"""BEAM in a notebook: `BeamView`, a live widget of a search (round, candidates measured, best time so far, the
candidate chart filling in, then the results table), and `search_tensor`, which searches every kernel of a Tensor
with it (`Tensor.beam()`). Outside a notebook (no IPython kernel) the search shows its usual status line instead.

Events reach the view as they happen (comm messages from the cell that runs the search: the kernel is busy, so the
view asks for nothing); the whole list is also kept in the `events` traitlet at each round's end, so a view opened
later, or a notebook saved and opened again, draws the same chart.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anywidget
import traitlets

from uopviz.backend import bundle
from uopviz.search.beam import BeamResult, ProgressHook

Results = Callable[[list[BeamResult], float], dict[str, Any]]


@dataclass
class KernelSearch:
    """One kernel's BEAM search shown live in a notebook: what `hooks.beam_display` gives uopviz.search.beam when
    a search with the default progress runs in an IPython kernel."""

    view: BeamView
    device: str
    width: int
    start: float

    def hook(self, event: dict[str, Any]) -> None:
        self.view.add({**event, "kernel": 0})

    def end(self, result: BeamResult | None, status: str, detail: str = "") -> None:
        """The search ended: done with its result (the view then shows the results table), or interrupted or
        failed (detail says why)."""
        from uopviz.search.report import report
        if result is None:
            self.view.add({"event": "error", "kind": status, "kernel": 0, "detail": detail})
            self.view.end(status)
            return
        self.view.add(_done(result, 0))
        self.view.end("done", report(result.kernel_name, self.device, self.width, [result],
                                     time.perf_counter() - self.start))


def kernel_display(kernel_name: str, device: str, width: int) -> KernelSearch:
    """A BeamView of one kernel's search, displayed now."""
    from IPython.display import display
    view = BeamView(label=f"{kernel_name} on {device}", kernels=[kernel_name])
    display(view)
    return KernelSearch(view, device, width, time.perf_counter())


def _done(r: BeamResult, kernel: int) -> dict[str, Any]:
    """A kernel's last event: what its search chose."""
    return {"event": "done", "kernel": kernel, "search_id": r.search_id, "name": r.name,
            "opts": [o.to_json() for o in r.opts], "time_s": r.time_s, "unoptimized_s": r.unoptimized_s,
            "heuristic_s": r.heuristic_s, "rounds": r.rounds, "candidates": r.candidates, "from_db": r.from_db}


def in_notebook() -> bool:
    """Whether this runs in an IPython kernel (a notebook), where a widget can be displayed."""
    import sys
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


class BeamView(anywidget.AnyWidget):
    """A BEAM search of one or more kernels, live. `hook(kernel)` is the progress hook for one kernel's search."""

    _esm = bundle.DIST / "app.js"
    _css = bundle.DIST / "app.css"
    view = traitlets.Unicode("beam").tag(sync=True)  # which view of the bundle's widget renders it
    meta = traitlets.Dict(help="the data source's meta (AxisType colours, the opts' descriptions)").tag(sync=True)
    label = traitlets.Unicode(help="what is searched").tag(sync=True)
    kernels = traitlets.List(traitlets.Unicode(), help="the kernels searched, in order").tag(sync=True)
    events: traitlets.List[dict[str, Any]] = traitlets.List(
        help="every event so far, each with its kernel's index").tag(sync=True)
    status = traitlets.Unicode("running", help="running, done, interrupted or failed").tag(sync=True)
    summary = traitlets.Dict(allow_none=True, default_value=None,
                             help="the results (uopviz beam --json's document) once done").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        from uopviz.backend.answers import meta
        from uopviz.runtime.device import default_device
        super().__init__(meta=meta(default_device()).model_dump(mode="json"), **kwargs)
        self._events: list[dict[str, Any]] = []

    def hook(self, kernel: int) -> ProgressHook:
        def progress(event: dict[str, Any]) -> None:
            self.add({**event, "kernel": kernel})
        return progress

    def add(self, event: dict[str, Any]) -> None:
        """Show one event now; keep it (in `events` at each round's end and at the end)."""
        event = {**event, "seq": len(self._events) + 1}
        self._events.append(event)
        self.send({"beam": [event]})
        if event["event"] in ("round_end", "done", "error"):
            self.events = list(self._events)

    def end(self, status: str, summary: dict[str, Any] | None = None) -> None:
        self.events = list(self._events)
        self.set_trait("summary", summary)  # None until done: the trait allows it, its type hints do not say so
        self.status = status


def search_tensor(t: Any, width: int = 4, *, db: str | os.PathLike[str] | None = None, force: bool = False,
                  max_rounds: int = 8, flops: int | None = None, label: str | None = None) -> list[BeamResult]:
    """BEAM-search the opts of every kernel `t`'s realize would run, in order, storing them in the tuning database
    (`realize()` then uses them). In a notebook a BeamView shows it live and ends with the results table
    (unoptimized, heuristic and BEAM times, GFLOP/s when `flops` is given, GB/s, the opts). Ctrl-C (interrupt the
    kernel) stops it: the candidates measured so far stay in the database, and the same call resumes."""
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.search.beam import beam
    from uopviz.search.db import TuningDB
    from uopviz.search.report import report
    from uopviz.widget.sources import require_lazy

    require_lazy(t, "search", "build the value again (a new lazy Tensor) and search that")
    kernels = kernels_of(schedule([t.uop]))
    name = label or f"{t.dtype.name}{list(t.shape)} on {t.device}"
    view = None
    if in_notebook():
        from IPython.display import display
        view = BeamView(label=name, kernels=[_name(ast) for ast, _ in kernels])
        display(view)
    results: list[BeamResult] = []
    t0 = time.perf_counter()
    try:
        with TuningDB(db) as tdb:
            for i, (ast, bufs) in enumerate(kernels):
                r = beam(ast, width, bufs[0].arg.device, db=tdb, force=force, max_rounds=max_rounds,
                         progress=view.hook(i) if view else True)
                results.append(r)
                if view:
                    view.add(_done(r, i))
    except KeyboardInterrupt:
        if view:
            view.add({"event": "error", "kind": "interrupted", "kernel": len(results),
                      "detail": "interrupted: the candidates measured so far are stored; the same call resumes"})
            view.end("interrupted")
        raise
    except Exception as e:
        if view:
            view.add({"event": "error", "kind": "failed", "kernel": len(results), "detail": f"{e}"})
            view.end("failed")
        raise
    if view:
        nbytes = sum(b.arg.size * b.arg.dtype.itemsize for _, bufs in kernels for b in bufs)
        view.end("done", report(name, t.device, width, results, time.perf_counter() - t0, flops, nbytes))
    return results


def _name(ast: Any) -> str:
    from uopviz.codegen.naming import kernel_name
    return kernel_name(ast)
