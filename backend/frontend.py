"""Serving the built web UI (backend/ui), or a page that says how to build it when it is missing."""

from __future__ import annotations

import html
from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, Response
from uopviz.backend.bundle import DIST

__all__ = ["DIST", "mount"]


MISSING = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>uopviz: UI bundle missing</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>uopviz</h1>
<p>The server is running, but the web UI bundle is missing: there is no <code>{index}</code>.</p>
<p>Build it (needs Node.js): <code>cd frontend &amp;&amp; npm ci &amp;&amp; npm run build</code>, then reload.</p>
<p>The JSON API works without it: <a href="/api/traces">/api/traces</a>; its documentation is at
<a href="/docs">/docs</a>.</p>
</body></html>
"""


def mount(app: FastAPI, dist: Path) -> None:
    """`/` is the bundle's index.html and `/<file>` its files; add after the API routes, which match first.

    The directory is looked up per request, so a bundle built while the server runs is served on reload.
    """

    @app.get("/", include_in_schema=False)
    def index() -> Response:
        page = dist / "index.html"
        if page.is_file():
            return FileResponse(page)
        return HTMLResponse(MISSING.format(index=html.escape(str(page))))

    @app.get("/{path:path}", include_in_schema=False)
    def asset(path: str) -> Response:
        root = dist.resolve()
        try:
            f = (root / path).resolve()
            found = not path.startswith("api/") and f.is_relative_to(root) and f.is_file()
        except (OSError, ValueError):  # a name too long for the file system; a NUL byte
            found = False
        if not found:
            raise HTTPException(404, f"no such file or route: /{path[:200]}")
        return FileResponse(f)
