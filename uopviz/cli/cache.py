"""`uopviz cache ls|show|clear|export|import`: look into, empty and move the tuning database (search.db).

Exit codes: 0 done, 1 the database or a file could not be used (one line on stderr, no traceback), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from uopviz.search.db import Candidate, SearchInfo, TuningDB, TuningDBError, UnreadableDBError, default_path


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `cache` and its subcommands on the `uopviz` command line."""
    db_opt = argparse.ArgumentParser(add_help=False)
    db_opt.add_argument("--db", metavar="PATH", type=Path,
                        help="the database (default: $UOPVIZ_CACHE_DIR/tuning.db, else ~/.cache/uopviz/tuning.db)")
    cache = subparsers.add_parser("cache", help="list, show, clear, export or import the tuning database")
    sub = cache.add_subparsers(dest="cache_command", required=True)
    sub.add_parser("ls", parents=[db_opt], help="the best opts found per kernel and device").set_defaults(fn=cmd_ls)
    show = sub.add_parser("show", parents=[db_opt], help="one search and its candidates, round by round")
    show.add_argument("id", type=int, help="the search id (`cache ls` lists them)")
    show.add_argument("--ast", action="store_true", help="also print the kernel's AST")
    show.set_defaults(fn=cmd_show)
    clear = sub.add_parser("clear", parents=[db_opt], help="delete every search and result")
    clear.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    clear.set_defaults(fn=cmd_clear)
    export = sub.add_parser("export", parents=[db_opt], help="write everything as one JSON document")
    export.add_argument("file", help="where to write it (- for stdout)")
    export.set_defaults(fn=cmd_export)
    imp = sub.add_parser("import", parents=[db_opt], help="merge an exported document (importing twice is harmless)")
    imp.add_argument("file", help="the document (- for stdin)")
    imp.set_defaults(fn=cmd_import)


