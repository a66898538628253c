"""The compile worker's own side: a process that builds OpenCL programs and runs NVRTC for its parent
(runtime/compile_worker.py starts it), so that a compile that hangs or runs away can be killed, as the C compiler is.

It is run as a script (`python -P compile_worker_main.py PARENT_PID`), not as `-m uopviz.runtime...`: it imports
only the standard library and, on first use, pyopencl or NVIDIA's bindings, so it starts in a fifth of the time
`import uopviz` would add. Requests and answers are length-prefixed frames on stdin and stdout: a JSON header and
raw bytes (the kernel's source in, the program binary out), never pickle. Whatever a driver prints goes to stderr.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import sys
import threading
import time
import warnings
from typing import Any

FRAME = struct.Struct(">II")
"""A frame's prefix: the JSON header's length, then the payload's, in bytes."""

PARENT_POLL_S = 0.5
"""How often the worker looks whether its parent still lives: a parent that died mid-compile (kill -9) cannot kill
its worker's group, and the worker reads its closed stdin only between compiles."""


class Failure(Exception):
    """A request that failed in a way the parent names: kind is "compile" (message: the compiler's log),
    "unavailable" (no driver or compiler here), "device" (no such device) or "cuda" (an NVRTC call failed)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


class Builders:
    """The drivers' compilers, each loaded on first use; OpenCL contexts kept per device (one costs ~30 ms)."""

    def __init__(self) -> None:
        self._contexts: dict[tuple[int, ...], tuple[Any, Any]] = {}

    def run(self, head: dict[str, Any], payload: bytes) -> bytes:
        op = head.get("op")
        if op == "cl":
            return self.cl(head, payload.decode())
        if op == "nvrtc":
            return nvrtc(head, payload)
        raise ValueError(f"unknown request {op!r}")

    def cl(self, head: dict[str, Any], source: str) -> bytes:
        """The program binary of source built for the device head["where"] names ([platform, device] or
        [platform, device, sub-device], as the parent found it), checked to be the one the parent named."""
        try:
            import pyopencl as cl
        except ImportError as e:
            raise Failure("unavailable", f"pyopencl is not importable in the compile worker ({e})") from None
        where = tuple(int(i) for i in head["where"])
        if where not in self._contexts:
            dev = _cl_device(cl, where)
            self._contexts[where] = (cl.Context([dev]), dev)
        ctx, dev = self._contexts[where]
        found = [dev.platform.name.strip(), dev.name.strip()]
        if found != head["device"]:
            raise Failure("device", f"OpenCL device {list(where)} is {found} in the compile worker, not "
                                    f"{head['device']} as in its parent")
        prog = cl.Program(ctx, source)
        try:
            with warnings.catch_warnings():  # a successful build's chatter is not the user's concern
                warnings.simplefilter("ignore", cl.CompilerWarning)
                prog.build()
        except cl.Error as e:
            try:
                log = prog.get_build_info(dev, cl.program_build_info.LOG)
            except cl.Error:
                log = str(e)
            raise Failure("compile", log or str(e)) from None
        binaries = prog.get_info(cl.program_info.BINARIES)  # one per device the program was built for: ours
        assert isinstance(binaries, list)
        return bytes(binaries[0])


def _cl_device(cl: Any, where: tuple[int, ...]) -> Any:
    try:
        dev = cl.get_platforms()[where[0]].get_devices()[where[1]]
        if len(where) > 2:
            dev = dev.create_sub_devices([cl.device_partition_property.EQUALLY, 1])[where[2]]
    except (IndexError, cl.Error) as e:
        raise Failure("device", f"the compile worker finds no OpenCL device {list(where)} ({e})") from None
    return dev


def nvrtc(head: dict[str, Any], source: bytes) -> bytes:
    """source compiled by NVRTC for head["arch"]: the cubin, or with head["ptx"] the PTX for compute_NN."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise Failure("unavailable", f"cuda.bindings is not importable in the compile worker ({e})") from None
    arch = str(head["arch"])
    target = arch.replace("sm_", "compute_") if head.get("ptx") else arch
    opts = [f"--gpu-architecture={target}".encode(), *(str(f).encode() for f in head.get("flags", []))]

    def ok(err: Any, call: str) -> None:
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise Failure("cuda", f"{call} failed: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")

    err, prog = nvrtc.nvrtcCreateProgram(source, f"{head['name']}.cu".encode(), 0, [], [])
    ok(err, "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise Failure("compile", log.decode(errors="replace").rstrip("\x00 "))
        get_size, get = (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if head.get("ptx") else \
            (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        err, size = get_size(prog)
        ok(err, get_size.__name__)
        out = b" " * size
        (err,) = get(prog, out)
        ok(err, get.__name__)
        return out
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def read_exact(fd: int, n: int) -> bytes | None:
    """n bytes from fd; None at an end of file before the first byte (the parent closed the pipe: exit)."""
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got:
                raise EOFError("the request ended mid-frame")
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def frame(head: dict[str, Any], payload: bytes) -> bytes:
    text = json.dumps(head).encode()
    return FRAME.pack(len(text), len(payload)) + text + payload


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def main(argv: list[str]) -> int:
    """Answer requests until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it kills this process's group
    requests, answers = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        os.dup2(2, 1)  # a driver that prints to stdout must not corrupt the answers
    except OSError:  # no stderr
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    threading.Thread(target=_watch_parent, args=(int(argv[1]),), daemon=True).start()
    builders = Builders()
    while (prefix := read_exact(requests, FRAME.size)) is not None:
        head_len, payload_len = FRAME.unpack(prefix)
        head = json.loads(read_exact(requests, head_len) or b"{}")
        payload = (read_exact(requests, payload_len) or b"") if payload_len else b""
        answer: dict[str, Any]
        try:
            answer, out = {"ok": True}, builders.run(head, payload)
        except Failure as f:
            answer, out = {"ok": False, "kind": f.kind, "message": f.message}, b""
        except Exception as e:  # the parent reports it; the worker serves the next request
            answer, out = {"ok": False, "kind": "error", "message": f"{type(e).__name__}: {e}"}, b""
        data = memoryview(frame(answer, out))
        while data:
            data = data[os.write(answers, data):]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
