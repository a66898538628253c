"""The type checker over the package as it installs: uopviz, with the server and the kernel zoo under it as
uopviz.backend and uopviz.kernels (pyproject's package-dir). The editable install maps those through an import hook,
which mypy does not follow, so the check runs over a tree of links laid out as the wheel is (.mypy-tree/, kept
between runs with mypy's cache). The configuration is in pyproject.toml; every module checks clean, and each
`# type: ignore` left in place names its error codes and says why on its line."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / ".mypy-tree"


def _link_tree() -> Path:
    """TREE/uopviz: a link to each entry of uopviz/, and to each folder pyproject maps under it."""
    mapped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    links = {e.name: e for e in (ROOT / "uopviz").iterdir() if e.name != "__pycache__"}
    links.update({name.removeprefix("uopviz."): ROOT / folder for name, folder in mapped.items()})
    pkg = TREE / "uopviz"
    pkg.mkdir(parents=True, exist_ok=True)
    for old in pkg.iterdir():
        if old.name not in links or old.resolve() != links[old.name]:
            old.unlink()
    for name, target in links.items():
        if not (pkg / name).is_symlink():
            (pkg / name).symlink_to(target)
    return TREE


@pytest.mark.slow  # a minute: run first (tests/conftest.py), not last, where one worker would run it alone
def test_mypy_finds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    api = pytest.importorskip("mypy.api")
    monkeypatch.chdir(_link_tree())
    # mypy run in-process raises the recursion limit for good (to 2**14): the tests of deeply nested input that this
    # worker runs later (a trace, a tuning database) must meet Python's own limit, as a user's process does
    limit = sys.getrecursionlimit()
    try:
        out, err, status = api.run(["-p", "uopviz", "--config-file", str(ROOT / "pyproject.toml"),
                                    "--python-executable", sys.executable, "--cache-dir", str(TREE / ".mypy_cache"),
                                    "--no-error-summary"])
    finally:
        sys.setrecursionlimit(limit)
    assert status == 0, (out.replace(f"uopviz{os.sep}backend{os.sep}", "backend/")
                         .replace(f"uopviz{os.sep}kernels{os.sep}", "kernels/") + err)


# `# type: ignore[codes]  # why`: the codes, then a comment giving the reason.
JUSTIFIED = re.compile(r"#\s*type:\s*ignore\[[\w\-, ]+\]\s+#\s*\S")


def test_every_ignore_says_why() -> None:
    bare = []
    for folder in ("uopviz", "backend", "kernels"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"type:\s*ignore", line) and not JUSTIFIED.search(line):
                    bare.append(f"{rel}:{n}: {line.strip()}")
    assert not bare, "ignores without `[codes]  # why`:\n" + "\n".join(bare)
