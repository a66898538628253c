"""uopviz against its peers (NumPy, torch, tinygrad) on the zoo's kernels, on the CPU, in one process and one run.

For each case (gemm at 512, 1024, 1000 and 768x3072x768; sum; softmax; layernorm; the elementwise chain; conv2d;
attention) it times uopviz's kernels with the heuristic's opts and with BEAM's (`tuned`), and each peer doing the
same work: NumPy, torch (eager, its own threads) and tinygrad (TinyJit, its CPU device). Every variant's answer is
checked against the zoo's NumPy reference before it is timed; the variants of a case are then timed in turns (a
few runs of each per round after it has run untimed for 0.15 s, so drift hits them alike and no variant is timed
while the threads of the one before it still spin, or on cores gone idle), and the table gives each one's median,
its spread (the middle half of the runs, as +-% of the median), GFLOP/s or GB/s, and uopviz's speed as a multiple
of the best peer's.
A peer that is not installed (`pip install -e '.[bench]'`) is skipped and named.

uopviz's time is its kernels' launches on resident buffers (as a JIT replays them); `realize` adds the whole
call as a program makes it: `@uopviz.function` over fresh input Tensors, scheduling from its cache, outputs allocated.
The machine's streaming bandwidth is measured first (a copy, on one core and on all), and every memory-bound case
is given as a fraction of it. A second table times small kernels (where launching costs more than computing)
unoptimized, with the heuristic and tuned: none should be slower than its unoptimized form.

    python bench/peers.py [CASE ...] [--beam 4] [--no-beam] [--repeats 15] [--db PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from support import measure

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/peers.py` from a checkout

from uopviz.kernels import ZOO


@dataclass(frozen=True)
class Case:
    """A zoo program at given sizes, whether memory or compute bounds it, and uopviz's target against a peer."""

    label: str
    zoo: str
    sizes: dict[str, int]
    memory_bound: bool
    peer: str  # the peer the target is measured against: numpy, torch or best
    target: float  # uopviz tuned / that peer's speed at least


CASES = [
    Case("gemm 512", "gemm", {"M": 512, "K": 512, "N": 512}, False, "numpy", 1.0),
    Case("gemm 1024", "gemm", {"M": 1024, "K": 1024, "N": 1024}, False, "numpy", 1.4),
    Case("gemm 1000", "gemm", {"M": 1000, "K": 1000, "N": 1000}, False, "numpy", 1.0),
    Case("gemm 768x3072x768", "gemm", {"M": 768, "K": 3072, "N": 768}, False, "numpy", 1.0),
    Case("sum 16M", "sum", {"N": 16 * 1024 * 1024}, True, "torch", 0.9),
    Case("softmax 4096x1024", "softmax", {"R": 4096, "C": 1024}, True, "torch", 1.0),
    Case("layernorm 4096x1024", "layernorm", {"R": 4096, "C": 1024}, True, "torch", 1.0),
    Case("elementwise 16M", "elementwise", {"N": 16 * 1024 * 1024}, True, "best", 1.0),
    Case("conv2d 8x32x32x32->64", "conv2d", {"N": 8, "C": 32, "H": 32, "W": 32, "O": 64}, False, "torch", 1.0),
    Case("attention 512x64", "attention", {"S": 512, "D": 64}, False, "torch", 1.0),
]
SMALL = [  # launch-bound kernels: the heuristic must not make them slower than no opts
    Case("gemm 32x64x48", "gemm", {"M": 32, "K": 64, "N": 48}, False, "numpy", 0.0),
    Case("sum 4096", "sum", {"N": 4096}, True, "numpy", 0.0),
    Case("softmax 16x100", "softmax", {"R": 16, "C": 100}, True, "numpy", 0.0),
]
HEURISTIC_SLACK = 1.5  # the heuristic alone within this factor of the tuned time


