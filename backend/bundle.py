"""Where the built web UI is (backend/ui: committed, and installed with the backend package) and its files as
text: the server serves them, the notebook widget and static exports (uopviz.widget) inline them. No web framework
here."""

from __future__ import annotations

from functools import cache
from pathlib import Path

DIST = Path(__file__).resolve().parent / "ui"
BUILD = "cd frontend && npm ci && npm run build"


class BundleMissing(FileNotFoundError):
    """The built UI is not there (a source checkout that was never built)."""


@cache
def text(name: str) -> str:
    """A file of the bundle (app.js, app.css, loader.js): read once per process."""
    path = DIST / name
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BundleMissing(f"the web UI bundle has no {path}: build it ({BUILD})") from None
