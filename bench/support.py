"""What several bench scripts share: the example models as modules, a wall-clock timer of one call, timing rivals
in turns (`measure`), and the Chromium the UI benches drive. The scripts run as `python bench/NAME.py`, so this
folder is on their path."""

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


def measure(runners: dict[str, Callable[[], Any]], repeats: int, budget_s: float = 3.0,
            burst: int = 3, settle_s: float = 0.15) -> dict[str, list[float]]:
    """Seconds per run of each runner, timed in turns: each round runs every runner, in turn, untimed for
    `settle_s` and then `burst` times timed. Drift hits them alike, and a runner is timed neither while the threads
    the one before it left spinning (OpenBLAS's spin for about 0.1 s after a call, OpenMP's too) still take a core,
    nor on cores gone idle (a worker thread that slept is slow to wake on a virtual machine: after 10 ms idle a
    two-core gemm 512 took 1.6 ms instead of 1.0). Fewer rounds (at least 5) once a case has spent its time budget
    on timed runs."""
    samples: dict[str, list[float]] = {k: [] for k in runners}
    spent = 0.0
    for r in range(repeats):
        for k, fn in runners.items():
            t0 = time.perf_counter()
            fn()
            while time.perf_counter() - t0 < settle_s:
                fn()
            got = [timed(fn) for _ in range(burst)]
            samples[k] += got
            spent += sum(got)
        if r >= 4 and spent > budget_s:
            break
    return samples


def find_chromium(script: str) -> str | None:
    """Debian's Chromium, which the UI benches drive with Playwright, or None once it has said that it is missing."""
    found = shutil.which("chromium")
    if found is None:
        print(f"bench/{Path(script).name} needs Chromium on PATH (apt-get install chromium)", file=sys.stderr)
    return found
