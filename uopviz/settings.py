"""Settings read from the environment, one parser each, so every `UOPVIZ_*` variable refuses a bad value alike."""

from __future__ import annotations

import os


def env_count(name: str, default: int, what: str) -> int:
    """The integer >= 0 in environment variable `name` (unset or blank: default); ValueError naming the variable,
    `what` it counts and the text given, for anything else."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise ValueError(f"{name} must be {what} (an integer >= 0), got {text!r}")
    return n
