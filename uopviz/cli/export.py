"""`uopviz export TRACE -o trace.html`: one self-contained HTML file that shows a saved trace read-only in any
browser, offline (the UI bundle and the trace's answers inline; see uopviz.widget.export), with the finished BEAM
searches of its kernels from the tuning database.

Exit codes: 0 written; 2 the trace cannot be read (no such file, not a trace) or the output cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `export` on the `uopviz` command line."""
    p = subparsers.add_parser("export", help="write a saved trace as one self-contained, offline HTML page",
                              description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("trace", metavar="TRACE", help="a saved .uopviz-trace.json")
    p.add_argument("-o", "--out", type=Path, default=None,
                   help="the HTML file to write (default: beside TRACE, its name ending .uopviz-trace.html, which "
                        "the repository's .gitignore ignores as it does traces)")
    p.add_argument("--db", metavar="PATH", type=Path,
                   help="the tuning database (default: $UOPVIZ_CACHE_DIR/tuning.db, else ~/.cache/uopviz/tuning.db)")
    p.set_defaults(fn=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from uopviz.backend.recording import RecordError
    from uopviz.widget.export import to_html

    source = Path(args.trace)
    out = args.out or source.with_name(source.name.removesuffix(".json").removesuffix(".uopviz-trace")
                                       + ".uopviz-trace.html")
    try:
        text = to_html(source, db=args.db)
        out.write_text(text, encoding="utf-8")
    except (FileNotFoundError, RecordError, IsADirectoryError, PermissionError) as e:
        print(f"uopviz: {e}", file=sys.stderr)
        return 2
    print(f"uopviz: wrote {out} ({len(text.encode()) / 1e3:.0f} kB)")
    return 0
