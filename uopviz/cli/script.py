"""A user's script run in this process as `python script.py` would run it: what `uopviz beam script.py` tunes and
`uopviz profile script.py` profiles; and what the commands that run the user's programs share (their errors, how
they report one, their positive-integer arguments)."""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path


class UsageError(ValueError):
    """What the user asked for does not exist or does not fit (exit status 2)."""


class ProgramError(RuntimeError):
    """The user's program failed to import or to build its Tensor (exit status 1)."""


def run_script(script: str, device: str, args: Sequence[str] = ()) -> None:
    """Run the script as `__main__`, with the argv and sys.path[0] `python script.py *args` gives it and `device` as
    the default device; UsageError if there is no such file, ProgramError if it fails or exits with a nonzero
    status."""
    path = Path(script)
    if not path.is_file():
        raise UsageError(f"no file {script!r}")
    argv, sys_path0 = sys.argv, sys.path[0]
    sys.argv, sys.path[0] = [str(path), *args], str(path.resolve().parent)
    try:
        with default_device(device):
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise ProgramError(f"{script} exited with status {e.code}") from None
    except Exception as e:
        raise ProgramError(f"{script} failed: {type(e).__name__}: {e}") from None
    finally:
        sys.argv, sys.path[0] = argv, sys_path0


@contextlib.contextmanager
def default_device(device: str) -> Iterator[None]:
    """The user's program runs with `device` as the default (UOPVIZ_DEVICE), restored after."""
    prev = os.environ.get("UOPVIZ_DEVICE")
    os.environ["UOPVIZ_DEVICE"] = device
    try:
        yield
    finally:
        if prev is None:
            del os.environ["UOPVIZ_DEVICE"]
        else:
            os.environ["UOPVIZ_DEVICE"] = prev


def fail(e: BaseException, status: int) -> int:
    """Report an error as `uopviz: message` on stderr; the exit status to return."""
    print(f"uopviz: {e}", file=sys.stderr)
    return status


def positive(text: str) -> int:
    """An argument that is an integer >= 1 (a beam width, a number of rounds, of rows shown)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return n
