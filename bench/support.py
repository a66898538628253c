"""What several bench scripts share: the example models as modules, a wall-clock timer of one call, and the Chromium
the UI benches drive. The scripts run as `python bench/NAME.py`, so this folder is on their path."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def example(name: str) -> Any:
    """examples/models/<name>.py as a module (kept in sys.modules, as dataclasses and pickling by name need)."""
    key = f"uopviz_examples_{name}"
    spec = importlib.util.spec_from_file_location(key, ROOT / "examples" / "models" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def timed(fn: Callable[[], Any]) -> float:
    """Seconds fn takes, once."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def find_chromium(script: str) -> str | None:
    """Debian's Chromium, which the UI benches drive with Playwright, or None once it has said that it is missing."""
    found = shutil.which("chromium")
    if found is None:
        print(f"bench/{Path(script).name} needs Chromium on PATH (apt-get install chromium)", file=sys.stderr)
    return found
