"""Eager mode against @jit, with realize's schedule cache off and on, in one run (issue 29 item 3): a small MLP's
Adam step (64 -> 128 -> 10), the example ResNet's SGD step (BatchNorm in training), the example GPT's forward and
AdamW training step (nanoGPT layout, d 128, 2 blocks, batch 8, context 64), one realize of a small elementwise
kernel and of a 512 gemm (what a realize adds over its kernel's own time), and greedy decoding of a growing
(symbolic) length without @jit.

Every variant runs in the same process, in interleaved rounds (off, on, @jit, off, on, ...), so the ratios are fair
on a loaded machine; the figures are medians. "off" is realize as it was before the cache (every realize schedules
and looks up its kernels' opts and programs). Each variant's losses/outputs are checked to agree first.

    python bench/eager.py [--device CPU] [--rounds 5] [--skip-gpt] [--phases]
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from support import example, timed

import uopviz
from uopviz import Tensor, nn
from uopviz.realize import schedule_cache


def compare(name: str, variants: dict[str, Callable[[], Any]], rounds: int, calls: int) -> dict[str, float]:
    """Median seconds per call of each variant, `calls` calls per round, rounds interleaved; printed as a row, with
    the calling thread's CPU time per call of the cached eager variant and of @jit (their difference is mostly the
    eager Python: the pool's threads run most kernel work, and other processes' load moves it far less than wall
    time)."""
    samples: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    misses = 0
    for _ in range(rounds):
        for k, fn in variants.items():
            schedule_cache.enabled = k != "eager, cache off"
            before = schedule_cache.misses
            for _ in range(calls):
                c0 = time.thread_time()
                samples[k].append(timed(fn))
                cpu[k].append(time.thread_time() - c0)
            if k == "eager, cache on":
                misses += schedule_cache.misses - before
    schedule_cache.enabled = True
    med = {k: statistics.median(v) for k, v in samples.items()}
    jit = med.get("@jit")
    cells = "  ".join(f"{k} {_fmt(t)}" + (f" ({t / jit:.2f}x @jit)" if jit and k != "@jit" else "")
                      for k, t in med.items())
    print(f"{name:28s} {cells}  [cache misses while on: {misses}]", flush=True)
    if "@jit" in cpu and "eager, cache on" in cpu:
        eager_cpu, jit_cpu = statistics.median(cpu["eager, cache on"]), statistics.median(cpu["@jit"])
        print(f"{'':28s} calling thread's CPU: eager, cache on {_fmt(eager_cpu)}, @jit {_fmt(jit_cpu)} "
              f"(eager's own: {_fmt(eager_cpu - jit_cpu)})", flush=True)
    return med


def collections_per_call(name: str, variants: dict[str, Callable[[], Any]], calls: int) -> None:
    """Each variant's mean wall time per call over `calls` calls in a row, and the part of it the garbage collector
    spent in full collections: every few dozen steps one scans every object the process holds (tens of ms in a
    GPT step), which the medians above leave out and a user's loop pays. Variants run one after the other (the
    collections of interleaved variants fall in whichever runs when the count is reached)."""
    cells = []
    for k, fn in variants.items():
        with _full_collections() as in_gc:
            t = statistics.mean(timed(fn) for _ in range(calls))
        cells.append(f"{k} mean {_fmt(t)}, of it full collections {_fmt(in_gc[0] / calls)}")
    print(f"{name:28s} {calls} calls in a row: " + "; ".join(cells), flush=True)


@contextmanager
def _full_collections() -> Iterator[list[float]]:
    """Seconds the garbage collector spends in full (oldest-generation) collections inside the block, as a running
    total in a one-item list: a collection of every object the process holds, tens of milliseconds that an eager
    loop pays every few steps and a median of the steps does not show."""
    total, start = [0.0], [0.0]

    def note(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                start[0] = time.perf_counter()
            else:
                total[0] += time.perf_counter() - start[0]
    gc.callbacks.append(note)
    try:
        yield total
    finally:
        gc.callbacks.remove(note)


def _fmt(t: float) -> str:
    return f"{t * 1e3:8.2f} ms" if t >= 1e-3 else f"{t * 1e6:8.1f} µs"


def mlp_step(device: str, rounds: int) -> None:
    rng = np.random.default_rng(0)

    def make() -> Callable[[Tensor, Tensor], Tensor]:
        Tensor.manual_seed(0)
        l1, l2 = nn.Linear(64, 128, device=device), nn.Linear(128, 10, device=device)
        opt = nn.optim.Adam([l1.weight, l1.bias, l2.weight, l2.bias], lr=1e-3)

        def step(x: Tensor, y: Tensor) -> Tensor:
            opt.zero_grad()
            loss = l2(l1(x).relu()).cross_entropy(y).backward()
            opt.step()
            return loss
        return step

    xs = [Tensor(rng.standard_normal((32, 64)).astype(np.float32), device=device).realize() for _ in range(4)]
    ys = [Tensor(rng.integers(0, 10, 32).astype(np.int32), device=device).realize() for _ in range(4)]
    _training_steps("MLP Adam step (64-128-10)", make, xs, ys, rounds, 20, rtol=1e-5)


def _training_steps(title: str, make: Callable[[], Callable[[Tensor, Tensor], Tensor]], xs: list[Tensor],
                    ys: list[Tensor], rounds: int, per_round: int, rtol: float) -> None:
    """Three copies of a training step from `make` (eager with the schedule cache off, eager with it on, @jit),
    checked to give the same losses on three batches, then timed in turns on the batches in rotation."""
    eager_off, eager_on, jitted = make(), make(), uopviz.jit(make())
    schedule_cache.enabled = False
    a = [eager_off(xs[k], ys[k]).item() for k in range(3)]
    schedule_cache.enabled = True
    b = [eager_on(xs[k], ys[k]).item() for k in range(3)]
    c = [jitted(xs[k], ys[k]).item() for k in range(3)]
    assert a == b and np.allclose(a, c, rtol=rtol), (a, b, c)
    k = iter(range(10 ** 9))

    def on_next(step: Callable[[Tensor, Tensor], Tensor]) -> float:
        i = next(k) % len(xs)
        return step(xs[i], ys[i]).item()
    compare(title, {"eager, cache off": lambda: on_next(eager_off), "eager, cache on": lambda: on_next(eager_on),
                    "@jit": lambda: on_next(jitted)}, rounds, per_round)


def resnet_step(device: str, rounds: int) -> None:
    """The example ResNet's SGD step (widths 16, 32; batch 8 of 16 x 16): its BatchNorms queue their running
    statistics (assign_later) before backward, which backward's replay computes and writes with the gradients."""
    r = example("resnet")
    rng = np.random.default_rng(3)
    xs = [Tensor(rng.random((8, 1, 16, 16), dtype=np.float32), device=device).realize() for _ in range(4)]
    ys = [Tensor(rng.integers(0, 10, 8).astype(np.int32), device=device).realize() for _ in range(4)]
    state = {k: t.numpy() for k, t in r.ResNet(in_channels=1, device=device).state_dict().items()}

    def make() -> Callable[[Tensor, Tensor], Tensor]:
        m = r.ResNet(in_channels=1, device=device)
        m.load_state_dict({k: Tensor(v, device=device) for k, v in state.items()})
        opt = nn.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def step(x: Tensor, y: Tensor) -> Tensor:
            opt.zero_grad()
            loss = m(x).cross_entropy(y).backward()
            opt.step()
            return loss
        return step

    _training_steps("ResNet SGD step (B 8)", make, xs, ys, rounds, 3, rtol=1e-4)


