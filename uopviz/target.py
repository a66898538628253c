"""What the lowering knows about a device (`Target`) and what it hands a runtime (`Kernel`).

Codegen, the renderer and the runtimes all import this module, and none of them imports another's driver: a
runtime describes its device with a Target (its dialect, its native ops, its work-group limits, its vector
widths), codegen and the renderer ask the Target, and the result is a Kernel the runtime compiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from uopviz.dtype import DType
from uopviz.renderer.dialect import Dialect
from uopviz.uop.ops import Ops, TensorCore, UOp


@dataclass(frozen=True)
class Cache:
    """A set-associative data cache: line bytes, sets, ways. Its size is their product; addresses a multiple of
    `line * sets` apart (the set span) share a set, so a walk along rows whose stride is a multiple of a large power
    of two keeps only a few sets' ways of them (schedule/pack.py)."""

    line: int
    sets: int
    ways: int

    @property
    def size(self) -> int:
        return self.line * self.sets * self.ways

    def sets_touched(self, stride: int) -> int:
        """How many sets a walk of `stride` bytes per step lands in, however long it is."""
        span = self.line * self.sets
        return min(self.sets, span // math.gcd(stride, span))


@dataclass(frozen=True)
class Target:
    """What codegen may use on a device.

    dialect: the C-style dialect the renderer writes (renderer/dialect.py), or None for the PYTHON interpreter.
    native: decomposed ops the device computes itself (the rest get SPEC's decompositions).
    global_dims: how many GLOBAL ranges become hardware ids (0 on the CPU: everything is a loop).
    local_dims, max_local, local_memory: work-group dimensions, work-items per group and bytes of local memory
    for LOCAL and GROUP_REDUCE axes (0: the device has no work-groups).
    emulated: float dtypes without arithmetic on the device (bfloat16 everywhere, half on OpenCL without
    cl_khr_fp16): the renderer computes them in float32, rounding after every op, and stores their bits.
    vectors: the lane counts Instruction Selection may keep as vector values (see codegen/devectorize.py).
    tensor_cores: the warp-level matrix multiply-accumulates the device has, for the TC opt (codegen/tc.py).
    fma: the device adds a product with one rounding (a fused multiply-add instruction): Instruction Selection
    makes Add(Mul(a, b), c) a Mulacc, which the dialect spells as its fma (the `fuse multiply-add` pass).
    l1: the first-level data cache, where its geometry is worth planning data layout for (the CPU: a matmul operand
    whose rows alias in it is packed, schedule/pack.py); None where it is unknown or not planned for (GPUs).
    private_memory: bytes of arrays one kernel call may keep in fast private memory (the CPU's stack, in cache) for
    values computed once and read again (the `cache row values` pass); 0 where such an array would spill to slow
    memory (GPU registers), which keeps the pass off.
    prefetch: the bytes a load's address may jump from one loop iteration to the next and still be followed by the
    hardware prefetchers; a load that jumps further is prefetched ahead in software (the `prefetch` pass, with
    `l1`'s line size), 0 where the pass is off (GPUs hide latency with other work-items, and the interpreter has no
    cache).
    simt: the work-items are a GPU's threads, thousands at once in warps: work is spread over them, neighbouring
    work-items read neighbouring memory, and a row that one work-item would walk alone (a CPU's row kernel) is
    shared by a work-group instead (row fusion and the heuristic plan for it).
    """

    device: str
    dialect: Dialect | None
    native: frozenset[Ops] = frozenset()
    global_dims: int = 0
    local_dims: int = 0
    max_local: int = 0
    local_memory: int = 0
    threads: int = 0  # CPU threads a THREAD axis may use (0: none)
    emulated: frozenset[str] = frozenset({"bfloat16"})  # float dtypes computed in float32, stored as 16 bits
    vectors: frozenset[int] = frozenset()  # lane counts of the dialect's vector types (none: scalar code only)
    tensor_cores: tuple[TensorCore, ...] = ()
    fma: bool = False
    l1: Cache | None = None
    private_memory: int = 0
    prefetch: int = 0
    simt: bool = False

    @property
    def vector_functions(self) -> frozenset[Ops]:
        """The math functions that take vectors as they are (others are split into lanes)."""
        return self.dialect.vector_functions if self.dialect is not None else frozenset()


@dataclass(frozen=True)
class Kernel:
    """A lowered kernel as runtimes receive it.

    params: the dtype of each buffer parameter, by slot (slot 0 is written).
    global_size/local_size: work-items in all and per work-group, per dimension (innermost first), for
    targets with global ids; None elsewhere (local_size None: the driver picks).
    vars: names of the symbolic integer arguments, in call order.
    threads: how many calls of the CPU function, one per index of its THREAD axis (its last argument), cover
    the work; they run concurrently.
    """

    name: str
    linear: UOp
    source: str | None
    params: tuple[DType, ...]
    global_size: tuple[int, ...] | None = None
    local_size: tuple[int, ...] | None = None
    vars: tuple[str, ...] = ()
    threads: int = 1
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
