"""`TraceView`: the web UI as a Jupyter widget (anywidget). Its JS is the committed bundle (backend/ui/app.js,
the same app the web page runs), and all of its data comes over the widget's comm, answered in this kernel by
the server's own answer code: no `uopviz serve`, no HTTP port, no network.

The view state is four traitlets both sides keep in step: `trace` (id), `context` (index; -1 before one is
chosen), `pass_index`, `step`, plus `opts` (the kernel's opts; None: as compiled) and `tab`. Setting one in Python
moves the view; a click in the view sets them.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import Any

import anywidget
import ipywidgets
import traitlets

from uopviz.backend import bundle
from uopviz.backend.answers import Answers
from uopviz.backend.models import BeamEvent
from uopviz.backend.tuning import BeamJob
from uopviz.codegen.opt import KernelOptError, Opt
from uopviz.widget import export
from uopviz.widget.requests import answer, jsonable

FOLLOW_POLL_S = 0.1  # how often a followed BEAM job is looked at for new events
MAX_FOLLOWS = 16  # jobs one view follows at once (one search runs at a time; the page follows it once)


@dataclass
class _Follow:
    job: BeamJob
    sent: int = 0  # how many of its events the view has


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
    fallback = traitlets.Unicode("", help="the id its static fallback outputs carry: the live view hides them (where "
                                          "no stylesheet rule can: VS Code)").tag(sync=True)
    height = traitlets.Int(export.VIEW_HEIGHT, help="the view's first height in pixels (its width is the notebook's)"
                           ).tag(sync=True)

    def __init__(self, answers: Answers, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _display_boxes_with_fallbacks()
        self.answers = answers
        self.fallback = uuid.uuid4().hex
        self._follows: dict[int, _Follow] = {}  # follow id -> the job followed
        self._lock = threading.Lock()  # guards _follows and _follower, which the follower thread changes too
        self._follower: threading.Thread | None = None  # one thread sends every followed job's events
        self._wake, self._closed = threading.Event(), threading.Event()
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

    def _ipython_display_(self, **kwargs: Any) -> None:
        """Two outputs: the widget, then its fallback, the same view static (text/html, `static_html`). A notebook
        saved with them and reopened has no model for the widget (JupyterLab then says "model not found" and never
        falls back to a widget output's own text/html), nor has a viewer with no kernel or no uopviz (nbviewer, a
        repository's page): there the fallback shows the view. The app's stylesheet shows one of the two in
        JupyterLab: the fallback only after a widget output that failed, which it hides; the loader draws the
        fallback only once it is visible, so a live widget's hidden fallback costs no second app."""
        from IPython.display import display

        shown = self._repr_mimebundle_(**kwargs) if self.comm is not None else None  # a closed widget: its repr
        if shown is None:
            display({"text/plain": repr(self)}, raw=True)
            return
        data, metadata = shown
        display(data, metadata=metadata, raw=True)
        display({"text/html": self.static_html()}, raw=True)

    def static_html(self) -> str:
        """The view shown, static (export.fragment): the context shown (every step of its passes) and the outline
        of the rest: small and quick to make for a training step's trace, whose every pass of every kernel would be
        megabytes and most of a minute."""
        tids = [t.id for t in self.answers.store.all() if t.source != "opts"]
        ci = self._shown_context()
        view = {"tid": self.trace or None, "ci": ci, "pi": self.pass_index, "k": self.step,
                "tab": "beam" if self.tab == "beam" else "rewrite"}
        only = (self.trace, ci) if self.trace and ci is not None else None
        return export.fragment(self.answers, tids, view, height=f"{self.height}px", only=only, widget=self.fallback)

    def static_in_box(self) -> str | None:
        """The fallback this view gives a Box it is shown in (`_display_box`); None once closed."""
        return self.static_html() if self.comm is not None else None

    def _shown_context(self) -> int | None:
        """The context the view shows: the one chosen, else the trace's first kernel (as the app opens), else
        None."""
        if self.context >= 0 or not self.trace:
            return self.context if self.context >= 0 else None
        contexts = self.answers.trace(self.trace).contexts
        return next((c.index for c in contexts if c.kind == "kernel"), contexts[0].index if contexts else None)

    def _on_msg(self, _: Any, content: Any, buffers: list[bytes]) -> None:
        if not isinstance(content, dict):
            return
        if "request" in content:
            self.send(answer(self.answers, content["request"], content.get("method"), content.get("args", [])))
        elif "follow" in content:
            self._follow(content["follow"], content.get("job"))
        elif "unfollow" in content:
            with self._lock:
                self._follows.pop(content["unfollow"], None)

    def _follow(self, follow_id: int, job_id: Any) -> None:
        """Send a BEAM job's events, from its first, in batches, until its last or until unfollowed: by the one
        follower thread, started when the first job is followed (a message per follow cannot start threads)."""
        try:
            job = self.answers.beam_job(str(job_id))
        except LookupError as e:
            self._send_events(follow_id, [{"event": "error", "kind": "failed", "detail": str(e)}])
            return
        with self._lock:
            if self._closed.is_set():
                return
            full = follow_id not in self._follows and len(self._follows) >= MAX_FOLLOWS
            if not full:
                self._follows.setdefault(follow_id, _Follow(job))
                if self._follower is None:
                    self._follower = threading.Thread(target=self._send_followed, daemon=True, name="uopviz-follow")
                    self._follower.start()
        if full:
            self._send_events(follow_id, [{"event": "error", "kind": "failed", "detail": (
                f"this view follows {MAX_FOLLOWS} searches already: unfollow one first")}])
        else:
            self._wake.set()

    def _send_followed(self) -> None:
        """The follower thread: send each followed job's new events, until no job is followed or the view closes."""
        while True:
            with self._lock:
                follows = list(self._follows.items())
                if not follows or self._closed.is_set():
                    self._follower = None
                    return
            for follow_id, f in follows:
                new, over = f.job.since(f.sent)
                f.sent += len(new)
                if new:
                    self._send_events(follow_id, new)
                if over:
                    with self._lock:
                        if self._follows.get(follow_id) is f:
                            del self._follows[follow_id]
            self._wake.wait(FOLLOW_POLL_S)
            self._wake.clear()

    def _send_events(self, follow_id: int, events: list[BeamEvent] | list[dict[str, Any]]) -> None:
        self.send({"events": follow_id, "items": jsonable(list(events))})

    def close(self) -> None:
        """Close the widget: stop following searches, stop a search it started (its candidates stay stored)."""
        with self._lock:
            self._closed.set()
            self._follows.clear()
            follower = self._follower
        self._wake.set()
        if follower is not None and follower is not threading.current_thread():
            follower.join(FOLLOW_POLL_S * 10)
        self.answers.stop()
        super().close()


def _box_fallback(box: ipywidgets.Box) -> str | None:
    """The static fallbacks of the views inside a Box (at any depth), laid out as the box lays them out: an HBox's
    side by side, other boxes' one above another; None where it holds no open view."""
    parts = [f'<div style="flex:1 1 0;min-width:0">{part}</div>' for child in box.children
             if (part := child.static_in_box() if isinstance(child, TraceView) else
                 _box_fallback(child) if isinstance(child, ipywidgets.Box) else None) is not None]
    row = isinstance(box, ipywidgets.HBox)
    return (f'<div class="uopviz-statics" style="display:flex;flex-direction:{"row" if row else "column"};gap:4px">'
            f'{"".join(parts)}</div>') if parts else None


def _display_box(box: ipywidgets.Box) -> None:
    """A Box displayed (04-compare-opts shows two views in an HBox): the box, then, where views are inside it, their
    fallbacks as one output after it, which the stylesheet shows in the box's place only where the box failed to
    show (a saved notebook reopened), as a TraceView's own fallback (`TraceView._ipython_display_`)."""
    from IPython.display import display

    data = box._repr_mimebundle_()
    display(data if data is not None else {"text/plain": repr(box)}, raw=True)
    if (fallback := _box_fallback(box)) is not None:
        display({"text/html": fallback}, raw=True)


def _display_boxes_with_fallbacks() -> None:
    """Have IPython display every Box through `_display_box` (told again as each view is made in a shell): a Box
    is displayed by ipywidgets alone, which knows nothing of the fallbacks of the views inside it."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.ipython_display_formatter.for_type(ipywidgets.Box, _display_box)
