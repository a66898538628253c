"""A kernel on its device: its time, measured as BEAM measures a candidate (uopviz.search.timing.Workbench), and its
machine code (objdump of the CPU library; the OpenCL driver's program binary, as text where it is text, or the
machine code of the ELF it holds, as PoCL's does)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from uopviz.backend.models import MachineCode, OptSpec, TimingView, Work
from uopviz.backend.recording import LOWERING, RecordError

from uopviz.codegen.opt import KernelOptError, Opt
from uopviz.runtime import device as devices
from uopviz.runtime.cl import CLRuntime
from uopviz.runtime.cpu import CPURuntime
from uopviz.runtime.device import DeviceError
from uopviz.uop.bounds import KernelBoundsError
from uopviz.uop.ops import UOp
from uopviz.uop.pattern import unrecorded

OBJDUMP_TIMEOUT_S = 30.0
_SYMBOL = re.compile(r"^[0-9a-f]+ <(.+)>:$")


class TimingError(ValueError):
    """A kernel that cannot be timed on its device (it fails to build or run, or gives a wrong answer)."""


def time_kernel(ast: UOp, device: str, opts: Sequence[Opt], work: Work) -> TimingView:
    """Run the kernel (as scheduled: `ast`) lowered with `opts` on `device`: buffers of random data, a first run
    checked against the unoptimized kernel's answer, then timed runs (their median), with GFLOP/s and GB/s from
    `work`. Compiling must not be recorded into a trace another request is recording, so it holds LOWERING."""
    from uopviz.compiler import compile_kernel
    from uopviz.search.timing import Workbench, describe_error

    try:
        with LOWERING, unrecorded():
            bench = Workbench(ast, device)
            timing = bench.measure(bench.bind(*compile_kernel(ast, device, list(opts))), None)
    except (DeviceError, KernelOptError, KernelBoundsError) as e:
        raise TimingError(f"cannot time this kernel on {device}: {describe_error(e)}") from None
    t = timing.median_s
    if t is None:
        raise TimingError(f"the kernel did not run right on {device}: {timing.error}")
    return TimingView(device=device, opts=[OptSpec(**o.to_json()) for o in opts], time_s=t, samples=timing.samples,
                      gflops=work.flops / t / 1e9 if work.flops is not None and t > 0 else None,
                      gbs=work.bytes / t / 1e9 if work.bytes is not None and t > 0 else None)


def machine_code(source: str, name: str, device: str) -> MachineCode:
    """The machine code of a rendered kernel on its device (any CPU:i or CL:i alike: the runtime decides, not the
    name), or why there is none to show."""
    try:
        rt = devices.get(device)
    except DeviceError as e:
        raise RecordError(f"no machine code for {name}: {e}") from None
    if isinstance(rt, CPURuntime):
        return _cpu(rt, source, name)
    if isinstance(rt, CLRuntime):
        return _cl(rt, source, name)
    return MachineCode(device=device, kind="none", text="",
                       note=f"the {device} device interprets the Linear program: there is no machine code")


def _cpu(rt: CPURuntime, source: str, name: str) -> MachineCode:
    try:
        lib = rt.library(source, name)  # from the disk cache the runtime keeps
    except DeviceError as e:
        raise RecordError(f"kernel {name} does not compile: {e}") from None
    text, note = _disassemble(lib, name)
    made = f"objdump -d of {lib.name} ({rt.compiler_version.splitlines()[0]})"
    return MachineCode(device=rt.name, kind="disassembly" if text else "none", text=text, note=note or made)


def _cl(rt: CLRuntime, source: str, name: str) -> MachineCode:
    try:
        binary = rt.binary(source, name)  # from the compile worker, under the compilers' time limit
    except DeviceError as e:
        raise RecordError(f"kernel {name} does not build for CL: {e}") from None
    driver = rt.describe()["platform"]
    if _is_text(binary):
        return MachineCode(device=rt.name, kind="listing", text=binary.decode("ascii"),
                           note=f"the program binary {driver} gives (text)")
    at = binary.find(b"\x7fELF")
    if at < 0:
        return MachineCode(device=rt.name, kind="none", text="",
                           note=f"{driver} gives a {len(binary)}-byte program binary that is neither text nor ELF")
    with tempfile.TemporaryDirectory(prefix="uopviz-cl-") as tmp:
        elf = Path(tmp) / f"{name}.so"
        elf.write_bytes(binary[at:])
        text, note = _disassemble(elf, name)
    return MachineCode(device=rt.name, kind="disassembly" if text else "none", text=text,
                       note=note or f"objdump -d of the ELF inside {driver}'s program binary")


def _is_text(data: bytes) -> bool:
    """Whether a binary is a text listing (PTX, AMD IL): printable ASCII throughout (a NUL may end it)."""
    body = data.rstrip(b"\0")
    return bool(body) and all(32 <= b < 127 or b in (9, 10, 13) for b in body)


def _disassemble(path: Path, name: str) -> tuple[str, str | None]:
    """objdump's disassembly of the functions whose symbol names the kernel (all of .text when none does); ("",
    why) when there is no objdump or it fails."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return "", "objdump is not installed here (Debian: apt-get install binutils), so there is no disassembly"
    try:
        r = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)], capture_output=True, text=True,
                           timeout=OBJDUMP_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return "", f"objdump did not finish within {OBJDUMP_TIMEOUT_S:g} s"
    if r.returncode != 0:
        return "", f"objdump failed: {r.stderr.strip()[:500]}"
    blocks, block, keep = list[str](), list[str](), False
    for line in r.stdout.splitlines():
        m = _SYMBOL.match(line)
        if m:
            if keep:
                blocks.append("\n".join(block).rstrip())
            block, keep = [line], name in m.group(1)
        elif block:
            block.append(line)
    if keep:
        blocks.append("\n".join(block).rstrip())
    return ("\n\n".join(blocks) if blocks else r.stdout.strip()), None
