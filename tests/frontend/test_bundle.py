"""The committed web UI bundle (backend/ui) is exactly what the committed sources build: `npm ci` and
`npm run build` in a copy of frontend/ (conftest.py), then a byte-for-byte comparison. Python users never run node,
so a source change without a rebuild would otherwise ship a stale UI."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import FrontendCopy

UI = Path(__file__).resolve().parents[2] / "backend" / "ui"
STALE = "backend/ui is stale: run npm run build in frontend/"


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_committed_bundle_is_what_the_sources_build(frontend_ci: FrontendCopy, tmp_path: Path) -> None:
    cmd = [frontend_ci.npm, "run", "build", "--", str(tmp_path / "dist")]
    run = subprocess.run(cmd, cwd=frontend_ci.path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{' '.join(cmd)} failed:\n{run.stdout}\n{run.stderr}"
    built, committed = files(tmp_path / "dist"), files(UI)
    differ = sorted(name for name in built.keys() | committed.keys() if built.get(name) != committed.get(name))
    assert not differ, f"{STALE} (these differ: {', '.join(differ)})"
