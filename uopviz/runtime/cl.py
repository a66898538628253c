"""The CL runtime: OpenCL through pyopencl, on one explicitly chosen device.

`UOPVIZ_CL_DEVICE` picks the device: "P:D" (platform and device index) or a case-insensitive part of its name;
by default the first GPU, else the first device of the first platform. One context and one in-order queue with
profiling, so a timed call reports the kernel's own device time rather than host overhead. Programs are compiled
in a compile worker process under the compilers' time limit (runtime/compile_worker.py) and loaded here from their
binaries.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from uopviz.dtype import DType, dtypes
from uopviz.renderer.dialect import OPENCL
from uopviz.runtime.compile_worker import worker
from uopviz.runtime.device import CompileError, DeviceUnavailableError, Runtime, UnknownDeviceError
from uopviz.runtime.source import check_source, exported, unit
from uopviz.target import Kernel, Target
from uopviz.uop.ops import Ops

INSTALL_HINT = ("the CL device needs pyopencl and an OpenCL driver: pip install 'uopviz[opencl]', and install a "
                "driver such as PoCL (apt-get install pocl-opencl-icd) or your GPU vendor's")


class CLRuntime(Runtime):
    """cl.Buffer memory and OpenCL C programs built from rendered source (cached by source text)."""

    def __init__(self, index: str | None = None) -> None:
        """`CL`: the device UOPVIZ_CL_DEVICE picks; `CL:i`: the i-th OpenCL device of all platforms; `CL:i.j`: the
        j-th sub-device of device i, split one compute unit each (where the driver can split it). Each is a context
        of its own, so buffers of two of them are separate memory."""
        try:
            import pyopencl as cl
        except ImportError as e:
            raise DeviceUnavailableError(f"pyopencl is not importable ({e}); {INSTALL_HINT}") from None
        self._cl = cl
        self.name = "CL" if index is None else f"CL:{index}"
        if index is None:
            self.device = _pick_device(cl, os.environ.get("UOPVIZ_CL_DEVICE", ""))
            self._where = next([p, d] for p, d, dev in _all_devices(cl) if dev == self.device)
        else:
            self.device = _indexed_device(cl, index)
            i, _, j = index.partition(".")
            self._where = [*_all_devices(cl)[int(i)][:2], *([int(j)] if j else [])]
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        exts = self.device.extensions.split()
        self.target = Target(self.name, dialect=OPENCL, native=frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT}),
                             global_dims=3, local_dims=3, max_local=self.device.max_work_group_size,
                             local_memory=self.device.local_mem_size,
                             emulated=frozenset({"bfloat16"} | ({"float16"} if "cl_khr_fp16" not in exts else set())),
                             vectors=frozenset({2, 4, 8, 16}), simt=bool(self.device.type & cl.device_type.GPU))
        self._programs: dict[str, Any] = {}

    def alloc(self, size: int, dtype: DType) -> Any:
        cl = self._cl
        return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(size, 1) * dtype.itemsize)

    def copyin(self, handle: Any, data: Any) -> None:
        data = np.ascontiguousarray(data)
        if data.size:
            self._cl.enqueue_copy(self.queue, handle, data)

    def copyout(self, handle: Any, size: int, dtype: DType) -> np.ndarray:
        out = np.empty(size, dtypes.storage_numpy(dtype))
        if size:
            self._cl.enqueue_copy(self.queue, out, handle, is_blocking=True)
        return out

    def compile(self, kernel: Kernel) -> CLProgram:
        if kernel.source is None:
            raise CompileError(self.name, kernel.name, "", "the kernel has no rendered OpenCL C source")
        prog = self._programs.get(kernel.source)
        if prog is None:
            check_source(kernel.source, self.name, kernel.name)
            prog = self._programs[kernel.source] = self._program({kernel.source: kernel.name}, kernel.name)
        entry = exported(kernel.source, kernel.name)
        try:
            knl = self._cl.Kernel(prog, entry)
        except self._cl.Error as e:
            raise CompileError(self.name, kernel.name, kernel.source, f"no kernel named {entry}: {e}") from None
        return CLProgram(self, kernel, knl)

    def libraries(self, kernels: Sequence[Kernel]) -> None:
        """Build the programs of kernels not built yet in as few compiler runs as may be: one program per set of
        extension pragmas (a kernel never compiles under another's), each kernel in it as `unit` writes it (its
        entry point and helpers named its own), which compile then takes each kernel from by name. Each program
        has a fixed cost in the compiler (PoCL: 10 small kernels took 2.4 s of CPU one by one, 0.8 s as one).
        A batch the compiler refuses is left alone: each of its kernels builds by itself in compile, and a bad one
        raises its own error then."""
        batches: dict[tuple[str, ...], dict[str, str]] = {}
        for kernel in kernels:
            source = kernel.source
            if source is None or source in self._programs:
                continue
            try:
                check_source(source, self.name, kernel.name)
            except CompileError:
                continue
            pragmas = tuple(line for line in source.splitlines() if line.startswith("#"))
            batches.setdefault(pragmas, {})[source] = kernel.name
        for members in batches.values():
            if len(members) < 2:
                continue  # built by compile, as it would be here
            try:
                prog = self._program(members, f"batch of {len(members)} kernels")
            except CompileError:
                continue
            for source in members:
                self._programs[source] = prog

    def _program(self, members: dict[str, str], name: str) -> Any:
        """The built cl.Program of members (checked source -> kernel name), each as `unit` writes it: compiled by
        the compile worker, then made here from its binary, which takes milliseconds. CompileError with the build
        log (showing the kernel's own source where it is one); CompileTimeoutError past the time limit."""
        text = "".join(unit(source, kernel) for source, kernel in members.items())
        shown = next(iter(members)) if len(members) == 1 else text
        binary = self._binary(text, name, shown)
        cl = self._cl
        try:
            with warnings.catch_warnings():  # a successful build's chatter is not the user's concern
                warnings.simplefilter("ignore", cl.CompilerWarning)
                return cl.Program(self.context, [self.device], [binary]).build()
        except cl.Error as e:
            raise CompileError(self.name, name, shown, f"the driver refused the program binary its own compiler "
                                                       f"made: {e}") from None

    def binary(self, source: str, name: str) -> bytes:
        """The driver's program binary of source for this device, built in this process's compile worker
        (runtime/compile_worker.py), where a compile that hangs or runs away is killed at the time limit or with
        its request. The source must be as the renderer writes it (UntrustedSourceError otherwise), so that the
        compiler reads no file the text names. CompileError with the build log where it does not compile."""
        check_source(source, self.name, name)
        return self._binary(source, name, source)

    def _binary(self, text: str, name: str, shown: str) -> bytes:
        """binary() of text trusted as it is (checked source, or units built from it); errors show `shown`."""
        head = {"op": "cl", "where": self._where,
                "device": [self.device.platform.name.strip(), self.device.name.strip()]}
        return worker().compile(head, text, self.name, name, "the OpenCL compiler", shown=shown)

    def synchronize(self) -> None:
        self.queue.finish()

    def describe(self) -> dict[str, str]:
        d = self.device
        return {"device": self.name, "name": d.name.strip(), "platform": d.platform.name.strip(),
                "driver": d.driver_version.strip(), "opencl": d.version.strip(),
                "compiler": d.platform.name.strip(), "compiler_version": d.platform.version.strip()}


class CLProgram:
    """A built kernel: `prog(handles, vals=(), wait=False)`; buffers by Param slot, then the vars as int32."""

    def __init__(self, runtime: CLRuntime, kernel: Kernel, knl: Any) -> None:
        self.runtime, self.kernel, self._knl = runtime, kernel, knl
        self._global = kernel.global_size or (1,)
        self._local = kernel.local_size

    def __call__(self, handles: Sequence[Any], vals: Sequence[int] = (), wait: bool = False) -> float | None:
        k, cl = self.kernel, self.runtime._cl
        if len(handles) != len(k.params) or len(vals) != len(k.vars):
            raise ValueError(f"kernel {k.name} takes {len(k.params)} buffers and vars {k.vars}, got "
                             f"{len(handles)} buffers and {len(vals)} values")
        self._knl.set_args(*handles, *(np.int32(v) for v in vals))
        event = cl.enqueue_nd_range_kernel(self.runtime.queue, self._knl, self._global, self._local)
        if not wait:
            return None
        event.wait()
        return (event.profile.end - event.profile.start) * 1e-9


def _all_devices(cl: Any) -> list[tuple[int, int, Any]]:
    """(platform index, device index, device) of every OpenCL device; DeviceUnavailableError where there is none."""
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        raise DeviceUnavailableError(f"no OpenCL platform found ({e}); {INSTALL_HINT}") from None
    found: list[tuple[int, int, Any]] = []
    for p, plat in enumerate(platforms):
        try:
            found += [(p, d, dev) for d, dev in enumerate(plat.get_devices())]
        except cl.Error:  # a platform with no devices (DEVICE_NOT_FOUND)
            continue
    if not found:
        raise DeviceUnavailableError(f"no OpenCL device found; {INSTALL_HINT}")
    return found


def _indexed_device(cl: Any, index: str) -> Any:
    """Device `i` of all platforms in order, or sub-device `j` of it for "i.j"; UnknownDeviceError saying what
    exists otherwise."""
    found = [dev for _, _, dev in _all_devices(cl)]
    listing = "; ".join(f"CL:{i} {dev.name.strip()} ({dev.max_compute_units} compute units)"
                        for i, dev in enumerate(found))
    i, _, j = index.partition(".")
    if int(i) >= len(found):
        raise UnknownDeviceError(f"there is no OpenCL device CL:{index}; the OpenCL devices here: {listing}")
    dev = found[int(i)]
    if not j:
        return dev
    try:
        subs = dev.create_sub_devices([cl.device_partition_property.EQUALLY, 1])
    except cl.Error as e:
        raise UnknownDeviceError(f"CL:{i} ({dev.name.strip()}) cannot be split into sub-devices ({e}); use CL:{i}") \
            from None
    if int(j) >= len(subs):
        raise UnknownDeviceError(f"there is no sub-device CL:{index}: CL:{i} splits into {len(subs)} "
                                 f"(CL:{i}.0 to CL:{i}.{len(subs) - 1}), one per compute unit")
    return subs[int(j)]


def _pick_device(cl: Any, choice: str) -> Any:
    """The device `choice` names ("P:D" or part of a name), or the default; DeviceUnavailableError otherwise."""
    found = _all_devices(cl)
    if not choice:
        gpus = [dev for _, _, dev in found if dev.type & cl.device_type.GPU]
        return gpus[0] if gpus else found[0][2]
    if m := re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", choice):
        hits = [dev for p, d, dev in found if (p, d) == (int(m[1]), int(m[2]))]
    else:
        hits = [dev for _, _, dev in found if choice.strip().lower() in dev.name.lower()]
    if not hits:
        listing = "; ".join(f"{p}:{d} {dev.name.strip()} ({dev.platform.name.strip()})" for p, d, dev in found)
        raise DeviceUnavailableError(f"UOPVIZ_CL_DEVICE={choice!r} matches no OpenCL device; set it to one of "
                                     f"these (\"P:D\" or part of the name): {listing}")
    return hits[0]
