"""A schedule's kernels compiled side by side (uopviz.parallel, issue 29 item 4): lowered in build workers (other
processes) and here, giving the very kernels and results of compiling them one by one; kernels lowered before read
back from disk, none sent to a worker; a long compile's progress line on a terminal only. Counted and compared, not
timed."""

from __future__ import annotations

import io
import os
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from uopviz import Tensor, compiler, lowered_cache, parallel
from uopviz.pipeline import calls_of, lower, schedule
from uopviz.realize import _key, schedule_cache
from uopviz.runtime import cpu
from uopviz.runtime import device as devices
from uopviz.runtime.cpu import CPURuntime
from uopviz.search.executor import flatten
from uopviz.uop.ops import Ops, UOp

X = np.random.default_rng(0).standard_normal((32, 48)).astype(np.float32)


def outputs() -> list[Tensor]:
    """Several kernels of different shapes and ops, realized in one schedule."""
    x = Tensor(X, device="CPU")
    return [x.sin().sum(1), (x * 2.0 + 1.0).exp2(), x.relu().max(0), (x @ x.T).relu(), x.softmax(-1)]


def want() -> list[np.ndarray]:
    e = np.exp(X - X.max(-1, keepdims=True))
    return [np.sin(X).sum(1), np.exp2(X * 2 + 1), np.maximum(X, 0).max(0), np.maximum(X @ X.T, 0),
            e / e.sum(-1, keepdims=True)]


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing compiled yet: an empty disk cache, compile_kernel's cache and realize's schedule cache out of the way."""
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiler, "_programs", OrderedDict())
    monkeypatch.setattr(schedule_cache, "enabled", False)
    monkeypatch.setattr(parallel, "stats", {"here": 0, "workers": 0, "disk": 0})


def keys() -> list[tuple]:
    outs = outputs()
    return [_key(c) for c in calls_of(schedule([t.uop for t in outs])) if c.ast.op is not Ops.COPY]


def workers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers, started at once, building every kernel sent (this process takes none of them back)."""
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "2")
    monkeypatch.setattr(parallel, "START_POOL_AFTER_S", 0.0)
    monkeypatch.setattr(parallel, "STEAL", False)


@pytest.mark.usefixtures("fresh")
def test_workers_build_every_kernel_and_give_the_kernels_built_one_by_one(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    ks = list(dict.fromkeys(keys()))
    assert len(ks) >= 4
    workers_only(monkeypatch)
    compiled: list[str] = []
    rt = devices.get("CPU")
    real = rt.compile
    monkeypatch.setattr(rt, "compile", lambda k: compiled.append(k.name) or real(k))
    parallel.compile_all(ks)
    assert parallel.stats == {"here": 0, "workers": len(ks), "disk": 0}
    assert sorted(compiled) == sorted(compiler.kept(k)[0].name for k in ks)  # each program made here once
    from_workers = {k: compiler.kept(k)[0] for k in ks}
    compiler._programs.clear()
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path / "other"))  # nothing lowered there yet
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "0")
    parallel.compile_all(ks)
    assert parallel.stats["here"] == len(ks)
    for k in ks:
        one = compiler.kept(k)[0]
        assert (from_workers[k].source, from_workers[k].name) == (one.source, one.name)
        assert from_workers[k].linear is one.linear  # the same graph (hash-consed)


