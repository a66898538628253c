"""Every compiler call has a time limit and is killed with its request (issue 28).

The C compiler is a process of its own already (cpu.run_compiler). OpenCL's and NVRTC's compilers are libraries,
which no time limit can stop in the process that calls them, so they run in a compile worker: one long-lived
process per process (runtime/compile_worker_main.py), in a process group of its own, that builds the program and
returns its binary (OpenCL's program binary, NVRTC's cubin or PTX) over a pipe. A request that runs past
`compile_timeout()` (UOPVIZ_COMPILE_TIMEOUT, the C compiler's limit too), or whose thread is interrupted (Ctrl-C,
a search's alarm), kills the worker's whole group, and the next request starts a new worker. A worker per kernel
would cost about a second each (Python, pyopencl, and the OpenCL compiler's own start-up: ~0.9 s under PoCL, where
a program builds in ~0.15 s); the persistent one pays that once.

`uopviz serve` kills every process under it on Ctrl-C (backend/serve.py kill_descendants), the worker included; a
request then waiting on it fails at once, and a later one starts a new worker.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from uopviz.runtime.compile_worker_main import FRAME, frame
from uopviz.runtime.cpu import CompileTimeoutError, compile_timeout
from uopviz.runtime.device import CompileError, DeviceError, DeviceUnavailableError

MAIN = Path(__file__).with_name("compile_worker_main.py")


class CompileWorkerError(DeviceError):
    """The compile worker failed outside the compiler (it could not open the device, or broke); the message says
    how."""


def timeout_message(compiler: str, timeout: float) -> str:
    """What a CompileTimeoutError says after the device and kernel: the same words for every compiler."""
    return (f"{compiler} ran past the compiler's time limit of {timeout:g} s and was killed (UOPVIZ_COMPILE_TIMEOUT "
            "sets the limit in seconds)")


class _Ended(Exception):
    """The worker closed its answer pipe (it died) before it answered."""


class CompileWorker:
    """This process's compile worker, started on first use and again after it was killed or died. Requests are
    taken one at a time (a lock): the time limit counts the compile, not the wait for an earlier one."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The running worker's process id, None before the first request and after a kill."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def compile(self, head: dict[str, Any], source: str, device: str, name: str, compiler: str,
                failures: Mapping[str, Callable[[str], DeviceError]] | None = None, shown: str | None = None) -> bytes:
        """The bytes the worker answers to request head (head["op"]: "cl" or "nvrtc") for source; an error shows
        `shown` (default: source) as the source that failed (a kernel's own text, not the unit built from it).

        CompileError with the compiler's log where the source does not compile; CompileTimeoutError past the
        limit; CompileError where the worker dies before it answers (the driver's compiler crashed, or Ctrl-C in
        `uopviz serve` killed it); DeviceUnavailableError where the worker cannot load the driver; a failure of
        another kind through failures (kind -> error), else CompileWorkerError."""
        timeout = compile_timeout()
        shown = source if shown is None else shown
        with self._lock:
            proc = self._started()
            try:
                answer, out = _exchange(proc, frame(head, source.encode()), time.monotonic() + timeout)
            except BaseException as e:  # past the limit, the worker gone, or this thread interrupted
                self._kill()
                if isinstance(e, TimeoutError):
                    raise CompileTimeoutError(device, name, shown, timeout_message(compiler, timeout)) from None
                if isinstance(e, _Ended):
                    raise CompileError(device, name, shown, f"{compiler} ended without an answer "
                                       f"({_how(proc.returncode)}): the compiler crashed, or the process was "
                                       "killed") from None
                raise
        if answer.get("ok"):
            return out
        kind, message = str(answer.get("kind")), str(answer.get("message"))
        if kind == "compile":
            raise CompileError(device, name, shown, message)
        if kind == "unavailable":
            raise DeviceUnavailableError(message)
        if failures and kind in failures:
            raise failures[kind](message)
        raise CompileWorkerError(f"{device}: the compile worker could not compile kernel {name}: {message}")

    def stop(self) -> None:
        """Kill the worker now, without waiting for a request in flight (which then fails as the worker ended)."""
        self._kill()

    def _started(self) -> subprocess.Popen[bytes]:
        proc = self._proc
        if proc is not None and not _ended(proc):
            return proc
        if proc is not None:  # it died between requests (serve's Ctrl-C kills it where it is idle too)
            self._kill()
        proc = subprocess.Popen([sys.executable, "-P", str(MAIN), str(os.getpid())], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, process_group=0, close_fds=True)
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)  # a write waits in select, under the time limit
        self._proc = proc
        return proc

    def _kill(self) -> None:
        """SIGKILL the worker's process group (the driver's helper processes, if any, with it) and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _ended(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the worker has ended: reaped, or its main thread a zombie while its other threads (the driver's)
    are still being torn down, which waitpid does not report yet (a killed idle worker, then a request at once)."""
    if proc.poll() is not None:
        return True
    try:
        return Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")
    except (OSError, IndexError):  # no /proc here (not Linux)
        return False


def _how(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
    return f"exit status {returncode}"


def _exchange(proc: subprocess.Popen[bytes], request: bytes, deadline: float) -> tuple[dict[str, Any], bytes]:
    """Write request to the worker and read its answer frame, both before deadline (TimeoutError otherwise);
    _Ended where the worker's pipes close first."""
    assert proc.stdin is not None and proc.stdout is not None
    wfd, rfd = proc.stdin.fileno(), proc.stdout.fileno()
    todo, got = memoryview(request), bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(rfd, selectors.EVENT_READ)
        sel.register(wfd, selectors.EVENT_WRITE)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            for key, _ in sel.select(left):
                if key.fd == wfd:
                    try:
                        todo = todo[os.write(wfd, todo):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        raise _Ended from None
                    if not todo:
                        sel.unregister(wfd)
                    continue
                chunk = os.read(rfd, 1 << 20)
                if not chunk:
                    raise _Ended
                got += chunk
                if len(got) >= FRAME.size:
                    head_len, payload_len = FRAME.unpack_from(got)
                    end = FRAME.size + head_len
                    if len(got) >= end + payload_len:
                        return json.loads(bytes(got[FRAME.size:end])), bytes(got[end:end + payload_len])


_WORKERS: dict[int, CompileWorker] = {}
_WORKERS_LOCK = threading.Lock()


def worker() -> CompileWorker:
    """This process's compile worker (keyed by process id: a forked child starts its own, never sharing its
    parent's pipes)."""
    with _WORKERS_LOCK:
        pid = os.getpid()
        if pid not in _WORKERS:
            _WORKERS[pid] = CompileWorker()
        return _WORKERS[pid]


@atexit.register
def _stop_at_exit() -> None:
    """An idle worker exits when its stdin closes; one that is compiling is killed here rather than left to finish."""
    w = _WORKERS.get(os.getpid())
    if w is not None:
        w.stop()
