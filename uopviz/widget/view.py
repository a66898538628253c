"""`TraceView`: the web UI as a Jupyter widget (anywidget). Its JS is the committed bundle (backend/ui/app.js,
the same app the web page runs), and all of its data comes over the widget's comm, answered in this kernel by
the server's own answer code: no `uopviz serve`, no HTTP port, no network.

The view state is four traitlets both sides keep in step: `trace` (id), `context` (index; -1 before one is
chosen), `pass_index`, `step`, plus `opts` (the kernel's opts; None: as compiled) and `tab`. Setting one in Python
moves the view; a click in the view sets them.
"""

from __future__ import annotations

import threading
from typing import Any

import anywidget
import traitlets

from backend import bundle
from backend.answers import Answers
from backend.models import BeamEvent
from uopviz.codegen.opt import KernelOptError, Opt
from uopviz.widget import export
from uopviz.widget.requests import answer, jsonable

FOLLOW_POLL_S = 0.1  # how often a followed BEAM job is looked at for new events


class TraceView(anywidget.AnyWidget):
    """Recorded traces in a notebook: the kernel list, each step's graph, the rule and its diff, the kernel's
    source and opts, BEAM searches. `answers` holds the traces (its TraceStore) and the tuning database."""

    _esm = bundle.DIST / "app.js"
    _css = bundle.DIST / "app.css"
    trace = traitlets.Unicode("", help="the trace shown (its id)").tag(sync=True)
    context = traitlets.Int(-1, help="the context shown, an index into the trace's contexts").tag(sync=True)
    pass_index = traitlets.Int(0, help="the pass shown, an index into the context's passes").tag(sync=True)
    step = traitlets.Int(0, help="the step shown: 0 is the pass's input").tag(sync=True)
    opts = traitlets.Any(None, allow_none=True, help="the kernel's opts, a list as Opt.to_json gives them (Opt objects "
                                                     "are taken too); None: the kernel as compiled").tag(sync=True)
    tab = traitlets.Unicode("rewrite", help="the side panel shown: rewrite, kernel, beam or trace").tag(sync=True)
    height = traitlets.Int(640, help="the view's height in pixels (its width is the notebook's)").tag(sync=True)

    def __init__(self, answers: Answers, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.answers = answers
        self._following: dict[int, threading.Event] = {}  # follow id -> set to stop it
        self.on_msg(self._on_msg)

    @traitlets.validate("opts")
    def _valid_opts(self, proposal: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Opts given as Opt objects or their JSON, each checked (a malformed one is a TraitError saying why)."""
        value = proposal["value"]
        if value is None:
            return None
        if not isinstance(value, (list, tuple)):
            raise traitlets.TraitError(f"opts: a list of opts or None, got {type(value).__name__}")
        try:
            return [(o if isinstance(o, Opt) else Opt.from_json(o)).to_json() for o in value]
        except KernelOptError as e:
            raise traitlets.TraitError(f"opts: {e}") from None

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The widget, and as its fallback the same view static (text/html): what a notebook saved with this output
        shows where there is no kernel or no uopviz (nbviewer, a repository's viewer)."""
        shown = super()._repr_mimebundle_(**kwargs)
        if shown is None:
            return None
        data, metadata = shown if isinstance(shown, tuple) else (shown, {})
        tids = [t.id for t in self.answers.store.all() if t.source != "opts"]
        view = {"tid": self.trace or None, "ci": None if self.context < 0 else self.context, "pi": self.pass_index,
                "k": self.step, "tab": "beam" if self.tab == "beam" else "rewrite"}
        data["text/html"] = export.fragment(self.answers, tids, view, height=f"{self.height}px")
        return data, metadata

    def _on_msg(self, _: Any, content: Any, buffers: list[bytes]) -> None:
        if not isinstance(content, dict):
            return
        if "request" in content:
            self.send(answer(self.answers, content["request"], content.get("method"), content.get("args", [])))
        elif "follow" in content:
            self._follow(content["follow"], content.get("job"))
        elif "unfollow" in content and (stop := self._following.pop(content["unfollow"], None)) is not None:
            stop.set()

    def _follow(self, follow_id: int, job_id: Any) -> None:
        """Send a BEAM job's events, from its first, in batches, until its last or until unfollowed."""
        try:
            job = self.answers.beam_job(str(job_id))
        except LookupError as e:
            self._send_events(follow_id, [{"event": "error", "kind": "failed", "detail": str(e)}])
            return
        stop = self._following.setdefault(follow_id, threading.Event())

        def run() -> None:
            seen = 0
            while not stop.is_set():
                new, over = job.since(seen)
                seen += len(new)
                if new:
                    self._send_events(follow_id, new)
                if over:
                    break
                stop.wait(FOLLOW_POLL_S)
            self._following.pop(follow_id, None)

        threading.Thread(target=run, daemon=True, name=f"uopviz-follow-{follow_id}").start()

    def _send_events(self, follow_id: int, events: list[BeamEvent] | list[dict[str, Any]]) -> None:
        self.send({"events": follow_id, "items": jsonable(list(events))})

    def close(self) -> None:
        """Close the widget: stop following searches, stop a search it started (its candidates stay stored)."""
        for stop in self._following.values():
            stop.set()
        self.answers.stop()
        super().close()
