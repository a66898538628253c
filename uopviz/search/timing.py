"""Measuring kernel candidates: fresh buffers with random inputs, a check against the unoptimized kernel's answer
on them, and timed runs with warm-up, repeats and early abort.

BEAM must never keep a wrong kernel, so every candidate's first run is its verification: the output is compared
with the unoptimized kernel's before any time counts (the run also warms caches up). Times are what a program
reports for `prog(handles, wait=True)`: wall time around the call on the CPU, the device's own time on OpenCL.

A kernel with symbolic sizes is measured at one value per variable (`representative`: the largest, which its
buffers are sized for anyway); `values_to_verify` gives the others a winner is checked at.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uopviz.compiler import compile_kernel
from uopviz.dtype import DType
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.runtime.device import CompileError, Program
from uopviz.schedule.split import largest_size, outputs_of
from uopviz.target import Kernel
from uopviz.uop.ops import Ops, UOp

ABORT_FACTOR = 3.0
"""A candidate whose run takes longer than this many times the best median so far gets no further runs."""
MIN_SAMPLES = 3
"""Timed runs a candidate gets before the time budget may stop it (unless it is aborted)."""


@dataclass(frozen=True)
class Timing:
    """A candidate's measurement: seconds per timed run, or why it failed (then there are no samples)."""

    samples: list[float]
    error: str | None = None

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None


class Workbench:
    """Fresh buffers for one kernel's Params, filled with random data, and the unoptimized kernel's output on them.

    The outputs (the first slots: one, or a kernel of siblings' several) are also filled with random data and put
    back before every verifying run, so a candidate that skips some output elements leaves wrong values there, and
    one that reads its outputs sees what the reference saw; every output is checked.
    `values` are the kernel's variables' values for every run (default: `representative`); a buffer of symbolic
    size is made for the largest size its variables allow.
    """

    def __init__(self, ast: UOp, device: str, seed: int = 0, values: Mapping[str, int] | None = None) -> None:
        params = {u.arg.slot: u for u in ast.toposort() if u.op is Ops.PARAM}
        self.values = dict(representative(ast) if values is None else values)
        self.runtime = devices.get(device)
        rng = np.random.default_rng(seed)
        self.dtypes: list[DType] = [params[k].arg.dtype for k in range(len(params))]
        self.bufs = [buffers.new_buffer(largest_size(params[k].shape), self.dtypes[k], device)
                     for k in range(len(params))]
        self.handles = [buffers.handle(b) for b in self.bufs]
        for b, h, dt in zip(self.bufs, self.handles, self.dtypes, strict=True):
            host = self.runtime.copyout(h, b.arg.size, dt)  # the runtime's host form of this dtype
            self.runtime.copyin(h, _random(rng, host.dtype, dt, b.arg.size))
        self.outputs = outputs_of(ast)
        self.initial_outputs = [self.runtime.copyout(self.handles[k], self.bufs[k].arg.size, self.dtypes[k])
                                for k in range(self.outputs)]
        prog = self.bind(*compile_kernel(ast, device, []))
        timed_run(prog, self.handles)  # warm-up
        _, self.reference = self.run_from_start(prog)

    def bind(self, kernel: Kernel, prog: Program) -> Program:
        """prog called with this bench's variable values, in the order its kernel takes them."""
        vals = tuple(self.values[v] for v in kernel.vars)
        return lambda handles, wait=False: prog(handles, vals, wait=wait)

    def run_from_start(self, prog: Program) -> tuple[float, list[np.ndarray]]:
        """One run of prog from the initial contents: its time and each output's values after it."""
        for h, initial in zip(self.handles, self.initial_outputs, strict=False):
            self.runtime.copyin(h, initial)
        t = timed_run(prog, self.handles)
        return t, [_values(self.runtime.copyout(self.handles[k], self.bufs[k].arg.size, self.dtypes[k]), self.dtypes[k])
                   for k in range(self.outputs)]

    def mismatch(self, got: Sequence[np.ndarray]) -> str | None:
        """Why got (every output's values) is not the reference's (None when it is, within float reordering error)."""
        for k, (g, ref) in enumerate(zip(got, self.reference, strict=True)):
            if (err := self._differs(g, ref, self.dtypes[k])) is not None:
                return f"output {k}: {err}" if self.outputs > 1 else err
        return None

    @staticmethod
    def _differs(got: np.ndarray, ref: np.ndarray, dt: DType) -> str | None:
        if dt.is_float:
            rtol = 2e-2 if dt.bits <= 16 else 1e-3
            finite = np.abs(ref[np.isfinite(ref)])
            atol = rtol * float(finite.max()) if finite.size else 0.0  # reordered sums err relative to the largest
            ok = np.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = got == ref
        if ok.all():
            return None
        bad = np.flatnonzero(~ok)
        i = int(bad[0])
        return (f"wrong result: {bad.size} of {ok.size} values differ from the unoptimized kernel's "
                f"(first at index {i}: {got[i]!r}, expected {ref[i]!r})")

    def measure(self, prog: Program, best_s: float | None, repeats: int = 10, budget_s: float = 0.25,
                abort: float = ABORT_FACTOR) -> Timing:
        """Verify prog, then time it: up to `repeats` runs, fewer once MIN_SAMPLES of them take `budget_s`.

        A run longer than `abort` x best_s ends the timing there; if it is the verifying run, that run's time is
        the one sample (such a candidate cannot win, and a slow kernel should not cost several runs).
        """
        try:
            first, got = self.run_from_start(prog)
            if (err := self.mismatch(got)) is not None:
                return Timing([], err)
            if best_s is not None and first > abort * best_s:
                return Timing([first])
            samples: list[float] = []
            while len(samples) < repeats:
                samples.append(timed_run(prog, self.handles))
                if best_s is not None and samples[-1] > abort * best_s:
                    break
                if len(samples) >= MIN_SAMPLES and sum(samples) >= budget_s:
                    break
            return Timing(samples)
        except Exception as e:  # any failure of a candidate's run is that candidate's error, not the search's
            return Timing([], describe_error(e))


