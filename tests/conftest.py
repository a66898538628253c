"""Suite-wide isolation: tests never read or write the user's cache (compiled kernels, tuning database), and an
exported UOPVIZ_BEAM never starts searches, so every test sees realize's defaults: no tuning results, the
heuristic's opts. With UOPVIZ_REQUIRE_CL set (CI sets it) a machine without an OpenCL device fails at once. The
`device` fixture runs a test on every runtime (a test or folder may parametrize its own). Modules run slowest first
(pytest_collection_modifyitems), so that the workers end together."""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterator

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("UOPVIZ_REQUIRE_CL"):
        from devices_here import HAS_CL
        if not HAS_CL:
            raise pytest.UsageError("UOPVIZ_REQUIRE_CL is set but no OpenCL device starts here: the CL tests would "
                                    "all skip (install PoCL: ./dev setup as root does)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules that hold a `slow` test (a browser, a notebook kernel, mypy: up to a minute or more each) first, then
    the others by their number of tests, most first; each module's tests stay together and in order. xdist
    (--dist loadfile, --no-loadscope-reorder) hands out modules in this order: its own order (by number of tests
    alone) left the browser modules, few tests each, to the end, where one worker ran them while the other idled."""
    modules = [item.nodeid.split("::")[0] for item in items]
    count = Counter(modules)
    slow = {m for m, item in zip(modules, items, strict=True) if item.get_closest_marker("slow")}
    order = {m: (m not in slow, -n) for m, n in count.items()}
    items[:] = [item for _, item in sorted(zip(modules, items, strict=True), key=lambda mi: order[mi[0]])]


@pytest.fixture(params=["CPU", "CL", "PYTHON"])
def device(request: pytest.FixtureRequest) -> str:
    """Each runtime in turn, CL skipped only where no OpenCL device starts."""
    from devices_here import HAS_CL
    if request.param == "CL" and not HAS_CL:
        pytest.skip("no OpenCL device here")
    return str(request.param)


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
