"""The suite's own pytest options (pyproject's addopts): a test worker that crashes (a segfault in a compiled kernel)
ends the run, its test reported failed by name. With xdist's worker restarts (its default) the run hung instead: the
crashed worker's finished module was queued again and handed to its replacement with nothing to run, which then never
asked for more."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADDOPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]

MODULES = {  # run in this order: the long one on one worker; the short one, then the crash, on the other
    "test_1_long.py": "import time\n\n\ndef test_long():\n    time.sleep(1)\n",
    "test_2_short.py": "def test_short():\n    pass\n",
    "test_3_crash.py": "import ctypes\n\n\ndef test_before():\n    pass\n\n\ndef test_crash():\n"
                       "    ctypes.string_at(0)\n\n\ndef test_after():\n    pass\n",
}


def test_a_crashed_worker_ends_the_run_naming_its_test(tmp_path: Path) -> None:
    for name, text in MODULES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text(f"[pytest]\naddopts = {ADDOPTS.replace('-n auto', '-n 2')}\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # this run needs xdist alone
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-p", "xdist", "-p", "no:cacheprovider"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the run hung after the crash:\n{e.stdout!r}") from None
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED test_3_crash.py::test_crash" in run.stdout and "crashed while running" in run.stdout
