"""The one-way dependencies between layers (docs/architecture.md), checked on every import statement, function-level
ones included: a lower layer that imports a higher one is how cycles come back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top; a module may import its own layer and those below. A module belongs to the longest prefix listed.
LAYERS: list[tuple[str, ...]] = [
    ("uopviz.dtype", "uopviz.version", "uopviz.hooks", "uopviz.settings"),  # hooks: set above, called below
    ("uopviz.uop",),                                   # the IR
    ("uopviz.trace",),                                 # recording (uop.pattern reaches it only through a hook)
    ("uopviz.renderer.dialect", "uopviz.target"),      # what codegen may know of a device: descriptions only
    ("uopviz.runtime.device", "uopviz.runtime.buffer", "uopviz.runtime.pool"),  # the registry, buffer storage
    ("uopviz.schedule",),                              # Callify, the kernel split, the memory plan
    ("uopviz.codegen",),                               # one kernel's passes, OptOps, the heuristic
    ("uopviz.renderer",),                              # source from Linear programs
    ("uopviz.runtime",),                               # the runtimes behind the registry
    ("uopviz.pipeline",),                              # the order of every pass
    ("uopviz.compiler",),                              # lowering + compiling, the program cache
    ("uopviz.search", "uopviz.lowered_cache"),         # BEAM, timing, the tuning database, the opts policy (which
                                                       # keeps the heuristic's choices on disk with lowered kernels)
    ("uopviz.realize", "uopviz.parallel", "uopviz.tune"),  # running programs, compiling them side by side, tuning
                                                           # every kernel of a step
    ("uopviz.tensor",),                                # the front-end
    ("uopviz", "kernels"),                             # the package's face, the zoo
    ("uopviz.cli", "backend", "uopviz.widget"),        # the command line, the server, the notebook widget
]
EXCEPTIONS = {  # (importer, imported): why it may
    ("uopviz.runtime.device", "uopviz.runtime.builtin"): "the registry loads the built-in runtimes on first use",
    ("uopviz", "uopviz.widget"): "uopviz.show() is the widget's face, imported when called",
    ("uopviz.trace.model", "uopviz.widget"): "Trace.to_html() and a trace shown as a cell's value, on use",
    ("uopviz.tensor.tensor", "uopviz.widget"): "Tensor.viz() and Tensor.beam(), on use",
    ("uopviz.tensor.tensor", "uopviz.profile"): "Tensor.profile(), on use",
}
THIRD_PARTY_ABOVE = {"fastapi": "uopviz.cli", "pydantic": "uopviz.cli", "uvicorn": "uopviz.cli",
                     "starlette": "uopviz.cli", "anywidget": "uopviz.cli", "ipywidgets": "uopviz.cli",
                     "traitlets": "uopviz.cli", "IPython": "uopviz.cli"}  # `import uopviz` stays light: only the faces



def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[0]):
                best = (len(p), i)
    return None if best is None else best[1]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the package
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
            out += [(node.lineno, f"{base}.{a.name}" if base else a.name) for a in node.names]
    return out


def _violations() -> list[str]:
    found = []
    for path in sorted([*(ROOT / "uopviz").rglob("*.py"), *(ROOT / "kernels").rglob("*.py"),
                        *(ROOT / "backend").rglob("*.py")]):
        module, here = _module(path), _layer(_module(path))
        for lineno, name in _imports(path):
            top = name.split(".")[0]
            there = _layer(name) if top in ("uopviz", "kernels", "backend") else (
                _layer(THIRD_PARTY_ABOVE[top]) if top in THIRD_PARTY_ABOVE else None)
            if here is not None and there is not None and there > here and \
                    not any(module == a and (name == b or name.startswith(b + ".")) for a, b in EXCEPTIONS):
                found.append(f"{path.relative_to(ROOT)}:{lineno}: {module} (layer {here}) imports {name} "
                             f"(layer {there})")
    return found


def test_no_layer_imports_a_layer_above_it() -> None:
    assert _violations() == []


@pytest.mark.parametrize("package", ["search", "codegen", "schedule"])
def test_nothing_below_realize_imports_it(package: str) -> None:
    """Realize chooses opts through search, never the reverse: no search, codegen or schedule module imports it."""
    for path in (ROOT / "uopviz" / package).rglob("*.py"):
        names = [n for _, n in _imports(path)]
        assert not [n for n in names if n == "uopviz.realize" or n.startswith("uopviz.realize.")], path


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    """A module of a low layer importing a higher one is reported (the check can fail)."""
    assert _layer("uopviz.codegen.expand") < _layer("uopviz.realize")
    assert _layer("uopviz.renderer.dialect") < _layer("uopviz.codegen") < _layer("uopviz.renderer.cstyle")
