"""Static views: one self-contained HTML file (`uopviz export`, `Trace.to_html`) or a notebook output (a widget's
saved view) that shows traces read-only with no uopviz, no server and no network.

The page holds the bundle (app.js, app.css, loader.js, inlined) and every answer a read-only view asks for, by the
request key frontend/src/static.js reads: the trace details, the graph at every step, each kernel's source, and
the finished BEAM searches of its kernels from the tuning database. A step lists its nodes by id, each node once
in a shared table ("nodes": consecutive steps share most of them): the zoo gemm's 90 steps are 1.3 MB of JSON so,
3.9 MB without. They are gzipped and in base64, which the browser unzips itself.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from uopviz.backend import bundle
from uopviz.backend.answers import Answers
from uopviz.backend.routes import key
from uopviz.backend.store import NotFound, TraceStore
from uopviz.widget.requests import jsonable
from uopviz.widget.sources import stored

VIEW_HEIGHT = 800  # px of a view in a notebook's output at first (its bottom edge resizes it; a page's is the window)


def answers_of(answers: Answers, tids: Sequence[str], only: tuple[str, int] | None = None) -> dict[str, Any]:
    """Every answer a read-only view of these traces asks for, by request key; `only` (a trace id and a context
    index) keeps the steps and kernels of that one context (a notebook's fallback: its view, not every pass of a
    training step's hundreds of kernels)."""
    out: dict[str, Any] = {"meta": answers.meta(), "traces": [t for t in answers.traces() if t.id in tids]}
    hashes: list[str] = []
    for tid in tids:
        detail = out[key("trace", tid)] = answers.trace(tid)
        for c in detail.contexts:
            if only is not None and only != (tid, c.index):
                continue
            for p in c.passes:
                for k in range(p.steps + 1):
                    out[key("step", tid, c.index, p.index, k)] = answers.step(tid, c.index, p.index, k)
            if c.kind != "kernel":
                continue
            with contextlib.suppress(NotFound):  # a kernel whose lowering failed before rendering: the view says so
                out[key("kernel", tid, c.index)] = answers.kernel(tid, c.index)
            if c.kernel_hash is not None and c.kernel_hash not in hashes:
                hashes.append(c.kernel_hash)
    everything = []
    for h in hashes:
        page = answers.searches(h, limit=1000)
        done = [s for s in page.searches if s.status == "done"]
        out[key("searches", h)] = {"searches": done, "next_before": None}
        out[key("results", h)] = answers.results(h)
        everything += done
        for s in done:
            out[key("search", s.id)] = answers.search(s.id)
    out[key("searches", None)] = {"searches": sorted(everything, key=lambda s: -s.id), "next_before": None}
    out[key("results", None)] = [r for h in hashes for r in out[key("results", h)]]
    packed = {k: jsonable(v) for k, v in out.items()}
    table = packed["nodes"] = {}
    for request, v in packed.items():
        if request.startswith("step/"):
            table.update((n["id"], n) for n in v["nodes"])
            v["nodes"] = [n["id"] for n in v["nodes"]]
    return packed


def _packed(answers: dict[str, Any]) -> str:
    raw = json.dumps(answers, separators=(",", ":"), allow_nan=False).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def _script_text(code: str) -> str:
    """Text safe inside <script>...</script>: no '</script' ends it early. In the JS bundle the escaped form means
    the same ('<\\/' in a string or a regular expression is '</'); base64 and JSON here never contain it."""
    if "<!--" in code:  # would switch the HTML parser's script states; the build never emits it
        raise ValueError("the bundle contains '<!--', which cannot be inlined in a <script>")
    return code.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def fragment(answers: Answers, tids: Sequence[str], view: dict[str, Any] | None = None,
             height: str = f"{VIEW_HEIGHT}px", only: tuple[str, int] | None = None, widget: str | None = None) -> str:
    """The HTML of one static view of these traces (its own bundle and data), opened on `view` (the app's view
    state: tid, ci, pi, k, tab; default the first trace's first kernel), `height` tall; `only`: as answers_of;
    `widget`: the fallback id of the widget it stands in for (the live widget hides it)."""
    initial = json.dumps(view or {"tid": tids[0] if tids else None})
    of = f' data-widget="{html.escape(widget)}"' if widget else ""
    return (f'<div class="uopviz-static"{of} style="height:{html.escape(height)}">'
            f'<div class="uopviz-root" style="height:100%"></div>'
            f"<style>{_script_text(bundle.text('app.css'))}</style>"
            f'<script type="text/plain" class="uopviz-bundle">{_script_text(bundle.text("app.js"))}</script>'
            f'<script type="text/plain" class="uopviz-data">{_packed(answers_of(answers, tids, only))}</script>'
            f'<script type="application/json" class="uopviz-view">{_script_text(initial)}</script>'
            f"<script>{bundle.text('loader.js')}</script></div>")


def page(answers: Answers, tids: Sequence[str], title: str) -> str:
    """A whole HTML document: one static view filling the window."""
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{html.escape(title)} · uopviz</title><link rel="icon" href="data:,"></head>'
            f'<body class="uv-page">{fragment(answers, tids, height="100vh")}</body></html>')


def to_html(x: Any, path: str | os.PathLike[str] | None = None, *,
            db: str | os.PathLike[str] | None = None) -> str:
    """One self-contained HTML page showing what `x` records (as uopviz.show takes it: a Trace, a trace file, a
    Tensor, a kernel) read-only, with the finished BEAM searches of its kernels from `db` (default: the default
    tuning database). Written to `path` when given; returned either way."""
    store = TraceStore()
    st = stored(x, store)
    text = page(Answers(store, Path(db).resolve() if db is not None else None), [st.id], st.name)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
