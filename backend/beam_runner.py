"""The child process that runs one BEAM search for the server (`python -m uopviz.backend.beam_runner`).

Its first line on stdin is the request (JSON: trace, node, device, width, max_rounds, db); it writes progress
events (see uopviz.search.beam.Progress) and a last `done` or `error` event as JSON lines on stdout. The end of
stdin (the server stops the search, or has died) interrupts the search as Ctrl-C would: what it measured stays
in the database, and running the same search again resumes it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

Emit = Callable[[dict[str, Any]], None]


def _interrupt_when_stdin_ends() -> None:
    """Ctrl-C for the main thread (a signal to the process could land in this thread and wake no wait)."""
    sys.stdin.read()
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def run(request: dict[str, Any], emit: Emit) -> int:
    """Search as asked, reporting to emit; the exit status."""
    import uopviz
    from uopviz.runtime.device import DeviceError
    from uopviz.search.beam import BeamError, beam
    from uopviz.search.db import SearchBusyError, TuningDBError
    from uopviz.trace import TraceFormatError
    from uopviz.uop.bounds import KernelBoundsError

    def fail(kind: str, detail: str, code: int = 1) -> int:
        emit({"event": "error", "kind": kind, "detail": detail})
        return code

    try:
        ast = uopviz.trace.load(request["trace"]).uop(request["node"])
        r = beam(ast, request["width"], request["device"], db=request["db"], max_rounds=request["max_rounds"],
                 force=True, progress=emit, wait=False)
    except KeyboardInterrupt:
        return fail("interrupted", "the search was stopped; what it measured is stored, and running it again "
                                   "resumes it", 130)
    except SearchBusyError as e:
        return fail("busy", str(e))
    except TuningDBError as e:
        return fail("database", str(e))
    except (BeamError, DeviceError, TraceFormatError, KernelBoundsError) as e:
        return fail("kernel", f"cannot search this kernel on {request['device']}: {e}")
    except Exception as e:  # a bug: reported as the search's end, not left for the server to guess
        return fail("failed", f"{type(e).__name__}: {e}")
    emit({"event": "done", "search_id": r.search_id, "name": r.name, "opts": [o.to_json() for o in r.opts],
          "time_s": r.time_s, "unoptimized_s": r.unoptimized_s, "heuristic_s": r.heuristic_s, "rounds": r.rounds,
          "candidates": r.candidates})
    return 0


def main() -> int:
    request = json.loads(sys.stdin.readline())
    events = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever else writes to stdout (a compiler, a worker) goes to stderr, not into the events
    threading.Thread(target=_interrupt_when_stdin_ends, daemon=True).start()

    def emit(event: dict[str, Any]) -> None:
        events.write(json.dumps(event) + "\n")
        events.flush()

    return run(request, emit)


if __name__ == "__main__":
    sys.exit(main())