def _reported(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report a database or file failure as one line and exit status 1."""
    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (TuningDBError, OSError) as e:
            print(f"uopviz: {e}", file=sys.stderr)
            return 1
    return run


@_reported
def cmd_ls(args: argparse.Namespace) -> int:
    with TuningDB(args.db) as db:
        results, searches = db.results(), db.searches()
    if results:
        rows = [(str(r.search_id or "-"), r.kernel_name, _device(r.key.device, r.key.device_name),
                 _duration(r.median_s), _opts(r.opts, 48), _date(r.created_at), r.measured_on or "-") for r in results]
        _table(("search", "kernel", "device", "median", "opts", "tuned", "measured on"), rows, right=(0, 3))
    running = sum(s.status == "running" for s in searches)
    print(f"{len(results)} results, {len(searches)} searches ({running} unfinished) in {db.path}")
    return 0


@_reported
def cmd_show(args: argparse.Namespace) -> int:
    with TuningDB(args.db) as db:
        s = db.search(args.id)
        if s is None:
            print(f"uopviz: no search {args.id} in {db.path} (`uopviz cache ls` lists them)", file=sys.stderr)
            return 1
        cands, ast = db.candidates(s.id), db.kernel_ast(s.key.kernel_hash) if args.ast else None
    _show_search(s, cands)
    if ast is not None:
        print(f"\nkernel AST:\n{ast}")
    return 0


def _show_search(s: SearchInfo, cands: list[Candidate]) -> None:
    k = s.key
    print(f"search {s.id}: {s.kernel_name} on {_device(k.device, k.device_name)}, {s.status}"
          + (f" ({s.error})" if s.error else ""))
    for label, value in (("kernel", k.kernel_hash), ("compiler", f"{k.compiler} [{k.compiler_version}]"),
                         ("driver", k.driver or "-"), ("versions", f"uopviz {k.uopviz_version}, action space "
                                                                    f"{k.action_space_version}"),
                         ("params", json.dumps(s.params)), ("started", _date(s.started_at)),
                         ("finished", _date(s.finished_at) if s.finished_at else "-")):
        print(f"  {label:9s}{value}")
    if s.best_candidate_id is not None and s.best_median_s is not None:
        print(f"  {'best':9s}candidate {s.best_candidate_id}, {_duration(s.best_median_s)}")
    rows, last_round = [], None
    for c in cands:  # by round: the round is named on its first row
        rows.append((str(c.round) if c.round != last_round else "",
                     ("* " if c.id == s.best_candidate_id else "") + str(c.id), str(c.parent_id or "-"),
                     _duration(c.median_s) if c.median_s is not None else "-", str(len(c.samples)),
                     _duration(c.compile_s) if c.compile_s is not None else "-",
                     str(c.uop_count) if c.uop_count is not None else "-", c.measured_on or "-",
                     _opts(c.opts, 200) + (f"  error: {c.error.splitlines()[0][:80]}" if c.error else "")))
        last_round = c.round
    if rows:
        _table(("round", "id", "parent", "median", "runs", "compile", "uops", "measured on", "opts"), rows,
               right=(0, 1, 2, 3, 4, 5, 6))


@_reported
def cmd_clear(args: argparse.Namespace) -> int:
    path = args.db or default_path()
    if not path.exists():
        print(f"nothing to clear: there is no database at {path}")
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            print(f"uopviz: `cache clear` deletes every search and result in {path}; pass --yes to confirm",
                  file=sys.stderr)
            return 2
        if input(f"delete every search and result in {path}? [y/N] ").strip().lower() not in ("y", "yes"):
            print("nothing deleted")
            return 1
    try:
        with TuningDB(path) as db:
            n = db.counts()
            db.clear()
    except UnreadableDBError:  # the way out its message promised: the file goes, a fresh one comes on next use
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        print(f"deleted {path}: it was not a readable tuning database")
        return 0
    print(f"cleared {path}: deleted {n['searches']} searches and {n['results']} results")
    return 0


@_reported
def cmd_export(args: argparse.Namespace) -> int:
    with TuningDB(args.db) as db:
        doc = db.export_doc()
    text = json.dumps(doc, indent=1) + "\n"
    if args.file == "-":
        sys.stdout.write(text)
    else:
        Path(args.file).write_text(text)
    n_cands = sum(len(s["candidates"]) for s in doc["searches"])
    print(f"exported {len(doc['searches'])} searches ({n_cands} candidates) and {len(doc['results'])} results "
          f"to {args.file}", file=sys.stderr if args.file == "-" else sys.stdout)
    return 0


@_reported
def cmd_import(args: argparse.Namespace) -> int:
    name = "stdin" if args.file == "-" else args.file
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        print(f"uopviz: {name} is not JSON ({e})", file=sys.stderr)
        return 1
    except RecursionError:
        print(f"uopviz: {name} is not a valid uopviz tuning export: its JSON is nested too deeply", file=sys.stderr)
        return 1
    with TuningDB(args.db) as db:
        try:
            n = db.import_doc(doc)
        except ValueError as e:
            print(f"uopviz: {name} is not a valid uopviz tuning export: {e}", file=sys.stderr)
            return 1
        except RecursionError:  # a value (opts, params) nested deeper than JSON text can be written back
            print(f"uopviz: {name} is not a valid uopviz tuning export: a value in it is nested too deeply",
                  file=sys.stderr)
            return 1
    print(f"imported {n['searches']} searches ({n['candidates']} candidates) and {n['results']} results from "
          f"{name}; {n['skipped']} searches were already there")
    return 0


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]], right: tuple[int, ...] = ()) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        cells = [v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))]
        print("  ".join(cells).rstrip())


def _device(device: str, name: str) -> str:
    return f"{device} ({name})" if name else device


def _duration(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms" if s < 1 else f"{s:.3f} s"


def _date(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _opts(opts: Any, width: int) -> str:
    """Opts in one line: `OP key=value ...` for each {"op": ...} object, JSON for anything else."""
    if opts == []:
        return "(none)"
    parts = []
    for o in opts if isinstance(opts, list) else [opts]:
        if isinstance(o, dict) and "op" in o:
            parts.append(" ".join([str(o["op"]), *(f"{k}={json.dumps(v, separators=(',', ':'))}"
                                                   for k, v in o.items() if k != "op")]))
        else:
            parts.append(json.dumps(o, separators=(",", ":")))
    text = "; ".join(parts)
    return text if len(text) <= width else text[: width - 1] + "…"
