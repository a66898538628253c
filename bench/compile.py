"""How long a first call takes (issue 29 item 5): the example GPT's forward and AdamW training step (nanoGPT layout,
d 128, 2 blocks, 4 heads, batch 8, context 64), the example ResNet's SGD step (widths 16, 32, batch 32 of 16x16
digits) and the 80-op elementwise chain on 64x64 (sin, exp2, relu, mul-add in turn; tests/codegen/test_code_size.py),
each cold (a fresh, empty UOPVIZ_CACHE_DIR: every kernel lowered and compiled) and warm (the same cache kept, a new
process: kernels read back lowered, uopviz/lowered_cache.py, their libraries loaded from disk), then the step's
steady time eagerly and under @jit, beside torch (eager, its own threads) and tinygrad (TinyJit) where installed, in
one run.

Every first call is taken in a fresh subprocess (a process's own caches would make the second one warm), `--repeats`
times, and the table gives medians; the steady times are medians of `--steps` calls after two untimed ones, from the
warm processes. With `--workers 0,auto` (the default) uopviz runs both ways in the same run: 0 lowers every kernel in
the realizing process one by one (as before issue 29 item 4), auto is uopviz's default: two fewer build workers
(UOPVIZ_COMPILE_WORKERS) than the cores, lowering beside it (none on 2 cores: `--workers 0,1` compares one); the
workers' ratio is of the two within this run, whose settings take turns (each repeat runs every setting). The load
average is printed at the start and the end: figures taken on a loaded machine compare only within one run. Beside each
cold first call, its CPU time in the realizing process and in the C compiler runs it waited for (medians): what other
processes' load does not stretch, so figures of a busy machine compare across runs; with workers, the build workers' own
time is not in them.

`--traced` adds each case's cold first call recorded under `uopviz.trace()` (its own fresh process and cache, in turn
with the others), as a multiple of the untraced cold call of the last workers setting, and the time to save that
trace (issue 29: recording <= 1.5x).

    python bench/compile.py [CASE ...] [--device CPU] [--repeats 3] [--steps 5] [--workers 0,auto] [--no-peers]
                            [--traced]

CASE: gpt-forward, gpt-step, resnet-step, chain80 (default: all).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import ROOT, example, timed

CASES = ("gpt-forward", "gpt-step", "resnet-step", "chain80")
CHAIN_OPS = 80


def uopviz_case(case: str, device: str) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any]]:
    """(the first call, an eager call, a @jit call) of case on fresh inputs each time; built before any is timed."""
    import numpy as np

    import uopviz
    from uopviz import Tensor, nn
    rng = np.random.default_rng(0)
    if case.startswith("gpt"):
        g = example("gpt")
        cfg = g.GPTConfig()
        batches = [g.text_batches(g.TEXT, cfg, 8, seed=s)() for s in range(4)]
        k = iter(range(10 ** 9))

        def batch() -> tuple[Tensor, Tensor]:
            x, y = batches[next(k) % 4]
            return Tensor(x, device=device).realize(), Tensor(y, device=device).realize()
        model = g.GPT(cfg, device, seed=0)
        if case == "gpt-forward":
            def forward() -> Any:
                return model(batch()[0]).realize()
            fwd = uopviz.jit(lambda x: model(x))
            return forward, forward, lambda: fwd(batch()[0])
        opt = nn.optim.AdamW(model.parameters(), lr=3e-3)

        def step(x: Tensor, y: Tensor) -> Any:
            opt.zero_grad()
            loss = model.loss(x, y).backward()
            opt.step()
            return loss.item()
        jitted = uopviz.jit(lambda x, y: (opt.zero_grad(), model.loss(x, y).backward(), opt.step())[1])
        return (lambda: step(*batch()), lambda: step(*batch()), lambda: jitted(*batch()).item())
    if case == "resnet-step":
        r = example("resnet")
        Tensor.manual_seed(0)
        model = r.ResNet(in_channels=1, device=device)
        opt = nn.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        xs = [rng.random((32, 1, 16, 16), dtype=np.float32) for _ in range(4)]
        ys = [rng.integers(0, 10, 32).astype(np.int32) for _ in range(4)]
        k = iter(range(10 ** 9))

        def batch() -> tuple[Tensor, Tensor]:
            j = next(k) % 4
            return Tensor(xs[j], device=device).realize(), Tensor(ys[j], device=device).realize()

        def rstep(x: Tensor, y: Tensor) -> Any:
            opt.zero_grad()
            loss = model(x).cross_entropy(y).backward()
            opt.step()
            return loss.item()
        jitted = uopviz.jit(lambda x, y: (opt.zero_grad(), model(x).cross_entropy(y).backward(), opt.step())[1])
        return (lambda: rstep(*batch()), lambda: rstep(*batch()), lambda: jitted(*batch()).item())
    assert case == "chain80"
    xs = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(4)]
    k = iter(range(10 ** 9))

    def chain(y: Tensor) -> Tensor:
        for i in range(CHAIN_OPS):
            j = i % 4
            y = y.sin() if j == 0 else y.exp2() if j == 1 else y.relu() if j == 2 else y * 0.5 + 0.25
        return y

    def x() -> Tensor:
        return Tensor(xs[next(k) % 4], device=device).realize()
    jc = uopviz.jit(chain)
    return (lambda: chain(x()).numpy(), lambda: chain(x()).numpy(), lambda: jc(x()).numpy())


def torch_case(case: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(the first call, a steady call) of case in torch (float32, eager)."""
    import numpy as np
    import torch
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    from model_testing import TorchGPT, TorchResNet
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if case.startswith("gpt"):
        g = example("gpt")
        cfg = g.GPTConfig()
        model = TorchGPT(cfg)
        xs = [torch.tensor(rng.integers(0, cfg.vocab_size, (8, cfg.block_size)), dtype=torch.long) for _ in range(4)]
        k = iter(range(10 ** 9))
        if case == "gpt-forward":
            def fwd() -> Any:
                with torch.no_grad():
                    return model(xs[next(k) % 4]).sum().item()
            return fwd, fwd
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

        def step() -> Any:
            x = xs[next(k) % 4]
            opt.zero_grad()
            loss = model.loss(x, x.roll(-1, 1))
            loss.backward()
            opt.step()
            return loss.item()
        return step, step
    if case == "resnet-step":
        model = TorchResNet(1, (16, 32), 10)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        xs = [torch.rand(32, 1, 16, 16) for _ in range(4)]
        ys = [torch.tensor(rng.integers(0, 10, 32), dtype=torch.long) for _ in range(4)]
        k = iter(range(10 ** 9))

        def rstep() -> Any:
            j = next(k) % 4
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xs[j]), ys[j])
            loss.backward()
            opt.step()
            return loss.item()
        return rstep, rstep
    xs = [torch.randn(64, 64) for _ in range(4)]
    k = iter(range(10 ** 9))

    def chain() -> Any:
        y = xs[next(k) % 4]
        for i in range(CHAIN_OPS):
            j = i % 4
            y = y.sin() if j == 0 else y.exp2() if j == 1 else y.relu() if j == 2 else y * 0.5 + 0.25
        return y.numpy()
    return chain, chain


