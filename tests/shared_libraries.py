"""A test's own cache folder whose compiled libraries are shared: `cpu/` (libraries keyed by source, compiler and
flags, so sharing never answers with another kernel) links to one folder of the pytest process, while the tuning
database and the lowered kernels stay the test's own. The search tests and the browser tests' zoo servers built the
same libraries again for each test or module (tests/search: 427 -> 178 C compiler runs)."""

from __future__ import annotations

from pathlib import Path


def cache_with_shared_libraries(cache: Path, libraries: Path) -> Path:
    """cache, made (private to this user), with its cpu/ linking to libraries (made too where it is not)."""
    libraries.mkdir(mode=0o700, parents=True, exist_ok=True)
    cache.mkdir(mode=0o700)
    (cache / "cpu").symlink_to(libraries, target_is_directory=True)
    return cache
