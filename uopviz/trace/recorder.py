"""The recorder graph_rewrite reports to, and the context/stage state passes are filed under.

Recording must stay cheap, so the recorder only appends events (keeping references to the UOps and rules) to
its trace's log; ids, node entries and rule text are computed later, when the trace is read or saved.
`context()` and `stage()` set module state that costs nothing while no recorder is active.
"""

from __future__ import annotations

import functools
import importlib.util
import linecache
import os
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from uopviz.uop.ops import UOp
from uopviz.uop.pattern import Rule, current_recorder, recording

STACK_FRAMES = 12  # the innermost frames of the code that made a context that a trace keeps
_CODE_CHARS = 200


@dataclass(eq=False)
class Context:
    """One `context()` block (a schedule, a kernel, ...); two blocks of the same name stay apart. The name may
    be given once the block knows it (a kernel is named after its axes, which lowering decides)."""

    name: str
    kind: str
    opts: list[dict[str, Any]] = field(default_factory=list)  # a kernel's OptOps, as Opt.to_json() writes them
    stack: list[dict[str, Any]] = field(default_factory=list)  # where it was made: frames(), outermost first


def _library_dirs() -> tuple[str, ...]:
    """Where code that is not the user's lives: this package (the server, uopviz.backend, included: a checkout
    installs it from its own folder), the standard library and installed packages."""
    paths = sysconfig.get_paths()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the uopviz package
    dirs = {here, *(paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths),
            *_package_dirs("uopviz.backend")}
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs)


def _package_dirs(name: str) -> list[str]:
    """A package's folders, found without importing it (the trace layer sits below the server and the zoo)."""
    spec = importlib.util.find_spec(name)
    return list(spec.submodule_search_locations or []) if spec is not None else []


_LIBRARY = _library_dirs()
_ZOO = tuple(os.path.join(os.path.realpath(d), "") for d in _package_dirs("uopviz.kernels"))
"""The kernel zoo's folder: its kernels are programs written with uopviz, so their lines are the ones to show."""


@functools.cache
def user_file(filename: str) -> str | None:
    """The path of a code object's file as frames name it, or None for code that is not the user's (uopviz's, the
    standard library's, an installed package's, frozen modules'); the zoo's kernels count as the user's."""
    path = os.path.realpath(filename) if not filename.startswith("<") else filename
    if path.startswith(_ZOO):
        return path
    return None if path.startswith(_LIBRARY) or filename.startswith("<frozen") else path


def _shown(path: str) -> str:
    """A file as a person knows it: a notebook cell as IPython's tracebacks name it ("Cell In[3]": the kernel runs
    each cell from a file in a temporary folder), any other file relative to the working directory when under it."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if (name := getattr(getattr(shell, "compile", None), "format_code_name", lambda _: None)(path)) is not None:
        return " ".join(name)
    return path.removeprefix(os.path.join(os.getcwd(), ""))


def frames() -> list[dict[str, Any]]:
    """The frames of the running code outside uopviz, the standard library and installed packages (the user's
    script, notebook cell or program that asked for the work), outermost first, at most STACK_FRAMES of the
    innermost: each {"file", "line", "function", "code"}, the file as `_shown` names it."""
    out: list[dict[str, Any]] = []
    f: FrameType | None = sys._getframe(1)
    while f is not None and len(out) < STACK_FRAMES:  # innermost first; only the frames kept read their line
        if (path := user_file(f.f_code.co_filename)) is not None:
            out.append(frame_of(path, f.f_lineno or 0, f.f_code.co_name))
        f = f.f_back
    return out[::-1]


def user_line() -> tuple[str, int, str] | None:
    """The innermost frame of the user's code (as `frames()` chooses them) as (path, line, function), or None:
    cheap enough to ask on every kernel launch (a walk of frame objects, no source read; frames() reads it)."""
    f: FrameType | None = sys._getframe(1)
    while f is not None:
        if (path := user_file(f.f_code.co_filename)) is not None:
            return path, f.f_lineno, f.f_code.co_name
        f = f.f_back
    return None


def frame_of(path: str, line: int, function: str) -> dict[str, Any]:
    """A `user_line()` as `frames()` writes a frame: {"file", "line", "function", "code"}."""
    return {"file": _shown(path), "line": line, "function": function,
            "code": linecache.getline(path, line).strip()[:_CODE_CHARS]}


@dataclass(slots=True)
class PassBegin:
    name: str
    stage: str | None
    root: UOp
    context: Context
    t_ns: int


@dataclass(slots=True)
class PassEnd:
    output: UOp | None
    error: str | None
    t_ns: int


MAIN = Context("main", "main")
_context: Context = MAIN
_stage: str | None = None


@contextmanager
def context(name: str, kind: str = "kernel") -> Iterator[None]:
    """File the passes run inside this block under a context of this name (default context: "main"); while a
    trace records, the context keeps the frames of the code that opened it (`frames()`)."""
    global _context
    prev, _context = _context, Context(name, kind, stack=frames() if recording() else [])
    try:
        yield
    finally:
        _context = prev


def lowering() -> bool:
    """Whether a `context()` block is open: the compiler is lowering a schedule or a kernel, not running the
    user's front-end code."""
    return _context is not MAIN


def rename_context(name: str) -> None:
    """Name the current context (no-op outside a `context()` block)."""
    if _context is not MAIN:
        _context.name = name


def context_opts(opts: list[dict[str, Any]]) -> None:
    """Note the opts the current kernel context was lowered with, so a trace says how its kernel was optimized
    (no-op outside a `context()` block)."""
    if _context is not MAIN:
        _context.opts = list(opts)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Give passes run inside this block that name no stage of their own this stage (e.g. "Rangeify")."""
    global _stage
    prev, _stage = _stage, name
    try:
        yield
    finally:
        _stage = prev


@dataclass(slots=True)
class Profiled:
    """A finished `uopviz.profile()` block's document (format.check_profile), filed where it ended."""

    doc: dict[str, Any]


def file_profile(doc: dict[str, Any]) -> None:
    """File a profile's document into every trace recording now (the trace's `profiles`); none records: no-op."""
    rec = current_recorder()
    if isinstance(rec, Recorder):
        rec._add(Profiled(doc))


class Recorder:
    """Implements pattern.Recorder by appending to logs (one per trace recording; a trace opened inside another,
    as a script's own `with uopviz.trace()` under `uopviz serve`, records into both); a match is the plain tuple
    (rule, matched, new, ns)."""

    __slots__ = ("logs",)

    def __init__(self, logs: tuple[list[Any], ...]) -> None:
        self.logs = logs

    def _add(self, event: Any) -> None:
        for log in self.logs:
            log.append(event)

    def begin_pass(self, name: str, stage: str | None, root: UOp) -> None:
        self._add(PassBegin(name, _stage if stage is None else stage, root, _context, time.perf_counter_ns()))

    def on_match(self, rule: Rule, matched: UOp, replacement: UOp, time_ns: int) -> None:
        self._add((rule, matched, replacement, time_ns))

    def end_pass(self, output: UOp | None, error: BaseException | None) -> None:
        # the error is kept as text at once: the exception would pin its traceback's frames
        why = None if error is None else f"{type(error).__name__}: {error}"
        self._add(PassEnd(output, why, time.perf_counter_ns()))
