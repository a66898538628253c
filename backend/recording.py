"""Where served traces come from: a zoo kernel lowered under the recorder, a saved trace file, or a script run
under the recorder in a child process.

Every trace is turned into its document and read back, so a served trace holds node ids and entries only (no
live UOps or buffers) and behaves exactly like one loaded from a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from uopviz.backend.models import ScriptOutput

import uopviz
from uopviz.trace import Trace, TraceFormatError

if TYPE_CHECKING:
    from uopviz.codegen.opt import Opt
    from uopviz.target import Kernel
    from uopviz.trace import TraceContext
    from uopviz.uop.ops import UOp

SCRIPT_TIMEOUT_S = 120.0
OUTPUT_KEEP = 64 * 1024  # bytes of a script's stdout, and of its stderr, that a trace keeps

# The recorder and the trace context are process-wide: two lowerings at once would file their passes into
# each other's traces, so everything the server lowers takes this lock.
LOWERING = threading.Lock()


class RecordError(ValueError):
    """A trace could not be made from what was asked for; the message names the file or kernel and why."""


class SourceMismatchError(RecordError):
    """A kernel's stored Source is not what the renderer makes of its Linear program (an edited trace, or one made
    by another renderer). Stored text could carry anything a compiler reads (`#include "/etc/passwd"`, a FIFO), so
    a trace that disagrees is refused rather than compiled or shown as if it were the kernel's."""


def detached(tr: Trace) -> Trace:
    """The trace as its document reads back: ids and entries only, no live UOps, no link to a recorder."""
    return Trace.from_dict(tr.to_dict())


def record_zoo(name: str, device: str | None = None, small: bool = False) -> Trace:
    """Lower every kernel of a zoo program (without running it) under the recorder, with the opts realize() would
    use (the tuning database's, else the heuristic's; each kernel context lists them).

    The inputs are unallocated buffers: the program is built and lowered, never run, so recording the whole
    zoo at its benchmark sizes takes about a second and no memory for data.
    """
    from uopviz.kernels import get

    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.runtime.device import DeviceError
    from uopviz.search.policy import default_opts
    from uopviz.tensor import Tensor

    try:
        z = get(name)
    except KeyError as e:
        raise RecordError(e.args[0]) from None
    sizes = z.sizes(small=small)
    try:
        with LOWERING:
            out = z.program(*[Tensor.empty(*i.shape(sizes), dtype=i.dtype, device=device) for i in z.inputs])
            with uopviz.trace.record() as tr:
                for ast, bufs in kernels_of(schedule([out.uop])):
                    compile_kernel(ast, bufs[0].arg.device, default_opts(ast, bufs[0].arg.device))
    except DeviceError as e:
        raise RecordError(f"zoo kernel {name!r}: {e}") from None
    return detached(tr)


def record_opts(ast: UOp, device: str, opts: Sequence[Opt]) -> tuple[Trace, Kernel]:
    """Lower and compile a kernel with opts under the recorder: a trace of that kernel's lowering alone, and
    the kernel. KernelOptError (a ValueError) says why an opt is illegal."""
    from uopviz.compiler import compile_kernel
    from uopviz.runtime.device import DeviceError

    try:
        with LOWERING, uopviz.trace.record() as tr:
            kernel, _ = compile_kernel(ast, device, opts)
    except DeviceError as e:
        raise RecordError(f"cannot lower this kernel for {device}: {e}") from None
    return detached(tr), kernel


