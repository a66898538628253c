"""The frontend's own checks, run on a copy of frontend/ with its locked dependencies (conftest.py): ESLint
(`npm run lint`, no warning allowed), TypeScript's checker over the JavaScript (`npm run typecheck`) and the unit
tests of its modules (`npm test`, Node's test runner, frontend/test/)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import FrontendCopy

pytestmark = pytest.mark.slow  # npm: about a minute in all

OUTPUT_CHARS = 20_000  # of a failing check's output, the end (where the summary is)


@pytest.mark.parametrize("script", ["lint", "typecheck", "test"])
def test_frontend_check_passes(frontend_ci: FrontendCopy, script: str) -> None:
    cmd = [frontend_ci.npm, "run", script]
    run = subprocess.run(cmd, cwd=frontend_ci.path, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        output = f"{run.stdout}\n{run.stderr}".strip()
        pytest.fail(f"{' '.join(cmd)} failed (exit {run.returncode}):\n{output[-OUTPUT_CHARS:]}", pytrace=False)
