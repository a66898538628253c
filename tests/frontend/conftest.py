"""The frontend's tests work on a copy of frontend/ with its locked dependencies installed (`npm ci`), so that what
they check is what package-lock.json pins, not whatever a developer's node_modules holds. The copy is made once per
test run: the pytest-xdist workers of a run share it (the first to need it makes it, under a lock)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"

try:
    import fcntl
except ImportError:  # no flock (Windows): each worker makes its own copy
    fcntl = None  # type: ignore[assignment]


class FrontendCopy(NamedTuple):
    npm: str  # the npm to run its scripts with
    path: Path  # the copy: its sources, build script, configs, tests and lock file, and node_modules


@pytest.fixture(scope="session")
def frontend_ci(tmp_path_factory: pytest.TempPathFactory) -> FrontendCopy:
    """A copy of frontend/ after `npm ci`; skips without npm. Tests only read it: they build into a directory of
    their own."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("needs npm (Node.js) to build and check the frontend")
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER") and fcntl is not None:
        root = root.parent  # this run's temporary directory, which every worker's is in
    work, done, failed = root / "frontend-ci", root / "frontend-ci.done", root / "frontend-ci.failed"
    with open(root / "frontend-ci.lock", "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.exists():
            pytest.fail(failed.read_text(), pytrace=False)
        if not done.exists():
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(FRONTEND, work, ignore=shutil.ignore_patterns("node_modules", "dist"))
            cmd = [npm, "ci", "--no-audit", "--no-fund"]
            run = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600)
            if run.returncode != 0:
                failed.write_text(f"{' '.join(cmd)} failed in a copy of frontend/:\n{run.stdout}\n{run.stderr}")
                pytest.fail(failed.read_text(), pytrace=False)
            done.touch()
    return FrontendCopy(npm, work)
