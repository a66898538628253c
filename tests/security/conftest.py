"""What the security tests share: a small trace file, and `uopviz serve` started with a browser to open
(recorded_browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from recorded_browser import Opened, serve_with_browser
from uopviz.backend.recording import record_zoo


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "max.uopviz-trace.json"
    record_zoo("max", small=True).save(path)
    return path


@pytest.fixture
def opened(trace_file: Path, tmp_path: Path) -> Iterator[Opened]:
    """serve_with_browser for one test."""
    with serve_with_browser(trace_file, tmp_path) as o:
        yield o
