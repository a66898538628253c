"""The check a loaded trace's kernels get: none may read or write outside its buffers.

A trace file is data anyone can edit, and its kernel contexts are what "time it" and BEAM run: a Range bound
raised past its buffer would run compiled code off the end of memory. Compiling checks every kernel anyway
(uopviz.compiler); refusing such a file at load says so before anything is opened in the UI, in the words of the
format's own error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from uopviz.trace.errors import TraceFormatError
from uopviz.uop.bounds import KernelBoundsError, check_bounds
from uopviz.uop.ops import UOp


class _Pass(Protocol):  # read-only members: a TracePass, or anything holding these
    @property
    def depth(self) -> int: ...
    @property
    def input(self) -> str: ...


class _Context(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def passes(self) -> Sequence[_Pass]: ...


def check_kernels(contexts: Sequence[_Context], uop: Callable[[str], UOp]) -> None:
    """TraceFormatError where a kernel context's graph (its first pass's input, which timing and BEAM start from)
    may access memory outside a buffer. A graph that cannot be rebuilt is left to its readers, which say so."""
    for ci, c in enumerate(contexts):
        first = next((p for p in c.passes if p.depth == 0), None) if c.kind == "kernel" else None
        if first is None:
            continue
        try:
            ast = uop(first.input)
        except TraceFormatError:
            continue
        try:
            check_bounds(ast, c.name)
        except KernelBoundsError as e:
            raise TraceFormatError(f"context {ci}: {e}; its recorded bounds do not fit its buffers") from None
