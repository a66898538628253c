"""Every search test gets its own cache directory: a tuning database and compiled kernels of its own, never the
user's ~/.cache/uopviz (which would answer searches and change what realize() compiles). The opts realize()
chooses are cached per database file, so each test's choices are its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "cache"
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(path))
    monkeypatch.delenv("UOPVIZ_BEAM", raising=False)
    yield path
