"""Every search test gets its own cache directory: a tuning database and compiled kernels of its own, never the
user's ~/.cache/uopviz (which would answer searches and change what realize() compiles)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from uopviz.realize import forget_default_opts


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "cache"
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(path))
    monkeypatch.delenv("UOPVIZ_BEAM", raising=False)
    yield path
    forget_default_opts()  # decided against this test's database