def variables(ast: UOp) -> list[UOp]:
    """A kernel's variables (DefineVar), by name."""
    return sorted({u for u in ast.toposort() if u.op is Ops.DEFINE_VAR}, key=lambda v: v.arg.name)


def representative(ast: UOp) -> dict[str, int]:
    """The values a symbolic kernel is timed at: each variable's largest (its buffers are sized for it)."""
    return {v.arg.name: v.arg.max for v in variables(ast)}


def values_to_verify(ast: UOp, seed: int = 0) -> list[dict[str, int]]:
    """Other values a winner must be right at: every variable at its smallest, at its middle, and at a random
    value (the representative values are verified by the search itself)."""
    vs = variables(ast)
    if not vs:
        return []
    rng = np.random.default_rng(seed)
    picks = [{v.arg.name: v.arg.min for v in vs}, {v.arg.name: (v.arg.min + v.arg.max) // 2 for v in vs},
             {v.arg.name: int(rng.integers(v.arg.min, v.arg.max + 1)) for v in vs}]
    rep = representative(ast)
    return [p for i, p in enumerate(picks) if p != rep and p not in picks[:i]]


def describe_error(e: BaseException, limit: int = 2000) -> str:
    """An exception as the text a candidate's error column keeps (a compile error's log, not its source)."""
    text = f"{type(e).__name__}: {e.log.strip() if isinstance(e, CompileError) else e}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def timed_run(prog: Program, handles: Sequence[Any]) -> float:
    """Seconds one waited run of prog takes, as the program reports them."""
    t = prog(handles, wait=True)
    if t is None:
        raise RuntimeError("the program reported no time for a waited run")
    return float(t)


def _random(rng: np.random.Generator, host: np.dtype[Any], dt: DType, n: int) -> np.ndarray:
    """n random values of dt in the runtime's host form: floats in [-1, 1), integers in [1, 4) (valid as
    divisors and small indices), random booleans; bfloat16 held as 16-bit patterns stays so."""
    if dt.is_float:
        x = rng.random(n, dtype=np.float32) * 2 - 1
        return (x.view(np.uint32) >> 16).astype(host) if host.kind == "u" else x.astype(host)
    if dt.is_bool:
        return rng.random(n) < 0.5
    return rng.integers(1, 4, size=n).astype(host)


def _values(host: np.ndarray, dt: DType) -> np.ndarray:
    """A buffer's host copy as comparable values (bfloat16 bit patterns as float32)."""
    if dt.is_float and host.dtype.kind == "u":
        return (host.astype(np.uint32) << 16).view(np.float32)
    return host
