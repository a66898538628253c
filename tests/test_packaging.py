"""What installs: one top-level package, uopviz, with the server (backend/) and the kernel zoo (kernels/) under it
as uopviz.backend and uopviz.kernels, so installing uopviz beside a project with its own `backend` breaks neither."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folder(package: str) -> Path:
    """Where a package's modules live in the repository, by pyproject's package-dir."""
    for name, folder in sorted(CONFIG["package-dir"].items(), key=lambda kv: -len(kv[0])):
        if package == name or package.startswith(name + "."):
            return ROOT / folder / Path(*package[len(name) + 1:].split(".") if package != name else ())
    return ROOT / Path(*package.split("."))


def test_every_package_in_the_tree_is_listed() -> None:
    """The package list is explicit (discovery cannot rename a folder): a new subpackage must be added to it."""
    listed = set(CONFIG["packages"])
    folders = {_folder(p) for p in listed}
    found = {d for top in ("uopviz", "backend", "kernels") for d in [ROOT / top, *(ROOT / top).rglob("*")]
             if d.is_dir() and any(d.glob("*.py")) and "__pycache__" not in d.parts}
    assert found - folders == set(), "folders with modules that pyproject.toml's packages leave out"
    assert all((_folder(p)).is_dir() for p in listed)


@pytest.mark.skipif(shutil.which("git") is None, reason="the wheel is built from the tracked files")
def test_the_wheel_installs_uopviz_alone(tmp_path: Path) -> None:
    """Built from the tracked files alone (a stale build/ folder would add what is no longer there)."""
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "uopviz",
                            "backend", "kernels"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src),
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("uopviz-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"uopviz", wheel.name.split("-py3")[0] + ".dist-info"}
    assert {"uopviz/backend/app.py", "uopviz/kernels/zoo.py", "uopviz/backend/ui/index.html"} <= set(names)