@pytest.mark.usefixtures("fresh")
@pytest.mark.parametrize("lowered_by", ["workers", "here"])
def test_on_a_warm_cache_every_kernel_is_read_back_and_none_is_sent_to_a_worker(
        lowered_by: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process (compile_kernel's cache empty) whose kernels were lowered before, by workers or one by one:
    each is read back lowered, identical, and no worker is started or sent anything."""
    ks = list(dict.fromkeys(keys()))
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "2" if lowered_by == "workers" else "0")
    monkeypatch.setattr(parallel, "START_POOL_AFTER_S", 0.0)
    monkeypatch.setattr(parallel, "STEAL", False)
    parallel.compile_all(ks)
    before = {k: compiler.kept(k)[0] for k in ks}
    compiler._programs.clear()
    workers_only(monkeypatch)
    sent: list[object] = []
    monkeypatch.setattr(parallel, "_get_pool", lambda n: sent.append(n) or pytest.fail("a worker was asked"))
    monkeypatch.setattr(parallel, "stats", {"here": 0, "workers": 0, "disk": 0})
    parallel.compile_all(ks)
    assert parallel.stats == {"here": 0, "workers": 0, "disk": len(ks)} and sent == []
    for k in ks:
        again = compiler.kept(k)[0]
        assert (again.source, again.name, again.params, again.threads) == \
            (before[k].source, before[k].name, before[k].params, before[k].threads)
        assert again.linear is before[k].linear


@pytest.mark.usefixtures("fresh")
def test_a_kernel_read_back_or_built_by_a_worker_has_its_bounds_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its bounds were checked by the worker, or before it was kept: the realizing process does not check again."""
    ks = list(dict.fromkeys(keys()))
    workers_only(monkeypatch)
    checks: list[str] = []
    real = compiler.check_bounds
    monkeypatch.setattr(compiler, "check_bounds", lambda linear, name: checks.append(name) or real(linear, name))
    parallel.compile_all(ks)
    assert parallel.stats["workers"] == len(ks) and checks == []
    compiler._programs.clear()
    parallel.compile_all(ks)
    assert parallel.stats["disk"] == len(ks) and checks == []


@pytest.mark.usefixtures("fresh")
def test_a_kernel_out_of_bounds_fails_in_the_worker_and_is_not_kept(tmp_path: Path) -> None:
    out, a = UOp.param(0, (4,)), UOp.param(1, (4,))
    i = UOp.range(8, 0)
    ast = UOp.sink(out.index(i).store(a.index(i).load() * 2.0).end(i))  # 8 elements of buffers of 4
    rt = devices.get("CPU")
    env = {k: os.environ[k] for k in parallel.ENV_PASSED if k in os.environ}
    name = lowered_cache.key(ast, "CPU", (), rt.target)
    assert name is not None
    built = parallel._build(env, flatten(ast), [], rt.target, name)
    assert built.error is not None and "KernelBoundsError" in built.error
    assert lowered_cache.load(name, rt.target) is None and not list((tmp_path / "cpu").glob("*.so"))  # nothing compiled


@pytest.mark.usefixtures("fresh")
def test_the_last_batch_is_split_across_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once lowering has ended nothing else runs: the source still waiting compiles as one batch per core, of about
    the same size, side by side; the kernels run right."""
    runs: list[str] = []
    real = cpu.run_compiler
    monkeypatch.setattr(cpu, "run_compiler", lambda args, stdin, dev, name: runs.append(name) or
                        real(args, stdin, dev, name))
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "0")
    monkeypatch.setattr(parallel, "SPLIT_BYTES", 1)
    monkeypatch.setattr(parallel, "IDLE_BYTES", 10**9)  # nothing compiled before lowering ends
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    outs = outputs()
    outs[0].realize(*outs[1:])
    for got, w in zip(outs, want(), strict=True):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-4)
    batches = [int(r.split()[2]) for r in runs if r.startswith("batch of ")]
    assert len(batches) == 2 and sum(batches) + len(runs) - 2 == len(set(keys())), runs


def test_balanced_groups_are_of_about_the_same_source_size() -> None:
    class K:  # only a kernel's source is read
        def __init__(self, n: int) -> None:
            self.source = "x" * n
    sizes = [900, 500, 400, 300, 300, 100]
    groups = parallel._balanced([((None, "CPU", ()), K(n)) for n in sizes], 2)
    totals = sorted(sum(len(k.source) for _, k in g) for g in groups)
    assert totals == [1200, 1300] and sum(len(g) for g in groups) == len(sizes)
    assert len(parallel._balanced([((None, "CPU", ()), K(5))], 3)) == 1  # never an empty batch


@pytest.mark.usefixtures("fresh")
def test_a_worker_only_lowers_and_the_libraries_are_compiled_here_in_one_compiler_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A worker's _build compiles nothing; this process compiles the schedule's CPU kernels in batches (one C compiler
    run for all of them here), each kernel's library a link to the batch's, and runs them right."""
    ast, device, opts = keys()[0]
    rt = devices.get(device)
    assert isinstance(rt, CPURuntime)
    env = {k: os.environ[k] for k in parallel.ENV_PASSED if k in os.environ}
    built = parallel._build(env, flatten(ast), [o.to_json() for o in opts], rt.target, None)
    assert built.error is None and not list(tmp_path.glob("cpu/*.so"))  # lowered, not compiled
    runs: list[str] = []
    real = cpu.run_compiler
    monkeypatch.setattr(cpu, "run_compiler", lambda args, stdin, dev, name: runs.append(name) or
                        real(args, stdin, dev, name))
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "0")
    monkeypatch.setattr(parallel, "SPLIT_BYTES", 10**9)  # the last batch whole (its split: the test above)
    monkeypatch.setattr(parallel, "IDLE_BYTES", 10**9)  # and the only one (the first one early: the test below)
    outs = outputs()
    outs[0].realize(*outs[1:])
    for got, w in zip(outs, want(), strict=True):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-4)
    libs = [compiler.kept(k)[0] for k in set(keys())]
    paths = {rt.kernel_library(k) for k in libs}
    assert runs == [f"batch of {len(libs)} kernels"], runs
    assert len(paths) == len(libs) and len({p.stat().st_ino for p in paths}) == 1  # one library


