"""`python -m uopviz.backend.script_runner SCRIPT OUT FAILURE`: run SCRIPT as `__main__` under the recorder and save the
trace to OUT; if the script fails, write what failed to FAILURE as JSON and exit with status 1.

The server starts this in a child process (see `backend.recording.run_script`); the script sees the argv and
sys.path it would see when run as `python SCRIPT`. A failure is reported as data, never as a traceback: a
traceback quotes source lines, and the "script" may be any file the server can read.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import uopviz

MAX_MESSAGE = 1000  # characters of an exception's message that are reported


def failure(exc: BaseException, script: str) -> dict[str, Any]:
    """What a failure may tell: the exception's type, its message, and the line of the script it came from (the
    deepest frame in the script; for a SyntaxError in the script, its line). A SyntaxError's message is its `msg`
    alone: its text is the source line."""
    here = os.path.abspath(script)
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if os.path.abspath(frame.f_code.co_filename) == here:
            line = lineno
    if isinstance(exc, SyntaxError):
        if exc.filename is not None and os.path.abspath(exc.filename) == here:
            line = exc.lineno
        message = str(exc.msg)
    else:
        try:
            message = str(exc)
        except Exception:  # a __str__ that fails
            message = "(the message cannot be shown)"
    return {"type": type(exc).__name__, "message": message[:MAX_MESSAGE], "line": line}


def main(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m uopviz.backend.script_runner SCRIPT OUT FAILURE", file=sys.stderr)
        return 2
    script, out, failed = argv
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    with uopviz.trace.record() as tr:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                return _report(failure(e, script), failed)
        except BaseException as e:  # KeyboardInterrupt too: the script's, not this runner's
            return _report(failure(e, script), failed)
    tr.save(out)
    return 0


def _report(what: dict[str, Any], path: str) -> int:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(what, f)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