def _children_cpu() -> float:
    """CPU seconds of this process's finished children: the C compiler runs (a build worker still alive is not
    counted until it exits)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def child(args: argparse.Namespace) -> None:
    """One process's measurement, printed as a JSON line: the first call, and with --steps the steady times."""
    out: dict[str, Any] = {}
    if args.peer == "torch":
        first, steady = torch_case(args.child)
        out["first_s"] = timed(first)
        if args.steps:
            for _ in range(2):
                steady()
            out["eager_s"] = statistics.median(timed(steady) for _ in range(args.steps))
    else:
        first, eager, jitted = uopviz_case(args.child, args.device)
        import uopviz
        from uopviz import parallel
        parallel.stats.update(dict.fromkeys(parallel.stats, 0))  # the first call's kernels, not the model build's
        cpu, cc = time.process_time(), _children_cpu()
        if args.traced:
            with uopviz.trace() as tr:
                out["first_s"] = timed(first)
        else:
            out["first_s"] = timed(first)
        out["cpu_s"], out["cc_s"] = time.process_time() - cpu, _children_cpu() - cc
        if args.traced:
            with tempfile.TemporaryDirectory() as d:
                out["save_s"] = timed(lambda: tr.save(Path(d) / "trace.json"))
        out["split"] = (parallel.stats["here"], parallel.stats["workers"], parallel.stats["disk"])
        if args.steps:
            for _ in range(2):
                eager()
                jitted()
            samples: dict[str, list[float]] = {"eager_s": [], "jit_s": []}
            for _ in range(args.steps):  # in turns
                samples["eager_s"].append(timed(eager))
                samples["jit_s"].append(timed(jitted))
            out |= {k: statistics.median(v) for k, v in samples.items()}
    print(json.dumps(out), flush=True)