# ---- the peers: each maps a zoo name to a function of the input arrays that returns a no-argument runner ----
def _torch_programs() -> dict[str, Callable[..., Any]]:
    import torch
    import torch.nn.functional as F

    def chain(x: Any) -> Any:
        y = x * 1.5 + 0.25
        y = torch.clamp_min(y, -0.5) * y
        y = y - x * 0.75
        y = y / (x * x + 1.0)
        return torch.relu(y) + x

    return {"gemm": torch.mm, "sum": torch.sum, "softmax": lambda x: torch.softmax(x, -1),
            "layernorm": lambda x: F.layer_norm(x, x.shape[-1:], eps=1e-5), "elementwise": chain,
            "conv2d": lambda x, w: F.conv2d(x, w, padding=1),
            "attention": lambda q, k, v: F.scaled_dot_product_attention(q[None], k[None], v[None])[0]}


def torch_peer(name: str, arrays: list[np.ndarray]) -> tuple[Callable[[], Any], Callable[[Any], np.ndarray]] | None:
    import torch
    fn = _torch_programs().get(name)
    if fn is None:
        return None
    ts = [torch.from_numpy(a) for a in arrays]

    def run() -> Any:
        with torch.inference_mode():
            return fn(*ts)

    return run, lambda out: out.numpy()


def _tinygrad_programs() -> dict[str, Callable[..., Any]]:
    # tinygrad's Tensor spells the chain's ops as uopviz's does: the zoo's own program runs on it
    return {"gemm": lambda a, b: a @ b, "sum": lambda x: x.sum(), "softmax": lambda x: x.softmax(-1),
            "layernorm": lambda x: x.layernorm(eps=1e-5), "elementwise": ZOO["elementwise"].program,
            "conv2d": lambda x, w: x.conv2d(w, padding=1),
            "attention": lambda q, k, v: q.scaled_dot_product_attention(k, v)}


def tinygrad_peer(name: str, arrays: list[np.ndarray]) -> tuple[Callable[[], Any], Callable[[Any], np.ndarray]] | None:
    from tinygrad import Device, Tensor, TinyJit
    fn = _tinygrad_programs().get(name)
    if fn is None:
        return None
    ts = [Tensor(a, device="CPU").realize() for a in arrays]
    jit = TinyJit(lambda *xs: fn(*xs).realize())

    def run() -> Any:
        out = jit(*ts)
        Device["CPU"].synchronize()
        return out

    return run, lambda out: out.numpy()


def numpy_peer(name: str, arrays: list[np.ndarray]) -> tuple[Callable[[], Any], Callable[[Any], np.ndarray]]:
    ref = ZOO[name].reference
    return (lambda: ref(*arrays)), np.asarray


PEERS: dict[str, tuple[str, Callable[..., Any]]] = {"numpy": ("numpy", numpy_peer), "torch": ("torch", torch_peer),
                                                    "tinygrad": ("tinygrad", tinygrad_peer)}


def installed_peers() -> tuple[list[str], list[str]]:
    """(peers that import here, peers that are missing)."""
    have, missing = [], []
    for name, (module, _) in PEERS.items():
        try:
            __import__(module)
            have.append(name)
        except ImportError:
            missing.append(name)
    return have, missing


# ---- uopviz ----
def uopviz_variants(case: Case, arrays: list[np.ndarray], width: int, db: Path | None, with_unoptimized: bool
                    ) -> tuple[dict[str, Callable[[], Any]], Callable[[Any], np.ndarray], dict[str, list[str]]]:
    """uopviz's runners by variant (each runs the program's kernels with that variant's opts), how to read the
    result, and each variant's kernel names."""
    import uopviz
    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.pipeline import scheduler as scheduler_of
    from uopviz.runtime import buffer as buffers
    from uopviz.runtime import device as devices
    from uopviz.search import beam

    z = ZOO[case.zoo]
    tensors = z.tensors(arrays, "CPU")
    graph = schedule([z.program(*tensors).uop])
    kernels = kernels_of(graph)
    target = devices.get("CPU").target
    opts: dict[str, list[tuple[Any, ...]]] = {}
    if with_unoptimized:
        opts["unoptimized"] = [() for _ in kernels]
    opts["heuristic"] = [tuple(heuristic_opts(scheduler_of(ast, target))) for ast, _ in kernels]
    if width:
        opts["tuned"] = [beam(ast, width, "CPU", db=db, progress=False).opts for ast, _ in kernels]
    result = graph.src[0].src[0]
    runners: dict[str, Callable[[], Any]] = {}
    names: dict[str, list[str]] = {}
    for variant, per_kernel in opts.items():
        progs, names[variant] = [], []
        for (ast, bufs), o in zip(kernels, per_kernel, strict=True):
            kernel, prog = compile_kernel(ast, "CPU", list(o))
            progs.append((prog, [buffers.handle(b) for b in bufs]))
            names[variant].append(kernel.name)

        def run(progs: list[tuple[Any, list[Any]]] = progs) -> Any:
            for prog, handles in progs:
                prog(handles)
            return result

        runners[variant] = run
    fn = uopviz.function(z.program)
    fresh = z.tensors(arrays, "CPU")
    runners["realize"] = lambda: fn(*fresh).realize()
    return runners, _reader, names