def one_realize(device: str, rounds: int) -> None:
    """A realize of a cached graph against its kernels' own time (the programs run alone, waited for, on inputs in
    the same turn: gemm 512's five inputs do not all stay in cache, and one input run again and again was 25-60 us
    faster on a quiet machine; the rest of what its realize adds is the kernels running slower right after Python
    ran on the calling thread, not realize's own Python): the graph is built before the clock
    starts (its building is timed apart: the front-end's ops, not realize)."""
    rng = np.random.default_rng(1)
    cases: list[tuple[str, tuple[int, ...], Callable[[Tensor, Tensor], Tensor]]] = [
        ("elementwise 4096", (4096,), lambda x, w: (x * 2.0 + 1.0).relu()),
        ("gemm 512", (512, 512), lambda x, w: x @ w)]
    for name, shape, make in cases:
        _one_realize(device, rounds, name, [Tensor(rng.standard_normal(shape).astype(np.float32), device=device)
                                            .realize() for _ in range(5)], make)


def _one_realize(device: str, rounds: int, name: str, xs: list[Tensor],
                 make: Callable[[Tensor, Tensor], Tensor]) -> None:
    w, xs = xs[0], xs[1:]
    k = iter(range(10 ** 9))
    make(xs[0], w).realize()
    jitted = uopviz.jit(lambda x: make(x, w))
    graphs: list[Tensor] = []

    def realize_one() -> None:
        graphs.pop().realize()

    def built() -> Callable[[], None]:
        graphs.extend(make(xs[j % 4], w) for j in range(60))
        return realize_one
    build = statistics.median(timed(lambda: make(xs[next(k) % 4], w)) for _ in range(50))
    samples: dict[str, list[float]] = {"eager, cache off": [], "eager, cache on": [], "@jit": []}
    for _ in range(rounds):
        for key in samples:
            schedule_cache.enabled = key != "eager, cache off"
            run = built() if key != "@jit" else (lambda: jitted(xs[next(k) % 4]))
            samples[key] += [timed(run) for _ in range(50)]
            graphs.clear()
    schedule_cache.enabled = True
    med = {key: statistics.median(v) for key, v in samples.items()}
    alone = _kernels_alone(xs, w, make, 50)
    own = statistics.median(sum(prog(h, v, wait=True) or 0.0 for prog, h, v in runs) for runs in alone)
    off, on = med["eager, cache off"], med["eager, cache on"]
    print(f"realize: {name:19s} {len(alone[0])} kernel(s) alone {_fmt(own)}; realize (graph built before) cache off "
          f"{_fmt(off)}, cache on {_fmt(on)}: adds {_fmt(on - own)} (off: {_fmt(off - own)}); @jit call "
          f"{_fmt(med['@jit'])}; building the graph {_fmt(build)}", flush=True)


