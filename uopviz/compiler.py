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
from uopviz.uop.pattern import recording

PROGRAMS_KEPT = 4096
"""How many compiled kernels compile_kernel keeps, least recently used dropped first: each CPU program holds a
loaded library (a handful of memory mappings, unloaded with its last Program), and a process that compiles kernels
without end (a fuzzer, a long notebook) ran out of mappings (vm.max_map_count) after about 10,000."""

_programs: OrderedDict[tuple[UOp, str, tuple[Opt, ...]], tuple[Kernel, Program]] = OrderedDict()


def compile_kernel(ast: UOp, device: str, opts: Sequence[Opt], lowered: Kernel | None = None,
                   checked: bool = False) -> tuple[Kernel, Program]:
    """The kernel lowered with opts (`[]`: unoptimized) and its program on device, cached per (kernel graph,
    device, opts): graphs are hash-consed, so an equal kernel is the same key. While a trace records, the
    lowering runs again (under a "kernel" context named after the kernel) so that the trace has it.

    lowered: the kernel as `lower(ast, target, opts)` made it elsewhere (a build worker of uopviz.parallel, which
    lowers a schedule's kernels in other processes, or uopviz.lowered_cache, which keeps them on disk); it is checked
    and compiled here as one lowered here would be, but not checked again where `checked` says its bounds were (by
    the build worker, or before it was kept on disk), and ignored while a trace records (the lowering must then run
    under the trace).

    A kernel whose Loads or Stores may reach outside their buffers is refused (KernelBoundsError) before its
    program is built: compiled code does not check its addresses, and every way a kernel gets to run (realize,
    run_kernel, timing, BEAM's reference, a JIT's replay of what realize compiled) passes through here."""
    key = (ast, device, tuple(opts))
    if key in _programs and not recording():
        _programs.move_to_end(key)
        return _programs[key]
    rt = devices.get(device)
    if lowered is None or recording():
        with context("kernel", "kernel"):
            kernel = lower(ast, rt.target, opts)
    else:
        kernel = lowered
    if not (checked and kernel is lowered):
        check_bounds(kernel.linear, kernel.name)
    built = _programs[key] = (kernel, rt.compile(kernel))
    while len(_programs) > PROGRAMS_KEPT:
        _programs.popitem(last=False)
    return built


def kept(key: tuple[UOp, str, tuple[Opt, ...]]) -> tuple[Kernel, Program] | None:
    """What compile_kernel(*key) returns if it still keeps it (marked recently used), else None: a caller that
    remembers kernels by their key (realize's schedule cache) runs only programs this cache holds, so libraries of
    dropped programs are still unloaded."""
    hit = _programs.get(key)
    if hit is not None and isinstance(_programs, OrderedDict):
        _programs.move_to_end(key)
    return hit
