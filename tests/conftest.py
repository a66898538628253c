"""Suite-wide isolation: tests never read or write the user's cache (compiled kernels, tuning database), and an
exported UOPVIZ_BEAM never starts searches, so every test sees realize's defaults: no tuning results, the
heuristic's opts."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("UOPVIZ_CACHE_DIR", "UOPVIZ_BEAM")}
    with tempfile.TemporaryDirectory(prefix="uopviz-test-cache-") as d:
        os.environ["UOPVIZ_CACHE_DIR"] = d
        os.environ.pop("UOPVIZ_BEAM", None)
        yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
