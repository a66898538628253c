"""Every search test gets its own cache directory: a tuning database of its own, never the user's ~/.cache/uopviz
(which would answer searches and change what realize() compiles). The opts realize() chooses are cached per database
file, so each test's choices are its own. The compiled libraries (`cpu/`, keyed by source, compiler and flags) are
shared by the search tests of a pytest process: the searches build the same candidates of the same zoo kernels, and
compiling them again for each test took most of test_beam's C compiler time (229 of its 364 compiler runs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_libraries import cache_with_shared_libraries


@pytest.fixture(scope="session")
def _search_libraries(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("search-libraries")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, _search_libraries: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = cache_with_shared_libraries(tmp_path / "cache", _search_libraries)
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(path))
    monkeypatch.delenv("UOPVIZ_BEAM", raising=False)
    yield path
