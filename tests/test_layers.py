"""The one-way dependencies between layers (docs/architecture.md), checked on every import statement, function-level
ones included: a lower layer that imports a higher one is how cycles come back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top; a module may import its own layer and those below. A module belongs to the longest prefix listed.
LAYERS: list[tuple[str, ...]] = [
    ("uopviz.dtype", "uopviz.version", "uopviz.hooks", "uopviz.settings",  # hooks: set above, called below
     "uopviz.callable_module"),                       # a package that is also its users' call (trace, profile)
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
    ("uopviz", "uopviz.kernels"),                      # the package's face, the zoo
    ("uopviz.cli", "uopviz.backend", "uopviz.widget"),  # the command line, the server, the notebook widget
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


# The folders that install as packages, and the names they install under (pyproject.toml's package-dir).
PACKAGES = {"uopviz": "uopviz", "backend": "uopviz.backend", "kernels": "uopviz.kernels"}


def _module(path: Path) -> str:
    folder, *parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join([PACKAGES[folder], *(parts[:-1] if parts[-1] == "__init__" else parts)])


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
    for path in _sources():
        module, here = _module(path), _layer(_module(path))
        for lineno, name in _imports(path):
            top = name.split(".")[0]
            there = _layer(name) if top == "uopviz" else (
                _layer(THIRD_PARTY_ABOVE[top]) if top in THIRD_PARTY_ABOVE else None)
            if here is not None and there is not None and there > here and \
                    not any(module == a and (name == b or name.startswith(b + ".")) for a, b in EXCEPTIONS):
                found.append(f"{path.relative_to(ROOT)}:{lineno}: {module} (layer {here}) imports {name} "
                             f"(layer {there})")
    return found


def _sources() -> list[Path]:
    return sorted(p for folder in PACKAGES for p in (ROOT / folder).rglob("*.py"))


def test_no_layer_imports_a_layer_above_it() -> None:
    assert _violations() == []


def test_the_folders_are_imported_by_their_installed_names() -> None:
    """backend/ and kernels/ install as uopviz.backend and uopviz.kernels: an import by the folder's name would work
    only from the repository root, and would load a second copy of the module beside the installed one."""
    scripts = [p for folder in ("tests", "bench", "examples") for p in (ROOT / folder).rglob("*.py")]
    old = [f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for path in [*_sources(), *scripts]
           for node in ast.walk(ast.parse(path.read_text(), str(path)))
           if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0)
           for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
           if name.split(".")[0] in ("backend", "kernels")]
    assert old == []


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