def _reader(out: Any) -> np.ndarray:
    from uopviz.runtime import buffer as buffers
    from uopviz.tensor import Tensor
    return out.numpy() if isinstance(out, Tensor) else buffers.to_numpy(out)


# ---- measuring ----
def spread(xs: list[float]) -> float:
    """Half the interquartile range as a fraction of the median."""
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return (q[2] - q[0]) / 2 / statistics.median(xs)


def check(label: str, variant: str, got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    scale = float(np.abs(want).max()) if want.size else 1.0
    if not np.allclose(got, want, rtol=rtol, atol=rtol * scale):
        err = float(np.abs(got - want).max())
        raise AssertionError(f"{label}: {variant}'s answer differs from NumPy's (max abs error {err:.3g})")


def streaming_bandwidth(mb: int = 256, repeats: int = 10) -> tuple[float, float]:
    """(GB/s of a copy on one core, on every core), counting the bytes read and written once each."""
    from uopviz.runtime.workers import cores
    n = mb * 1024 * 1024 // 4
    src, dst = np.ones(n, np.float32), np.zeros(n, np.float32)
    parts = np.array_split(np.arange(n), cores())
    bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts if p.size]

    def copy_all() -> None:
        ts = [threading.Thread(target=np.copyto, args=(dst[a:b], src[a:b])) for a, b in bounds]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    one = statistics.median(measure({"one": lambda: np.copyto(dst, src)}, repeats)["one"])
    every = statistics.median(measure({"all": copy_all}, repeats)["all"])
    return 2 * src.nbytes / one / 1e9, 2 * src.nbytes / every / 1e9


# ---- the report ----
@dataclass
class Row:
    case: Case
    variant: str
    median_s: float
    spread: float
    kernels: str


def run_case(case: Case, peers: list[str], width: int, db: Path | None, repeats: int, small: bool) -> list[Row]:
    z = ZOO[case.zoo]
    arrays = z.arrays(z.sizes(**case.sizes))
    want = np.asarray(z.reference(*arrays), dtype=np.float64)
    rtol = max(z.rtol, 1e-3)
    ours, read, names = uopviz_variants(case, arrays, width, db, with_unoptimized=small)
    runners = dict(ours)
    readers = dict.fromkeys(ours, read)
    for p in peers:
        made = PEERS[p][1](case.zoo, arrays)
        if made is not None:
            runners[p], readers[p] = made
    for k, fn in runners.items():
        check(case.label, k, readers[k](fn()), want, rtol)
    samples = measure(runners, repeats)
    return [Row(case, k, statistics.median(xs), spread(xs), " ".join(names.get(k, [])))
            for k, xs in samples.items()]


def rate(case: Case, seconds: float) -> str:
    z = ZOO[case.zoo]
    sizes = z.sizes(**case.sizes)
    return f"{z.bytes(sizes) / seconds / 1e9:7.1f} GB/s" if case.memory_bound else \
        f"{z.flops(sizes) / seconds / 1e9:7.1f} GFLOP/s"


def best_peer(rows: list[Row], peers: list[str], which: str) -> Row | None:
    cands = [r for r in rows if r.variant in peers and (which == "best" or r.variant == which)]
    return min(cands, key=lambda r: r.median_s, default=None)