def load_file(path: str | os.PathLike[str]) -> Trace:
    """A saved trace; FileNotFoundError if there is no such file, RecordError if it is not a trace we read."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{path}: no such trace file")
    try:
        tr = uopviz.trace.load(p)
    except (TraceFormatError, OSError) as e:
        raise RecordError(f"{path}: {e}") from None
    check_sources(tr, str(path))
    return tr


def run_script(path: str | os.PathLike[str], timeout: float = SCRIPT_TIMEOUT_S) -> tuple[Trace, ScriptOutput]:
    """Run a script under the recorder in a child process (`backend.script_runner`): its trace and what it printed
    (the first OUTPUT_KEEP bytes of stdout and of stderr).

    A child keeps the server safe from the script: one that hangs is stopped after `timeout` seconds, one
    that crashes or changes process state (cwd, globals, caches) cannot take the server with it. A failure is told
    by what the runner reports (type, message, line), never by its output: a Python that cannot run the file (a
    "script" that is not Python) would quote its lines there, and the server may read files it must not show.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{path}: no such script")
    with tempfile.TemporaryDirectory(prefix="uopviz-script-") as tmp:
        out, failed = Path(tmp) / "trace.uopviz-trace.json", Path(tmp) / "failure.json"
        stdout, stderr = Path(tmp) / "stdout", Path(tmp) / "stderr"
        try:
            with stdout.open("wb") as o, stderr.open("wb") as e:
                r = subprocess.run([sys.executable, "-m", "uopviz.backend.script_runner", str(p.resolve()), str(out),
                                    str(failed)], stdin=subprocess.DEVNULL, stdout=o, stderr=e, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RecordError(f"{path}: the script did not finish within {timeout:g} s") from None
        if r.returncode != 0:
            raise RecordError(f"{path}: the script failed: {_failure(failed, r.returncode)}")
        (text_out, cut_out), (text_err, cut_err) = _head(stdout), _head(stderr)
        tr = uopviz.trace.load(out)
        check_sources(tr, str(path))  # the script may have written the trace file itself
        return tr, ScriptOutput(stdout=text_out, stderr=text_err, truncated=cut_out or cut_err)


def _head(path: Path) -> tuple[str, bool]:
    """The first OUTPUT_KEEP bytes of a file as text, and whether there was more."""
    with path.open("rb") as f:
        data = f.read(OUTPUT_KEEP + 1)
    return data[:OUTPUT_KEEP].decode("utf-8", errors="replace"), len(data) > OUTPUT_KEEP


def _failure(report: Path, code: int) -> str:
    """The runner's account of a failure ("ZeroDivisionError: division by zero (line 3)"), or the exit status."""
    try:
        what = json.loads(report.read_text(encoding="utf-8"))
        kind, message, line = what["type"], what["message"], what["line"]
    except (OSError, ValueError, TypeError, KeyError):
        return f"its process ended with exit status {code} without saying why"
    return f"{kind}: {message}" + (f" (line {line})" if line is not None else "")


@dataclass(frozen=True)
class Rendered:
    """A kernel context's source as the renderer makes it from the trace's Linear program, beside the text the trace
    stores for it. name: the kernel's (the renderer checked it is an identifier); device: what it was rendered for."""

    name: str
    device: str
    source: str
    stored: str


def rendered(tr: Trace, c: TraceContext, device: str | None = None) -> Rendered | None:
    """A kernel context's source rendered again from its Linear program for the device its Params name (else
    `device`), as the Render pass made it; None where the context has no rendered program. DeviceError where that
    device is not here; RecordError where the program cannot be rebuilt or rendered."""
    from uopviz.renderer.cstyle import render
    from uopviz.runtime import device as devices
    from uopviz.uop.ops import Ops

    out = next((p.output for p in reversed(c.passes) if p.name == "render"), None)
    prog = None if out is None else tr.node(out)
    first = next((p for p in c.passes if p.depth == 0), None)
    if prog is None or prog["op"] != Ops.PROGRAM.value or len(prog["src"]) != 2 or first is None:
        return None
    try:
        linear, ast = tr.uop(prog["src"][0]), tr.uop(first.input)
        slots = {x.arg.slot: x.arg.dtype for x in ast.toposort() if x.op is Ops.PARAM}
        params = tuple(slots[k] for k in range(len(slots)))
        named = next((x.arg.device for x in linear.src if x.op is Ops.PARAM and isinstance(x.arg.device, str)), None)
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # TraceFormatError, SpecError are ValueErrors
        raise RecordError(f"kernel {c.name}: its Linear program cannot be rebuilt: {e}") from None
    if (on := named or device) is None:
        raise RecordError(f"kernel {c.name} names no device to render it for")
    target = devices.get(on).target
    try:
        text = render(linear, str(prog["arg"]), target.dialect, params, target.emulated) if target.dialect else ""
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # RenderError is a ValueError
        raise RecordError(f"kernel {c.name}: its Linear program cannot be rendered for {on}: {e}") from None
    return Rendered(str(prog["arg"]), on, text, str(tr.node(prog["src"][1])["arg"] or ""))


def check_sources(tr: Trace, what: str) -> None:
    """SourceMismatchError unless every kernel's stored Source is what its Linear program renders to here (a kernel
    whose device is not here can be neither rendered nor compiled here, so it is not checked)."""
    from uopviz.runtime.device import DeviceError

    try:
        for c in tr.contexts:
            if c.kind != "kernel":
                continue
            try:
                made = rendered(tr, c)
            except DeviceError:
                continue
            if made is not None and made.source != made.stored:
                raise SourceMismatchError(f"{what}: kernel {c.name}: its stored Source is not what the renderer makes "
                                          "of its Linear program (the trace was edited, or made by another renderer); "
                                          "uopviz compiles only source it renders itself")
    finally:
        tr.forget_uops()  # every kernel rebuilt to render it: kept, a sixth of a big trace's memory again
