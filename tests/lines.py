"""Source lines in tests that check where uopviz says work came from (provenance, profiles, trace frames)."""

from __future__ import annotations

import inspect


def here() -> int:
    """The line of the code that calls this (`here() + 1` is the line after it)."""
    frame = inspect.currentframe()
    assert frame is not None and frame.f_back is not None
    return frame.f_back.f_lineno
