"""Compiling a kernel for a device: lower it with given opts (uopviz.pipeline) and hand it to the device's runtime,
keeping the most recently used programs (PROGRAMS_KEPT).

Opts are always given: which opts a kernel should get (tuned, searched or the heuristic's) is a policy decided
above this module (uopviz.search.policy), so searching and timing can compile any candidate from here without
depending on the code that chooses.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from uopviz.codegen.opt import Opt
from uopviz.pipeline import lower
from uopviz.runtime import device as devices
from uopviz.runtime.device import Program
from uopviz.target import Kernel
from uopviz.trace.recorder import context
from uopviz.uop.bounds import check_bounds
from uopviz.uop.ops import UOp
from uopviz.uop.pattern import Recorder, current_recorder, recording

PROGRAMS_KEPT = 4096
"""How many compiled kernels compile_kernel keeps, least recently used dropped first: each CPU program holds a
loaded library (a handful of memory mappings, unloaded with its last Program), and a process that compiles kernels
without end (a fuzzer, a long notebook) ran out of mappings (vm.max_map_count) after about 10,000."""

Key = tuple[UOp, str, tuple[Opt, ...]]

_programs: OrderedDict[Key, tuple[Kernel, Program]] = OrderedDict()

_ahead: dict[Key, Recorder] = {}
"""Kernels of the schedule being compiled that were lowered under the recording trace ahead of the compile_kernel
calls that would lower them (`traced=True`: uopviz.parallel's compile_all, which lowers a schedule's distinct kernels
in order and compiles their libraries in batches), and that trace's recorder: those calls use the program instead of
lowering it again (a kernel a schedule runs several times, as an optimizer's update of each parameter of one shape,
is filed once per schedule). The next compile_all forgets them (clear_ahead)."""


def compile_kernel(ast: UOp, device: str, opts: Sequence[Opt], lowered: Kernel | None = None,
                   checked: bool = False, traced: bool = False) -> tuple[Kernel, Program]:
    """The kernel lowered with opts (`[]`: unoptimized) and its program on device, cached per (kernel graph,
    device, opts): graphs are hash-consed, so an equal kernel is the same key. While a trace records, the
    lowering runs again (under a "kernel" context named after the kernel) so that the trace has it.

    lowered: the kernel as `lower(ast, target, opts)` made it elsewhere (a build worker of uopviz.parallel, which
    lowers a schedule's kernels in other processes, or uopviz.lowered_cache, which keeps them on disk); it is checked
    and compiled here as one lowered here would be, but not checked again where `checked` says its bounds were (by
    the build worker, or before it was kept on disk), and ignored while a trace records (the lowering must then run
    under the trace) unless `traced` says it ran under this trace (lower_kernel) for the schedule being compiled.

    A kernel whose Loads or Stores may reach outside their buffers is refused (KernelBoundsError) before its
    program is built: compiled code does not check its addresses, and every way a kernel gets to run (realize,
    run_kernel, timing, BEAM's reference, a JIT's replay of what realize compiled) passes through here."""
    key = (ast, device, tuple(opts))
    if key in _programs and (not recording() or _ahead.get(key) is current_recorder()):
        _programs.move_to_end(key)
        return _programs[key]
    rt = devices.get(device)
    kernel = lower_kernel(*key) if lowered is None or (recording() and not traced) else lowered
    if not (checked and kernel is lowered):
        check_bounds(kernel.linear, kernel.name)
    built = _programs[key] = (kernel, rt.compile(kernel))
    while len(_programs) > PROGRAMS_KEPT:
        _programs.popitem(last=False)
    if traced and (rec := current_recorder()) is not None:
        _ahead[key] = rec
    return built


def lower_kernel(ast: UOp, device: str, opts: Sequence[Opt]) -> Kernel:
    """ast lowered with opts for device under a "kernel" context (named after the kernel): while a trace records,
    its passes are filed there."""
    with context("kernel", "kernel"):
        return lower(ast, devices.get(device).target, opts)


def clear_ahead() -> None:
    """Forget the kernels lowered ahead for the last schedule (and the recorder they hold)."""
    _ahead.clear()


def kept(key: Key) -> tuple[Kernel, Program] | None:
    """What compile_kernel(*key) returns if it still keeps it (marked recently used), else None: a caller that
    remembers kernels by their key (realize's schedule cache) runs only programs this cache holds, so libraries of
    dropped programs are still unloaded."""
    hit = _programs.get(key)
    if hit is not None and isinstance(_programs, OrderedDict):
        _programs.move_to_end(key)
    return hit
