"""A device's measured roofs: the compute rate (GFLOP/s) and memory bandwidth (GB/s) a profile places each kernel
under, measured once per device with kernels uopviz itself builds and kept in the cache directory.

The compute roof is the best rate of uopviz's own float32 gemm (n=256: in cache, so compute-bound); the bandwidth
roof is the best rate of an elementwise kernel over 32 MB in and 32 MB out (past a CPU's caches), bytes read plus
written; the interpreter and GPUs get other sizes (_SIZES). Both are what this compiler reaches on the device, not
the vendor's peak: a kernel near its roof is as fast as uopviz's best kernels of its kind, and a tuned kernel can
pass it. Each takes the fastest of a few runs within MEASURE_S seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from uopviz.runtime import device as devices
from uopviz.runtime.trust import private_dirs
from uopviz.version import __version__

MEASURE_S = 0.25
"""Seconds of runs each roof takes at most (compiling apart, once per machine: its kernels are cached)."""
_SIZES = {"PYTHON": (8, 4096), "CUDA": (2048, 64 << 20)}
"""The gemm's n and the elementwise kernel's elements where 256 and 8M (32 MB) do not fit: the interpreter runs about
a million operations a second; a GPU runs a 256 gemm in microseconds, mostly launch, and has caches of tens of MB."""


class Roofs(NamedTuple):
    """A device's compute roof (GFLOP/s) and bandwidth roof (GB/s)."""

    gflops: float
    gbs: float

    def fraction(self, gflops: float, gbs: float) -> float:
        """How close a kernel running at these rates is to the roofline: its rate over the attainable one at its
        arithmetic intensity, min(compute roof, bandwidth roof x FLOP/byte); 1.0 is on the roof."""
        return max(gflops / self.gflops, gbs / self.gbs)

    def bound(self, flops: int, nbytes: int) -> str:
        """"compute" where a kernel of this intensity is limited by the compute roof, else "memory"."""
        return "compute" if nbytes == 0 or flops / nbytes * self.gbs > self.gflops else "memory"


def path() -> Path:
    """`$UOPVIZ_CACHE_DIR/roofs.json`, else `~/.cache/uopviz/roofs.json`: each device's roofs, by name."""
    from uopviz.runtime.cpu import cache_dir
    return cache_dir() / "roofs.json"


def roofs_of(device: str) -> Roofs:
    """The device's roofs: from the cache when measured before on the same device (its runtime's description:
    name, driver, compiler) by this uopviz version, else measured now and kept (where the cache directory cannot be
    written, measured again in the next process)."""
    kept = _read()
    entry = kept.get(device)
    seen = devices.get(device).describe()
    if isinstance(entry, dict) and entry.get("uopviz") == __version__ and entry.get("describe") == seen:
        try:
            return Roofs(float(entry["gflops"]), float(entry["gbs"]))
        except (KeyError, TypeError, ValueError):
            pass  # a damaged entry: measured again
    found = measure(device)
    kept[device] = {"gflops": found.gflops, "gbs": found.gbs, "uopviz": __version__, "describe": seen,
                    "measured": time.time()}
    with contextlib.suppress(OSError):  # a cache that cannot be written: measured again next time
        _write(kept)
    return found


def measure(device: str) -> Roofs:
    """Measure the device's roofs now (not recorded by an open trace, not reported to an open profile)."""
    import numpy as np

    from uopviz.uop.pattern import unrecorded
    n, elems = _SIZES.get(devices.split_name(device)[0], (256, 8 << 20))
    rng = np.random.default_rng(0)
    with unrecorded():
        a, b = (rng.random((n, n), dtype=np.float32) for _ in range(2))
        gemm = _best_rate(_kernels(lambda A, B: A @ B, (a, b), device)) * 2 * n ** 3
        x = rng.random(elems, dtype=np.float32)
        copy = _best_rate(_kernels(lambda X: X + 1.0, (x,), device)) * 2 * x.nbytes
    return Roofs(gemm / 1e9, copy / 1e9)


def _kernels(fn: Callable[..., Any], arrays: tuple[Any, ...], device: str) -> list[tuple[devices.Program, list[Any]]]:
    """The kernels that compute fn over tensors of arrays on device (a gemm may pack an operand first), compiled,
    each with its buffers' handles."""
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.runtime import buffer as buffers
    from uopviz.search.policy import default_opts
    from uopviz.tensor import Tensor
    out = fn(*(Tensor(a, device=device).realize() for a in arrays))
    return [(compile_kernel(ast, device, default_opts(ast, device))[1], [buffers.handle(buf) for buf in bufs])
            for ast, bufs in kernels_of(schedule([out.uop]))]


def _best_rate(kernels: list[tuple[devices.Program, list[Any]]]) -> float:
    """Runs per second of the kernels' fastest run within MEASURE_S seconds (at least three, after one)."""
    def run() -> float:
        return sum(prog(handles, (), wait=True) or 0.0 for prog, handles in kernels)
    run()
    best, runs, end = float("inf"), 0, time.perf_counter() + MEASURE_S
    while runs < 3 or time.perf_counter() < end:
        best = min(best, run())
        runs += 1
    return 1.0 / best


def _read() -> dict[str, object]:
    try:
        doc = json.loads(path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _write(doc: dict[str, object]) -> None:
    """Write the roofs file whole or not at all (another process may read it meanwhile)."""
    where = path()
    private_dirs(where.parent)  # created 0700, as the rest of the cache
    fd, tmp = tempfile.mkstemp(dir=where.parent, prefix=".roofs.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, where)