def report(rows: list[Row], peers: list[str], stream: float, small: bool) -> list[tuple[str, bool]]:
    """Print one case's table; return its verdicts."""
    case = rows[0].case
    best = best_peer(rows, peers, "best")
    print(f"\n{case.label}")
    for r in rows:
        vs = f"{best.median_s / r.median_s:6.2f}x {best.variant}" if best is not None and r.variant not in peers \
            else ""
        bw = ""
        if case.memory_bound and not small:
            gbs = ZOO[case.zoo].bytes(ZOO[case.zoo].sizes(**case.sizes)) / r.median_s / 1e9
            bw = f" {gbs / stream:5.0%} of stream"
        print(f"  {r.variant:12s} {r.median_s * 1e3:10.3f} ms +-{r.spread:4.0%} {rate(case, r.median_s)}{bw:>16s} "
              f"{vs:>16s}  {r.kernels}")
    by = {r.variant: r for r in rows}
    verdicts = []
    if small:
        for v in ("heuristic", "tuned"):
            if v in by:
                verdicts.append((f"{case.label}: {v} {by[v].median_s * 1e6:.1f} µs vs unoptimized "
                                 f"{by['unoptimized'].median_s * 1e6:.1f} µs (target: not slower)",
                                 by[v].median_s <= by["unoptimized"].median_s * 1.05))
        return verdicts
    if "tuned" in by:
        peer = best_peer(rows, peers, case.peer)
        if peer is not None:
            ratio = peer.median_s / by["tuned"].median_s
            verdicts.append((f"{case.label}: tuned {ratio:.2f}x {peer.variant} (target >= {case.target}x)",
                             ratio >= case.target))
        else:
            verdicts.append((f"{case.label}: {case.peer} is not installed, target not measured", False))
        h = by["heuristic"].median_s / by["tuned"].median_s
        verdicts.append((f"{case.label}: heuristic {h:.2f}x the tuned time (target <= {HEURISTIC_SLACK}x)",
                         h <= HEURISTIC_SLACK))
    return verdicts


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    labels = [c.label.split()[0] for c in CASES]
    ap.add_argument("cases", nargs="*", metavar="CASE",
                    help=f"case names or prefixes ({', '.join(dict.fromkeys(labels))})")
    ap.add_argument("--beam", type=int, default=4, help="BEAM width for the tuned variant (default 4)")
    ap.add_argument("--no-beam", action="store_true", help="time the heuristic only")
    ap.add_argument("--repeats", type=int, default=15, help="timed rounds per case (default 15)")
    ap.add_argument("--db", type=Path, help="tuning database (default: a fresh one in a temporary directory)")
    args = ap.parse_args()
    if args.db is None:
        os.environ["UOPVIZ_CACHE_DIR"] = tempfile.mkdtemp(prefix="uopviz-peers-")
    else:
        os.environ.setdefault("UOPVIZ_CACHE_DIR", str(args.db.parent))
    width = 0 if args.no_beam else args.beam
    chosen = [c for c in CASES if not args.cases or any(c.label.startswith(p) for p in args.cases)]
    small = [c for c in SMALL if not args.cases or any(c.label.startswith(p) for p in args.cases)]
    peers, missing = installed_peers()
    from uopviz.runtime.cpu import cpu_name
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; peers: {', '.join(peers)}"
          + (f"; not installed (skipped): {', '.join(missing)}" if missing else "")
          + (f"; uopviz tuned by BEAM width {width}" if width else "; no BEAM"))
    one, every = streaming_bandwidth()
    stream = max(one, every)
    print(f"streaming bandwidth (copy, read+write): {one:.1f} GB/s on one core, {every:.1f} GB/s on all; "
          f"memory-bound cases are given as a fraction of {stream:.1f} GB/s")
    print("times: median ms +- half the interquartile range; 'Nx peer': the best peer's time / this time")
    verdicts = []
    for case in chosen:
        verdicts += report(run_case(case, peers, width, args.db, args.repeats, False), peers, stream, False)
    for case in small:
        verdicts += report(run_case(case, peers, width, args.db, args.repeats * 4, True), peers, stream, True)
    print("\ntargets:")
    for text, ok in verdicts:
        print(f"  {'MET ' if ok else 'MISS'}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