def _kernels_alone(xs: list[Tensor], w: Tensor, make: Callable[[Tensor, Tensor], Tensor],
                   count: int) -> list[list[tuple[Any, list[Any], tuple[int, ...]]]]:
    """`count` runs of one realize's kernels, each on its own program and handles, the inputs taken in the turn the
    realizes take them (each realize reads another input: in cache or not, as theirs are) and the outputs and
    intermediates in one memory for all, as the memory pool gives a realize the memory its predecessor freed."""
    from uopviz.realize import capture
    from uopviz.runtime import buffer as buffers
    inputs = {w.uop.src[0]} | {x.uop.src[0] for x in xs}
    turns, written = [], None
    for x in xs:
        with capture() as launches:
            make(x, w).realize()
        written = written or [[buffers.handle(b) for b in la.buffers] for la in launches]
        turns.append([(la.prog, [buffers.handle(b) if b in inputs else written[i][j] for j, b in enumerate(la.buffers)],
                       tuple(la.vals.values())) for i, la in enumerate(launches)])
    return [turns[k % len(turns)] for k in range(count)]


def gpt(device: str, rounds: int, phases: bool = False) -> None:
    g = example("gpt")
    cfg = g.GPTConfig()
    rng = np.random.default_rng(2)
    batches = [tuple(Tensor(a, device=device).realize() for a in g.text_batches(g.TEXT, cfg, 8, seed=s)())
               for s in range(4)]
    model = g.GPT(cfg, device, seed=0)
    t0 = time.perf_counter()
    fwd = uopviz.jit(lambda x: model(x))
    ref = model(batches[0][0]).numpy()
    print(f"GPT forward: first call {time.perf_counter() - t0:.1f} s", flush=True)
    for _ in range(2):
        np.testing.assert_allclose(fwd(batches[0][0]).numpy(), ref, rtol=1e-4, atol=1e-5)
    k = iter(range(10 ** 9))
    compare("GPT forward (B 8, T 64)", {
        "eager, cache off": lambda: model(batches[next(k) % 4][0]).realize(),
        "eager, cache on": lambda: model(batches[next(k) % 4][0]).realize(),
        "@jit": lambda: fwd(batches[next(k) % 4][0]),
    }, rounds, 3)

    def make() -> Callable[[Tensor, Tensor], Tensor]:
        m = g.GPT(cfg, device, seed=0)
        return g.eager_step(m, nn.optim.AdamW(m.parameters(), lr=3e-3))

    eager_off, eager_on, jitted = make(), make(), uopviz.jit(make())
    t0 = time.perf_counter()
    first = eager_on(*batches[0]).item()
    print(f"GPT training step: first call {time.perf_counter() - t0:.1f} s", flush=True)
    schedule_cache.enabled = False
    losses = [eager_off(*batches[0]).item(), eager_off(*batches[1]).item()]
    schedule_cache.enabled = True
    assert [first, eager_on(*batches[1]).item()] == losses
    assert np.allclose([jitted(*batches[0]).item(), jitted(*batches[1]).item()], losses, rtol=1e-5)
    jitted(*batches[2])
    compare("GPT AdamW step (B 8, T 64)", {
        "eager, cache off": lambda: eager_off(*batches[next(k) % 4]).item(),
        "eager, cache on": lambda: eager_on(*batches[next(k) % 4]).item(),
        "@jit": lambda: jitted(*batches[next(k) % 4]).item(),
    }, rounds, 2)
    if phases:
        step_phases(g, device, batches, rounds)
    collections_per_call("GPT AdamW step, GC", {
        "eager, cache on": lambda: eager_on(*batches[next(k) % 4]).item(),
        "@jit": lambda: jitted(*batches[next(k) % 4]).item(),
    }, 60)
    decode(g, model, device, rng)


