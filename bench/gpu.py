"""One prepared run on a machine with an NVIDIA GPU (bench/gpu.sh calls it): the CUDA tests, every zoo kernel on
the GPU against NumPy, and BEAM on the kernels a GPU is judged by, each beside torch, with results under OUT.

A GPU is lent for minutes at a time, so the run is a plan of stages, each in a process of its own with a share of
the time (`--minutes`): a stage that hangs or crashes costs its share, not the run. Each stage's figures land in
OUT/results.json as it ends. The benchmarks:

- gemm 4096 fp16 inputs, fp32 accumulation and output (tensor cores) against torch's cuBLAS (`out_dtype=float32`
  where torch has it, else its fp16-output gemm, which accumulates in fp32 as well);
- gemm 4096 fp32 (no TF32: the same arithmetic) against cuBLAS;
- softmax and layernorm over the rows of 4096x4096 fp32 against torch's own kernels.

Each: the heuristic's kernel, then BEAM (width 2, a time budget per kernel), then the tuned kernel and torch timed
in turns by CUDA events in one process, medians; the tuned result checked against torch in float64. The tuning
database and a trace of the tuned fp16 gemm (`uopviz serve OUT/gemm-tuned.uopviz-trace.json`) are copied to OUT.

Without a GPU (no driver, no device, no bindings) it says so and runs what needs none: each benchmark kernel
lowered for sm_90 with the heuristic's opts and compiled by NVRTC where NVRTC is installed. It exits 0 then.

    python bench/gpu.py --out DIR [--minutes 8] [--only STAGE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from support import timed

ROOT = Path(__file__).resolve().parent.parent
BENCHES = ("gemm_fp16", "gemm_fp32", "softmax", "layernorm")
SIZE = 4096
SHARES = {"tests": 0.3, "zoo": 0.12, **{b: 0.14 for b in BENCHES}, "trace": 0.06}
"""Each stage's share of the run's time (the rest is slack for starting processes)."""
BEAM_SHARE = 0.6  # of a benchmark stage's time, what its BEAM search may take before no new round starts
TRACE = "gemm-tuned.uopviz-trace.json"


# ---- the benchmarks' programs ----
def program(name: str, device: str, n: int = SIZE, seed: int = 0) -> tuple[Any, list[np.ndarray], Callable[..., Any]]:
    """(lazy uopviz result on device, its inputs, the same computation in torch on tensors of those inputs)."""
    from uopviz.kernels.zoo import _layernorm

    from uopviz.tensor import Tensor
    rng = np.random.default_rng(seed)
    if name.startswith("gemm"):
        dt = np.float16 if name == "gemm_fp16" else np.float32
        a, b = ((rng.random((n, n), dtype=np.float32) * 2 - 1).astype(dt) for _ in range(2))
        A, B = (Tensor(x, device=device).realize() for x in (a, b))
        out = A.float() @ B.float() if dt is np.float16 else A @ B
        return out, [a, b], _torch_gemm
    x = rng.random((n, n), dtype=np.float32) * 2 - 1
    X = Tensor(x, device=device).realize()
    if name == "softmax":
        return X.softmax(-1), [x], lambda t: t.softmax(-1)
    return _layernorm(X), [x], _torch_layernorm


def _torch_layernorm(t: Any) -> Any:
    import torch
    return torch.nn.functional.layer_norm(t, (t.shape[-1],), eps=1e-5)


def _torch_gemm(a: Any, b: Any) -> Any:
    import torch
    if a.dtype is not torch.float16:
        return torch.mm(a, b)
    if not a.is_cuda:  # torch's CPU has no fp16 gemm with a float32 result
        return torch.mm(a.float(), b.float())
    try:
        return torch.mm(a, b, out_dtype=torch.float32)
    except (TypeError, NotImplementedError):  # a torch without it: its fp16 gemm (fp32 accumulation; the row says)
        return torch.mm(a, b)


# ---- stages (each runs in its own process) ----
def stage_info(out: Path, minutes: float) -> dict[str, Any]:
    from uopviz.runtime import device as devices
    rt = devices.get("CUDA")
    import torch
    return {"gpu": rt.describe(), "max_threads_per_block": rt.target.max_local,
            "shared_memory_per_block": rt.target.local_memory, "max_registers_per_block": rt.max_registers,
            "torch": torch.__version__, "torch_sees": torch.cuda.get_device_name(0)}


TEST_RUNS = {"cuda": ["tests/cuda", "tests/runtime/test_compiler_limits.py"],
             "models": ["tests/models", "-k", "CUDA"]}
"""The suite's tests that run on the GPU (none needs FastAPI): the CUDA tests and the compiler-limit tests that use
NVRTC; the example GPT's and ResNet's gradients, optimizer steps and decoding against torch, on CUDA."""


def stage_tests(out: Path, minutes: float) -> dict[str, Any]:
    """Each of TEST_RUNS, its log in OUT/cuda-tests.txt."""
    log = out / "cuda-tests.txt"
    ends = time.monotonic() + minutes * 60 - 10
    figures: dict[str, Any] = {}
    with log.open("w") as f:
        for name, args in TEST_RUNS.items():
            f.write(f"==== {name}: pytest {' '.join(args)}\n")
            f.flush()
            began = f.tell()
            cmd = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "-o", "addopts=", "-n",
                   str(min(8, os.cpu_count() or 1)), "--dist", "loadfile", "-q", "-rfE"]
            try:
                rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                    timeout=max(ends - time.monotonic(), 1)).returncode
            except subprocess.TimeoutExpired:
                rc = -1
            f.flush()
            with log.open() as r:
                r.seek(began)
                lines = r.read().splitlines()
            summary = next((ln for ln in reversed(lines) if re.search(r"\d+ (passed|failed|error)", ln)),
                           "timed out" if rc == -1 else "no summary")
            figures[name] = {"returncode": rc, "summary": summary.strip("= "),
                             "failed": [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]}
    return figures


def stage_zoo(out: Path, minutes: float) -> dict[str, Any]:
    """Every zoo kernel at its default sizes on the GPU against NumPy, and the GPU time of its kernels."""
    from uopviz.kernels import ZOO

    from uopviz.pipeline import schedule
    from uopviz.realize import run_schedule
    rows = {}
    for name, z in ZOO.items():
        try:
            sizes = z.sizes()
            result, arrays = z.build(sizes, "CUDA")
            graph = schedule([result.uop])
            run_schedule(graph)
            got = result.realize().numpy()
            want = z.reference(*arrays)
            err = float(np.max(np.abs(got - want) / (np.abs(want) + 1)))
            ok = bool(np.allclose(got, want, rtol=max(z.rtol, 1e-4), atol=max(z.rtol, 1e-4)))
            t = statistics.median(run_schedule(graph, timed=True) for _ in range(5))
            rows[name] = {"ok": ok, "max_rel_err": err, "ms": t * 1e3, "gflops": z.flops(sizes) / t / 1e9,
                          "gbs": z.bytes(sizes) / t / 1e9}
        except Exception as e:  # one kernel's failure is a finding; the others still run
            rows[name] = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:2000]}"}
        print(f"zoo {name}: {rows[name]}", flush=True)
    return rows


def _peer_time(fn: Callable[[], Any]) -> float:
    """torch's time for one call of fn in seconds: by CUDA events on a GPU (the clock uopviz's own events read),
    by the wall clock on the CPU."""
    import torch
    if not torch.cuda.is_available():
        return timed(fn)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3


def stage_bench(name: str, out: Path, minutes: float, device: str = "CUDA", n: int = SIZE) -> dict[str, Any]:
    """One benchmark: heuristic, BEAM, tuned against torch (A/B turns, events), tuned checked in float64. (device
    and n: the same on the CPU at a small size, which is how the script's code is tested without a GPU.)"""
    import torch

    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule, scheduler
    from uopviz.runtime import buffer as buffers
    from uopviz.runtime import device as devices
    from uopviz.search import beam
    torch.backends.cuda.matmul.allow_tf32 = False
    result, arrays, peer = program(name, device, n)
    kernels = kernels_of(schedule([result.uop]))
    target = devices.get(device).target
    row: dict[str, Any] = {"kernels": []}
    budget = minutes * 60 * BEAM_SHARE / len(kernels)
    programs = []
    for ast, bufs in kernels:
        heur = heuristic_opts(scheduler(ast, target))
        k_h, p_h = compile_kernel(ast, device, heur)
        handles = [buffers.handle(b) for b in bufs]
        t_h = statistics.median(p_h(handles, wait=True) or 0.0 for _ in range(10))
        began = time.perf_counter()
        r = beam(ast, 2, device, budget_s=budget, progress=True)
        k_t, p_t = compile_kernel(ast, device, list(r.opts))
        programs.append((p_t, handles))
        row["kernels"].append({"name": k_h.name, "heuristic_opts": [str(o) for o in heur], "heuristic_ms": t_h * 1e3,
                               "local_size": k_h.local_size, "global_size": k_h.global_size,
                               "tuned": k_t.name, "tuned_opts": [str(o) for o in r.opts],
                               "unoptimized_ms": (r.unoptimized_s or 0) * 1e3, "beam_ms": r.time_s * 1e3,
                               "beam_s": time.perf_counter() - began, "rounds": r.rounds, "candidates": r.candidates,
                               "tuned_local_size": k_t.local_size, "tuned_global_size": k_t.global_size})
    inputs = [torch.from_numpy(a).to("cuda" if device == "CUDA" else "cpu") for a in arrays]
    row["torch_result_dtype"] = str(peer(*inputs).dtype)  # which gemm torch ran (fp16 inputs: float32 or float16)
    ours, theirs = [], []
    for _ in range(15):  # in turns, so both meet the same clocks
        ours.append(sum(p(h, wait=True) or 0.0 for p, h in programs))
        theirs.append(_peer_time(lambda: peer(*inputs)))
    for p, h in programs:
        p(h)
    got = result.realize().numpy()
    want = peer(*(t.double() for t in inputs)).cpu().numpy()
    row.update(ms=statistics.median(ours) * 1e3, torch_ms=statistics.median(theirs) * 1e3,
               vs_torch=statistics.median(theirs) / statistics.median(ours),
               max_abs_err=float(np.max(np.abs(got - want))), max_abs_want=float(np.max(np.abs(want))))
    if name.startswith("gemm"):
        row["tflops"] = 2 * n**3 / (row["ms"] * 1e-3) / 1e12
        row["torch_tflops"] = 2 * n**3 / (row["torch_ms"] * 1e-3) / 1e12
    else:
        row["gbs"] = 2 * n * n * 4 / (row["ms"] * 1e-3) / 1e9
        row["torch_gbs"] = 2 * n * n * 4 / (row["torch_ms"] * 1e-3) / 1e9
    return row


def stage_trace(out: Path, minutes: float) -> dict[str, Any]:
    """A trace of the fp16 gemm realized in a fresh process: its lowering with the tuned opts from the database."""
    import uopviz
    result, _, _ = program("gemm_fp16", "CUDA")
    with uopviz.trace() as tr:
        result.realize()
    tr.save(out / TRACE)
    return {"file": TRACE, "bytes": (out / TRACE).stat().st_size}


STAGES: dict[str, Callable[[Path, float], dict[str, Any]]] = {
    "info": stage_info, "tests": stage_tests, "zoo": stage_zoo,
    **{b: (lambda out, minutes, b=b: stage_bench(b, out, minutes)) for b in BENCHES}, "trace": stage_trace}


# ---- without a GPU ----
def without_gpu(reason: str, out: Path) -> dict[str, Any]:
    """The checks that need no GPU: each benchmark kernel lowered for sm_90, and compiled by NVRTC if it is here."""
    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.pipeline import kernels_of, lower, schedule, scheduler
    from uopviz.runtime.cuda import cuda_target, nvrtc_compile, nvrtc_version
    from uopviz.runtime.device import DeviceUnavailableError
    try:
        nvrtc: str | None = nvrtc_version()
    except DeviceUnavailableError:
        nvrtc = None
    target, rows = cuda_target("sm_90"), {}
    for name in BENCHES:
        result, _, _ = program(name, "PYTHON", n=256)
        for ast, _ in kernels_of(schedule([result.uop])):
            k = lower(ast, target, heuristic_opts(scheduler(ast, target)))
            cubin = nvrtc_compile(k.source or "", k.name, "sm_90") if nvrtc else b""
            rows[name] = {"kernel": k.name, "cubin_bytes": len(cubin)}
            print(f"{name}: {k.name}, {f'{len(cubin)} bytes of sm_90 cubin' if nvrtc else 'no NVRTC here'}")
    return {"gpu": None, "reason": reason, "nvrtc": nvrtc, "lowered_for_sm_90": rows}


def gpu_missing() -> str | None:
    """Why the CUDA device does not start here (None: it does)."""
    from uopviz.runtime import device as devices
    from uopviz.runtime.device import DeviceError
    try:
        devices.get("CUDA")
    except DeviceError as e:
        return str(e)
    return None


# ---- the plan ----
def run_stage(name: str, out: Path, minutes: float) -> int:
    """Run one stage here (in the child process) and write its figures to OUT/stage-NAME.json."""
    os.environ.setdefault("UOPVIZ_CACHE_DIR", str(out / "cache"))
    figures = STAGES[name](out, minutes)
    (out / f"stage-{name}.json").write_text(json.dumps(figures, indent=1, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--out", type=Path, required=True, help="where results go")
    ap.add_argument("--minutes", type=float, default=8.0, help="the whole run's time (default 8)")
    ap.add_argument("--only", nargs="*", choices=list(STAGES), help="these stages alone (info always runs)")
    ap.add_argument("--stage", choices=list(STAGES), help=argparse.SUPPRESS)  # a child process's one stage
    args = ap.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.stage:
        return run_stage(args.stage, out, args.minutes)
    results: dict[str, Any] = {}
    if (reason := gpu_missing()) is not None:
        print(f"no GPU here: {reason}\nrunning the checks that need none", flush=True)
        results = without_gpu(reason, out)
        (out / "results.json").write_text(json.dumps(results, indent=1))
        return 0
    env = {**os.environ, "UOPVIZ_CACHE_DIR": str(out / "cache"), "PYTHONUNBUFFERED": "1"}
    wanted = ["info", *(s for s in STAGES if s != "info" and (not args.only or s in args.only))]
    total = sum(SHARES.get(s, 0.03) for s in wanted)
    ends = time.monotonic() + args.minutes * 60
    for name in wanted:
        left = ends - time.monotonic()
        if left < 15:
            results[name] = {"skipped": "the run's time was spent"}
            continue
        share = min(left, max(60.0, args.minutes * 60 * SHARES.get(name, 0.03) / total))
        began = time.perf_counter()
        print(f"== {name} ({share:.0f} s)", flush=True)
        try:
            proc = subprocess.run([sys.executable, __file__, "--out", str(out), "--minutes", str(share / 60),
                                   "--stage", name], cwd=ROOT, env=env, timeout=share)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = -1
        path = out / f"stage-{name}.json"
        results[name] = json.loads(path.read_text()) if path.exists() else {}
        path.unlink(missing_ok=True)
        results[name]["stage_s"] = round(time.perf_counter() - began, 1)
        if rc != 0:
            results[name]["stage_failed"] = "timed out" if rc == -1 else f"exit status {rc}"
        print(f"== {name}: {json.dumps(results[name], default=str)[:3000]}", flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
        if name == "info" and rc != 0:
            break
    db = out / "cache" / "tuning.db"
    if db.exists():
        shutil.copy(db, out / "tuning.db")
    shutil.rmtree(out / "cache", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
