"""`python -m backend.script_runner SCRIPT OUT`: run SCRIPT as `__main__` under the recorder, save the trace to OUT.

The server starts this in a child process (see `backend.recording.run_script`); the script sees the argv and
sys.path it would see when run as `python SCRIPT`.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence

import uopviz


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m backend.script_runner SCRIPT OUT", file=sys.stderr)
        return 2
    script, out = argv
    sys.argv = [script]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    with uopviz.trace() as tr:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                raise
    tr.save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