# ---------------------------------------------------------------- the parent: fresh processes, the table
def run_child(case: str, device: str, cache: Path, workers: str | None, steps: int, peer: str | None = None,
              traced: bool = False) -> dict[str, Any]:
    env = dict(os.environ, UOPVIZ_CACHE_DIR=str(cache), UOPVIZ_COMPILE_PROGRESS="0")
    if workers is not None and workers != "auto":
        env["UOPVIZ_COMPILE_WORKERS"] = workers
    else:
        env.pop("UOPVIZ_COMPILE_WORKERS", None)
    cmd = [sys.executable, __file__, "--child", case, "--device", device, "--steps", str(steps)]
    if peer:
        cmd += ["--peer", peer]
    if traced:
        cmd.append("--traced")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{case} ({peer or 'uopviz'}, workers {workers}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def fmt(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t:.2f} s" if t >= 1 else f"{t * 1e3:.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=list(CASES), metavar="CASE", help=", ".join(CASES))
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per first-call figure (median)")
    ap.add_argument("--steps", type=int, default=5, help="steady calls timed per variant (median)")
    ap.add_argument("--workers", default="0,auto", help="UOPVIZ_COMPILE_WORKERS settings compared (auto: default)")
    ap.add_argument("--no-peers", action="store_true", help="skip torch and tinygrad")
    ap.add_argument("--traced", action="store_true", help="also each cold first call recorded in a trace, and its save")
    ap.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    if unknown := [c for c in args.cases if c not in CASES]:
        ap.error(f"unknown case {', '.join(unknown)} (choose from {', '.join(CASES)})")
    settings = args.workers.split(",")
    print(f"bench/compile.py on {args.device}, {os.cpu_count()} cores; load average {load()}; "
          f"{args.repeats} fresh process(es) per first call, medians", flush=True)
    peers = [] if args.no_peers else [p for p in ("torch", "tinygrad") if importlib.util.find_spec(p) is not None]
    if not args.no_peers and "tinygrad" not in peers:
        print("tinygrad: not installed, skipped", flush=True)
    rows = []
    for case in args.cases:
        row: dict[str, Any] = {"case": case}
        cold: dict[str, list[dict[str, Any]]] = {w: [] for w in settings}
        warm: dict[str, list[dict[str, Any]]] = {w: [] for w in settings}
        traced: list[dict[str, Any]] = []
        for r in range(args.repeats):  # the settings in turns: a load that drifts during the run weighs on each alike
            for w in settings:
                cache = Path(tempfile.mkdtemp(prefix="uopviz-bench-compile-"))
                try:
                    cold[w].append(run_child(case, args.device, cache, w, 0))
                    # the steady times once per setting (the last warm process); a warm first call each time
                    warm[w].append(run_child(case, args.device, cache, w, args.steps if r == args.repeats - 1 else 0))
                finally:
                    shutil.rmtree(cache, ignore_errors=True)
            if args.traced:
                cache = Path(tempfile.mkdtemp(prefix="uopviz-bench-compile-"))
                try:
                    traced.append(run_child(case, args.device, cache, settings[-1], 0, traced=True))
                finally:
                    shutil.rmtree(cache, ignore_errors=True)
        for w in settings:
            row[f"cold {w}"] = statistics.median(c["first_s"] for c in cold[w])
            row[f"cold cpu {w}"] = (statistics.median(c["cpu_s"] for c in cold[w]),
                                    statistics.median(c["cc_s"] for c in cold[w]))
            row[f"warm {w}"] = statistics.median(c["first_s"] for c in warm[w])
            row[f"split {w}"] = (tuple(cold[w][-1]["split"]), tuple(warm[w][-1]["split"]))
            row[f"eager {w}"], row[f"jit {w}"] = warm[w][-1].get("eager_s"), warm[w][-1].get("jit_s")
            cpu, cc = row[f"cold cpu {w}"]
            print(f"  {case}: workers {w}: cold {fmt(row[f'cold {w}'])} (CPU: {fmt(cpu)} this process, {fmt(cc)} "
                  f"C compilers), warm {fmt(row[f'warm {w}'])} "
                  f"(kernels lowered here/in workers/read back lowered, cold and warm: {row[f'split {w}']}); "
                  f"eager {fmt(row[f'eager {w}'])}, @jit {fmt(row[f'jit {w}'])}", flush=True)
        if traced:
            first, save = (statistics.median(c[k] for c in traced) for k in ("first_s", "save_s"))
            cpu = statistics.median(c["cpu_s"] for c in traced)
            print(f"  {case}: traced cold {fmt(first)} ({first / row[f'cold {settings[-1]}']:.2f}x the untraced cold "
                  f"call with workers {settings[-1]}; CPU {fmt(cpu)} this process), its save {fmt(save)}", flush=True)
        if "torch" in peers:
            t = [run_child(case, args.device, Path(tempfile.gettempdir()), None,
                           args.steps if r == args.repeats - 1 else 0, "torch") for r in range(args.repeats)]
            row["torch first"], row["torch step"] = statistics.median(x["first_s"] for x in t), t[-1].get("eager_s")
        rows.append(row)
    print()
    head = f"{'case':12s}"
    for w in settings:
        head += f" | {'cold w=' + w:>11s} {'warm w=' + w:>11s}"
    head += f" | {'eager':>9s} {'@jit':>9s} {'eager/jit':>9s}"
    if "torch" in peers:
        head += f" | {'torch 1st':>9s} {'torch step':>10s} {'jit/torch':>9s}"
    if len(settings) > 1:
        head += f" | cold {settings[0]}/{settings[-1]}"
    print(head)
    last = settings[-1]
    for row in rows:
        line = f"{row['case']:12s}"
        for w in settings:
            line += f" | {fmt(row[f'cold {w}']):>11s} {fmt(row[f'warm {w}']):>11s}"
        e, j = row[f"eager {last}"], row[f"jit {last}"]
        line += f" | {fmt(e):>9s} {fmt(j):>9s} {f'{e / j:.2f}x' if e and j else '-':>9s}"
        if "torch" in peers:
            tf, ts = row["torch first"], row["torch step"]
            line += f" | {fmt(tf):>9s} {fmt(ts):>10s} {f'{j / ts:.2f}x' if j and ts else '-':>9s}"
        if len(settings) > 1:
            line += f" | {row[f'cold {settings[0]}'] / row[f'cold {last}']:.2f}x"
        print(line)
    print(f"\nload average at the end: {load()}")


if __name__ == "__main__":
    main()
