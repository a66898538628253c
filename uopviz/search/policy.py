"""Which opts a kernel gets when its caller gives none (what realize() compiles): the tuning database's best for
the kernel on its device if it has one (so tuning once speeds every later run), else, with UOPVIZ_BEAM=N, a BEAM
search of width N (stored for next time), else the hand-written heuristic's.

The choice is made once per kernel, device and state of the database: the cache is keyed by the database file's
path and modification times, so a search that finishes (in this process or another) is seen by the next call
without anyone being told. A database that does not exist is not created; one that cannot be used is reported
once on stderr and skipped. The database is the default one (`default_path`), or inside `reading(path)` that one:
a @jit step tuned into another database is captured again with what its tuning stored there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from uopviz import lowered_cache
from uopviz.codegen.opt import KernelOptError, Opt
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.pipeline import scheduler
from uopviz.runtime import device as devices
from uopviz.search.db import TuningDB, TuningDBError, default_path
from uopviz.search.keys import cache_key
from uopviz.settings import env_count
from uopviz.uop.ops import UOp
from uopviz.uop.pattern import unrecorded

_chosen: dict[tuple[UOp, str, str, tuple[int, ...]], tuple[Opt, ...]] = {}
_warned: set[str] = set()
_reading: list[Path] = []  # reading() blocks' databases, innermost last


@contextmanager
def reading(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Inside the block kernels get their opts from the database at path (None: the default one)."""
    _reading.append(Path(path) if path is not None else default_path())
    try:
        yield
    finally:
        _reading.pop()


def database_path() -> Path:
    """The database default_opts reads: the innermost reading() block's, else the default one."""
    return _reading[-1] if _reading else default_path()


def default_opts(ast: UOp, device: str) -> tuple[Opt, ...]:
    """The opts a kernel gets on device when none are given: tuned, searched (UOPVIZ_BEAM) or the heuristic's."""
    path = database_path()
    key = (ast, device, str(path), _version(path))
    if key not in _chosen:
        with unrecorded():
            opts = _tuned_opts(ast, device, path)
            if opts is None and (width := beam_width()):
                opts = _searched_opts(ast, device, path, width)
            if opts is None:
                target = devices.get(device).target
                opts = lowered_cache.heuristic_opts(ast, device, target,
                                                    lambda: tuple(heuristic_opts(scheduler(ast, target))))
        _chosen[key] = opts
    return _chosen[key]


def tuning_state() -> tuple[str, tuple[int, ...], int]:
    """What default_opts' choice depends on besides the kernel and device: the database (its path and version) and
    UOPVIZ_BEAM's width. Whoever keeps programs compiled with default opts (realize's schedule cache) keeps them
    only while this stays the same, so a tune or a search is seen by the next realize."""
    env = (os.environ.get("UOPVIZ_CACHE_DIR"), os.environ.get("HOME"),  # what default_path() depends on
           _reading[-1] if _reading else None)
    if (paths := _state_paths.get(env)) is None:
        path = str(database_path())
        paths = _state_paths[env] = (path, f"{path}-wal")
    return (paths[0], tuple(_mtime(p) for p in paths), beam_width())


_state_paths: dict[tuple[str | None, str | None, Path | None], tuple[str, str]] = {}


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def beam_width() -> int:
    """`UOPVIZ_BEAM`: the width of the search realize runs for kernels not tuned yet (0 or unset: none)."""
    return env_count("UOPVIZ_BEAM", 0, "a beam width")


def _version(path: Path) -> tuple[int, ...]:
    """What changes whenever the database does: the modification times of the file and its write-ahead log."""
    out = []
    for p in (path, Path(f"{path}-wal")):
        try:
            out.append(p.stat().st_mtime_ns)
        except OSError:
            out.append(0)
    return tuple(out)


def _tuned_opts(ast: UOp, device: str, path: Path) -> tuple[Opt, ...] | None:
    """The database's opts for the kernel on device, if the file exists, answers, and they still apply."""
    if not path.exists():
        return None
    try:
        with TuningDB(path) as db:
            hit = db.lookup(cache_key(ast, device))
    except TuningDBError as e:
        _warn_once(f"uopviz: not using the tuning database: {e}")
        return None
    if hit is None:
        return None
    try:
        if not isinstance(hit.opts, list):
            raise KernelOptError(f"opts must be a list, got {hit.opts!r}")
        opts = tuple(Opt.from_json(o) for o in hit.opts)
        s = scheduler(ast, devices.get(device).target)
        for o in opts:
            s = s.apply_opt(o)
    except KernelOptError as e:
        _warn_once(f"uopviz: ignoring stored opts for a {device} kernel in {path}: {e}")
        return None
    return opts


def _searched_opts(ast: UOp, device: str, path: Path, width: int) -> tuple[Opt, ...] | None:
    """A BEAM search's opts for the kernel (None where it cannot be searched: realize goes on without)."""
    from uopviz.search.beam import BeamError, beam
    try:
        return beam(ast, width, device, db=path).opts
    except (TuningDBError, BeamError) as e:
        _warn_once(f"uopviz: UOPVIZ_BEAM search skipped: {e}")
        return None


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(message, file=sys.stderr)