def step_phases(g: Any, device: str, batches: list[tuple[Tensor, ...]], rounds: int) -> None:
    """Where an eager GPT step's own time goes: per phase (building the loss's graph, backward, the optimizer's
    step, reading the loss) its wall time less its launches' (every launch waits inside `profiling`, so a launch's
    wall time is its kernel's), medians over rounds x 4 steps: the Python of each phase. What is left of eager's
    cost over @jit is roughly their sum, less @jit's own launch loop."""
    from uopviz.realize import profiling
    model = g.GPT(g.GPTConfig(), device, seed=0)
    opt = nn.optim.AdamW(model.parameters(), lr=3e-3)
    launched = [0.0]

    def note(launch: Any, vals: tuple[int, ...], t: float, wall: float) -> None:
        launched[0] += wall

    def phase(name: str, fn: Callable[[], Any]) -> Any:
        launched[0], t0 = 0.0, time.perf_counter()
        out = fn()
        own[name].append(time.perf_counter() - t0 - launched[0])
        return out
    own: dict[str, list[float]] = {n: [] for n in ("graph of the loss", "backward", "optimizer step", "item")}
    with profiling(note):
        for k in range(rounds * 4 + 2):
            opt.zero_grad()
            x, y = batches[k % 4]
            loss = phase("graph of the loss", functools.partial(model.loss, x, y))
            phase("backward", loss.backward)
            phase("optimizer step", opt.step)
            phase("item", loss.item)
            if k < 2:  # the first steps build and schedule: left out
                for v in own.values():
                    v.pop()
    print(f"{'GPT AdamW step, phases':28s} wall time less its launches': " +
          ", ".join(f"{n} {_fmt(statistics.median(v))}" for n, v in own.items()), flush=True)


def decode(g: Any, model: Any, device: str, rng: np.random.Generator) -> None:
    """Greedy decoding without @jit: the tokens so far as a slice of symbolic length of a context buffer (as the
    example's generate does under @jit), one eager forward per token."""
    cfg = model.cfg
    n = uopviz.Variable("n", 1, cfg.block_size)

    @uopviz.jit
    def next_token(idx: Tensor) -> Tensor:
        return model(idx)[:, -1].argmax(-1)

    def tokens(count: int, jitted: bool = False) -> list[float]:
        out = [int(t) for t in rng.integers(0, cfg.vocab_size, 3)]
        ctx = np.zeros((1, cfg.block_size), dtype=np.int32)
        times = []
        for _ in range(count):
            t0 = time.perf_counter()
            ctx[0, :len(out)] = out
            idx = Tensor(ctx, device=device)[:, :n.bind(len(out))]
            if jitted:
                out.append(int(next_token(idx.realize()).item()))
            else:
                out.append(int(model(idx)[:, -1].argmax(-1).item()))
            times.append(time.perf_counter() - t0)
        return times

    t0 = time.perf_counter()
    tokens(1)
    print(f"decode without @jit: first token {time.perf_counter() - t0:.1f} s", flush=True)
    schedule_cache.enabled = False
    off = statistics.median(tokens(8)[3:])
    schedule_cache.enabled = True
    hits = schedule_cache.hits, schedule_cache.misses
    on = statistics.median(tokens(24)[3:])
    hits = schedule_cache.hits - hits[0], schedule_cache.misses - hits[1]
    jit = statistics.median(tokens(24, jitted=True)[3:])
    print(f"{'decode, growing length':28s} per token after the first 3: cache off {_fmt(off)}, cache on {_fmt(on)} "
          f"({hits[0]} hits, {hits[1]} misses over 24 tokens), @jit {_fmt(jit)}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="CPU")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-gpt", action="store_true")
    ap.add_argument("--phases", action="store_true", help="also where an eager GPT step's own time goes, by phase")
    args = ap.parse_args()
    print(f"device {args.device}; medians of interleaved rounds; x: the time over @jit's", flush=True)
    one_realize(args.device, args.rounds)
    mlp_step(args.device, args.rounds)
    resnet_step(args.device, args.rounds)
    if not args.skip_gpt:
        gpt(args.device, args.rounds, args.phases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