@pytest.mark.usefixtures("fresh")
def test_while_no_compiler_runs_the_first_kernel_compiles_as_the_next_ones_lower(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiler left idle until BATCH_BYTES wait starts late: the first kernel lowered goes to the compiler at
    once, alone, and each of the schedule's keys is made only as its turn to lower comes (opts chosen then); the
    kernels run right."""
    import uopviz.realize as realize
    events: list[str] = []
    real, real_key = cpu.run_compiler, realize._key
    monkeypatch.setattr(cpu, "run_compiler", lambda args, stdin, dev, name: events.append(f"cc {name}") or
                        real(args, stdin, dev, name))
    monkeypatch.setattr(realize, "_key", lambda call: events.append("key") or real_key(call))
    monkeypatch.setattr(parallel, "lower", lambda *a: events.append("lower") or lower(*a))
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "0")
    monkeypatch.setattr(parallel, "IDLE_BYTES", 1)
    monkeypatch.setattr(parallel, "BATCH_BYTES", 10**9)
    outs = outputs()
    outs[0].realize(*outs[1:])
    for got, w in zip(outs, want(), strict=True):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-4)
    ran = [e for e in events if e.startswith("cc ") and "uopviz_pool" not in e and "--version" not in e]
    assert not ran[0].startswith("cc batch of") and len(ran) > 1, events
    assert [e for e in events if e in ("key", "lower")][:4] == ["key", "lower", "key", "lower"], events


@pytest.mark.usefixtures("fresh")
@pytest.mark.parametrize(("workers", "start_after"), [("0", 0.0), ("1", 0.0), ("2", 0.0), ("1", 1e-9), ("1", 1e9)])
def test_a_realize_of_several_kernels_is_right_however_they_are_shared(workers: str, start_after: float,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers started at once, after the first kernel, or never (the compile is quick): the same results."""
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", workers)
    monkeypatch.setattr(parallel, "START_POOL_AFTER_S", start_after)
    if start_after > 0:
        parallel._drop_pool()  # not started yet
    outs = outputs()
    outs[0].realize(*outs[1:])
    n = len(set(keys()))
    assert parallel.stats["here"] + parallel.stats["workers"] == n
    if workers == "0":
        assert parallel.stats["workers"] == 0
    if start_after > 1:
        assert parallel.stats["workers"] == 0 and not parallel._pool  # no worker was started
    for got, w in zip(outs, want(), strict=True):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("fresh")
def test_a_kernel_that_fails_in_a_worker_fails_in_schedule_order_with_its_own_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from uopviz.runtime.device import CompileError
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "1")
    monkeypatch.setattr(parallel, "START_POOL_AFTER_S", 0.0)
    monkeypatch.setattr(parallel, "STEAL", False)
    monkeypatch.setenv("CC", "false")  # every C compile fails, in the workers and here
    monkeypatch.setattr(devices.get("CPU"), "cc", "false")
    outs = outputs()
    with pytest.raises(CompileError):
        outs[0].realize(*outs[1:])


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def slow_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel lowered here, each compile 0.1 s longer, progress shown after 0.2 s."""
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "0")
    monkeypatch.delenv("UOPVIZ_COMPILE_PROGRESS", raising=False)
    monkeypatch.setattr(parallel, "PROGRESS_AFTER_S", 0.2)
    rt = devices.get("CPU")
    real = rt.compile
    monkeypatch.setattr(rt, "compile", lambda k: time.sleep(0.1) or real(k))


@pytest.mark.usefixtures("fresh")
def test_a_slow_compile_shows_its_progress_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    slow_compiles(monkeypatch)
    tty = FakeTTY()
    monkeypatch.setattr("sys.stderr", tty)
    outs = outputs()
    outs[0].realize(*outs[1:])
    n = len(set(keys()))
    text = tty.getvalue()
    assert f"\ruopviz: compiling {n} of {n} kernels" in text
    assert text.endswith("\n") and text.count("\n") == 1  # one line, rewritten in place


@pytest.mark.usefixtures("fresh")
def test_no_progress_when_not_a_terminal_or_not_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    slow_compiles(monkeypatch)
    log = io.StringIO()
    parallel.compile_all(keys(), stream=log)  # slow, but not a terminal
    assert log.getvalue() == ""
    compiler._programs.clear()
    monkeypatch.setattr(parallel, "PROGRESS_AFTER_S", 600.0)
    tty = FakeTTY()
    parallel.compile_all(keys(), stream=tty)  # a terminal, but not slow
    assert tty.getvalue() == ""
    compiler._programs.clear()
    monkeypatch.setattr(parallel, "PROGRESS_AFTER_S", 0.2)
    monkeypatch.setenv("UOPVIZ_COMPILE_PROGRESS", "1")  # asked for: lines in a log
    parallel.compile_all(keys(), stream=log)
    assert "uopviz: compiling" in log.getvalue() and "\r" not in log.getvalue()
    compiler._programs.clear()
    monkeypatch.setenv("UOPVIZ_COMPILE_PROGRESS", "0")  # turned off: not even on a terminal
    parallel.compile_all(keys(), stream=tty)
    assert tty.getvalue() == ""


@pytest.mark.usefixtures("fresh")
def test_in_a_notebook_the_progress_is_a_line_of_the_cell_output(monkeypatch: pytest.MonkeyPatch) -> None:
    from uopviz import hooks
    slow_compiles(monkeypatch)
    lines: list[str] = []

    class Line:
        def update(self, text: str) -> None:
            lines.append(text)
    monkeypatch.setattr(hooks, "compile_display", Line)  # what uopviz/__init__.py gives under an IPython kernel
    parallel.compile_all(keys(), stream=io.StringIO())
    n = len(set(keys()))
    assert any(f"compiling {n} of {n} kernels" in t for t in lines)
    assert lines[-1].startswith(f"uopviz: compiled {n} of {n} kernels in ")
    lines.clear()
    monkeypatch.setattr(hooks, "compile_display", lambda: None)  # not in a notebook
    compiler._programs.clear()
    parallel.compile_all(keys(), stream=io.StringIO())
    assert lines == []


def test_the_cyclic_collector_is_off_while_kernels_lower_and_as_it_was_after(fresh: None,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "0")
    seen: list[bool] = []
    real = parallel.lower

    def lower(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return real(*args, **kwargs)
    monkeypatch.setattr(parallel, "lower", lower)
    assert gc.isenabled()
    parallel.compile_all(keys())
    assert seen and not any(seen) and gc.isenabled()


@pytest.mark.usefixtures("fresh")
def test_while_a_trace_records_kernels_lower_under_it_once_per_call_and_compile_in_one_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording lowers every kernel here, under the trace (a context each, as compile_kernel made them one by one)
    and still compiles their libraries in one C compiler run, not one each; a second realize inside the trace
    lowers them again (a context per schedule), its libraries already on disk; a kernel one schedule runs twice is
    lowered once."""
    import uopviz
    rt = devices.get("CPU")
    assert isinstance(rt, CPURuntime) and rt.compiler_version  # asked before the runs are counted
    runs: list[str] = []
    real = cpu.run_compiler
    monkeypatch.setattr(cpu, "run_compiler", lambda args, stdin, dev, name: runs.append(name) or
                        real(args, stdin, dev, name))
    monkeypatch.setenv("UOPVIZ_COMPILE_WORKERS", "2")  # never used while recording
    monkeypatch.setattr(parallel, "SPLIT_BYTES", 10**9)
    monkeypatch.setattr(parallel, "IDLE_BYTES", 10**9)
    n = len(set(keys()))
    with uopviz.trace() as tr:
        first = outputs()
        first[0].realize(*first[1:])
        second = outputs()
        second[0].realize(*second[1:])
    assert len([c for c in tr.contexts if c.kind == "kernel"]) == 2 * n
    assert runs == [f"batch of {n} kernels"] and parallel.stats == {"here": 2 * n, "workers": 0, "disk": 0}
    for outs in (first, second):
        for got, w in zip(outs, want(), strict=True):
            np.testing.assert_allclose(got.numpy(), w, rtol=1e-4, atol=1e-4)
    a, b = Tensor(X, device="CPU"), Tensor(X * 2, device="CPU")
    with uopviz.trace() as tr:  # one kernel run twice by a schedule (an optimizer's update of two like parameters)
        a2, b2 = a.exp2(), b.exp2()
        a2.realize(b2)
    assert [c.kind for c in tr.contexts].count("kernel") == 1
    np.testing.assert_allclose(b2.numpy(), np.exp2(X * 2), rtol=1e-5)


@pytest.mark.usefixtures("fresh")
def test_while_a_trace_records_a_kernel_that_fails_raises_its_error_lowered_once() -> None:
    import uopviz
    from uopviz.uop.bounds import KernelBoundsError
    out, a = UOp.param(0, (4,)), UOp.param(1, (4,))
    i = UOp.range(8, 0)
    bad = UOp.sink(out.index(i).store(a.index(i).load() * 2.0).end(i))  # 8 elements of buffers of 4
    good = keys()[0]
    with uopviz.trace() as tr, pytest.raises(KernelBoundsError):
        parallel.compile_all([good, (bad, "CPU", ())])
    assert len([c for c in tr.contexts if c.kind == "kernel"]) == 2
    assert compiler.kept(good) is not None  # the kernel before it compiled
