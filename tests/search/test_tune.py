"""Whole-model tuning (uopviz.tune): a @jit step's `.beam()` and `uopviz beam script.py --budget`. Every kernel of a
step is searched once, most time first, within the budget; results land in the tuning database (a second run
answers from it), and the step computes the same values with the tuned kernels as NumPy does."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz.cli import main
from uopviz.codegen.opt import Opt, OptOps
from uopviz.search.db import TuningDB
from uopviz.search.keys import cache_key
from uopviz.tune import CONTEXT, MIN_SHARE_S, Run, _in_place, _speedup_of, parse_duration, share_s

RNG = np.random.default_rng(7)
A = RNG.standard_normal((13, 11)).astype(np.float32)
B = RNG.standard_normal((11, 7)).astype(np.float32)


def _step(w: Tensor):
    @uopviz.jit
    def step(x: Tensor) -> Tensor:
        return ((x @ w).relu() * 2 + 1).sum(axis=1)
    return step


def _expected(x: np.ndarray) -> np.ndarray:
    return (np.maximum(x @ B, 0) * 2 + 1).sum(axis=1)


@pytest.mark.parametrize(("text", "seconds"), [("300", 300.0), ("90s", 90.0), ("5m", 300.0), ("1.5h", 5400.0),
                                               ("2m30s", 150.0), (" 10S ", 10.0)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "5x", "-3", "0", "0s", "1..5m", "5m3"])
def test_bad_durations_say_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_budget_shares_follow_time_within_bounds() -> None:
    assert share_s(100.0, 30.0, 60.0) == 50.0       # half of what is left for half of the time left
    assert share_s(100.0, 0.1, 60.0) == MIN_SHARE_S  # a small kernel still gets a search that can find something
    assert share_s(3.0, 30.0, 60.0) == 3.0           # never more than is left
    assert share_s(10.0, 0.0, 0.0) == 10.0


def test_jit_beam_tunes_every_kernel_once_then_answers_from_the_database(tmp_path: Path) -> None:
    db = tmp_path / "tuning.db"
    step = _step(Tensor(B))
    x = Tensor(A)
    tuning = step.beam(x, width=1, max_rounds=1, db=db, progress=False, runs=2)
    assert tuning.launches == sum(k.launches for k in tuning.kernels) >= len(tuning.kernels) > 1
    assert [k.before_s for k in tuning.kernels] == sorted((k.before_s for k in tuning.kernels), reverse=True)
    assert all(k.result is not None and not k.result.from_db for k in tuning.kernels)
    assert tuning.step_before_s is not None and tuning.step_after_s is not None
    np.testing.assert_allclose(step(x).numpy(), _expected(A), rtol=1e-5)  # the replay captured again, tuned
    again = _step(Tensor(B)).beam(Tensor(A), width=1, max_rounds=1, db=db, progress=False, runs=2)
    assert all(k.result is not None and k.result.from_db and k.result.compiled == 0 for k in again.kernels)
    assert "answered from the tuning database" in str(again)


def test_the_step_before_and_after_are_timed_in_turns_once_tuning_is_done(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine slows down while tuning (another process's load, modelled as 30 ms more per replay from then
    on) and tuning changes nothing: the step must not read slower after it. Timed before tuning and after it, the
    report said 20x; timed in turns once it is done, both replays meet the same machine."""
    from uopviz.tensor.jit import _Replay
    from uopviz.tune import tune

    def tune_then_slow(*args, **kwargs):
        tuning = tune(*args, **kwargs)
        run = _Replay.run
        monkeypatch.setattr(_Replay, "run", lambda self, *a: (time.sleep(0.03), run(self, *a))[1])
        return tuning
    monkeypatch.setattr("uopviz.tune.tune", tune_then_slow)
    monkeypatch.setattr("uopviz.tune._speedup_of", lambda runs, at, ast, device, opts: 1.0)
    step = _step(Tensor(B))
    tuning = step.beam(Tensor(A), width=1, max_rounds=1, db=tmp_path / "t.db", progress=False, runs=3)
    assert tuning.step_before_s is not None and tuning.step_after_s is not None
    assert tuning.step_before_s > 0.03 and tuning.step_after_s > 0.03
    assert 0.5 < tuning.step_after_s / tuning.step_before_s < 2


def test_a_step_tuned_into_its_own_database_is_captured_again_with_its_opts(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Tuning into a database that is not the default one: the step is captured again with the opts tuning stored
    there, not the default database's or the heuristic's (its "after" would time kernels tuning did not choose).
    Each kernel's result is made its unoptimized candidate, which no heuristic picks for these kernels."""
    db = tmp_path / "t.db"
    first = _step(Tensor(B)).beam(Tensor(A), width=1, max_rounds=1, db=db, progress=False, runs=1)
    with TuningDB(db) as tdb:
        for k in first.kernels:
            assert k.result is not None and k.result.search_id is not None
            plain = next(c for c in tdb.candidates(k.result.search_id) if c.opts == [] and c.median_s)
            tdb.choose(k.result.search_id, plain.id, "the test's choice: no opts")
    monkeypatch.setattr("uopviz.tune._speedup_of", lambda runs, at, ast, device, opts: 1.0)
    step = _step(Tensor(B))
    tuning = step.beam(Tensor(A), width=1, max_rounds=1, db=db, progress=False, runs=1)
    assert all(k.result is not None and k.result.from_db and k.opts == () for k in tuning.kernels)
    assert any(k.step_opts for k in tuning.kernels)  # the step had the heuristic's opts before
    (replay,) = step.replays.values()
    assert all(launch.key[2] == () for launch in replay.launches if launch.key is not None)
    np.testing.assert_allclose(step(Tensor(A)).numpy(), _expected(A), rtol=1e-5)


def test_a_pick_slower_on_the_steps_buffers_keeps_the_steps_opts(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a search's pick, timed again on the step's buffers, is slower than the kernel the step ran, tuning
    keeps the step's opts: the database's result becomes the search's candidate with them (saying why), the report
    says so and counts no gain. The step runs unoptimized kernels here (a candidate every search times), and every
    re-timing finds the pick 1.5x slower."""
    monkeypatch.setattr("uopviz.realize.default_opts", lambda ast, device: ())
    monkeypatch.setattr("uopviz.tune._speedup_of", lambda runs, at, ast, device, opts: 1.5 if opts else 1.0)
    w = RNG.standard_normal((64, 64)).astype(np.float32)
    step = uopviz.jit(lambda x: (x @ Tensor(w)).sum(axis=1))
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    tuning = step.beam(Tensor(x), width=1, max_rounds=1, db=tmp_path / "t.db", progress=False, runs=1)
    kept = [k for k in tuning.kernels if k.kept is not None]
    assert kept and all(k.result is not None and k.result.opts for k in kept)  # the searches picked opts
    assert all(k.kept == 1.5 and k.opts == () and k.after_s == k.before_s and k.tuned_name == k.name for k in kept)
    with TuningDB(tmp_path / "t.db") as db:
        for k in kept:
            hit = db.lookup(cache_key(k.ast, k.device))
            search = db.search(hit.search_id) if hit is not None and hit.search_id is not None else None
            assert hit is not None and hit.opts == [] and search is not None
            assert search.chosen is not None and "1.50x the time of the step's opts" in search.chosen
    assert "the step's opts kept" in str(tuning)
    assert [k["kept_step_opts"] for k in tuning.to_json()["kernels"] if k["kept_step_opts"]] == [1.5] * len(kept)
    np.testing.assert_allclose(step(Tensor(x)).numpy(), (x @ w).sum(axis=1), rtol=1e-4)


def test_a_pick_is_checked_against_the_steps_kernel_by_their_fastest_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a loaded machine other processes add to most runs of a short kernel: the pick (0.9 ms, three runs of five
    slowed to 3 ms) is faster than the step's kernel (1 ms), which a median would read as 3x slower."""
    times = iter([3e-3, 9e-4, 3e-3, 9e-4, 3e-3])
    monkeypatch.setattr("uopviz.tune.compile_kernel", lambda ast, device, opts: (None, "pick"))
    monkeypatch.setattr("uopviz.tune._in_place", lambda runs, at, prog=None: next(times) if prog else 1e-3)
    run = Run((Tensor(A).uop, "CPU", ()), "kernel", lambda handles, vals, wait=False: None, [], ())
    assert _speedup_of([run], [(0, 2)], run.key[0], "CPU", (Opt(OptOps.NOLOCALS),)) == pytest.approx(0.9)


def test_a_launch_is_timed_where_it_runs_in_the_step() -> None:
    """A launch is timed right after the launches before it in the step (CONTEXT of them, untimed), not after
    itself: its own previous run leaves its data in the caches, which the step does not. A pick runs in the
    launch's place, on its buffers."""
    log: list[str] = []

    def prog(name: str, seconds: float):
        def run(handles, vals, wait=False):
            log.append(f"{name} {handles[0]} {vals}")
            return seconds
        return run
    runs = [Run(None, f"k{i}", prog(f"k{i}", i / 1000), [f"buf{i}"], (i,)) for i in range(8)]
    assert _in_place(runs, 6) == 6e-3
    assert log == [f"k{i} buf{i} ({i},)" for i in range(6 - CONTEXT, 7)]
    log.clear()
    assert _in_place(runs, 1, prog("pick", 0.5)) == 0.5
    assert log == ["k0 buf0 (0,)", "pick buf1 (1,)"]


def test_a_spent_budget_leaves_the_rest_unsearched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 10_000, 7))  # every reading of the clock is 7 s later: the 10 s budget lasts one search
    monkeypatch.setattr("uopviz.tune.time", SimpleNamespace(perf_counter=lambda: float(next(clock))))
    tuning = _step(Tensor(B)).beam(Tensor(A), width=1, max_rounds=1, db=tmp_path / "t.db", progress=False, runs=1,
                                   budget_s=10)
    searched = [k for k in tuning.kernels if k.result is not None]
    assert len(searched) == 1 and searched[0] is tuning.kernels[0]  # the kernel with the most time
    assert all(k.skipped == "not searched: the budget was spent" and k.after_s == k.before_s
               for k in tuning.kernels[1:])


def test_uopviz_beam_script_tunes_what_the_script_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        from uopviz import Tensor
        x = Tensor(np.arange(35, dtype=np.float32).reshape(5, 7))
        print("total", float((x * 2).sum().item()))
    """))
    db = tmp_path / "tuning.db"
    args = ["beam", str(script), "--beam", "1", "--rounds", "1", "--db", str(db), "--budget", "2m", "--json"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("total 1190.0\n")
    doc = json.loads(out[out.index("{"):])
    assert doc["budget_s"] == 120.0 and doc["launches"] >= 1
    assert all(k["from_db"] is False and k["skipped"] is None for k in doc["kernels"])
    assert main(args) == 0
    doc = json.loads((out := capsys.readouterr().out)[out.index("{"):])
    assert all(k["from_db"] is True for k in doc["kernels"])


@pytest.mark.parametrize(("body", "args", "status", "said"), [
    ("raise RuntimeError('broken model')", [], 1, "broken model"),
    ("import sys; sys.exit(3)", [], 1, "exited with status 3"),
    ("x = 1", [], 1, "ran no kernel"),
    ("x = 1", ["gemm"], 2, "tuned alone"),
    ("x = 1", ["--small"], 2, "tuned alone"),
])
def test_uopviz_beam_script_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, args: list[str],
                                   status: int, said: str) -> None:
    script = tmp_path / "model.py"
    script.write_text(body + "\n")
    argv = sys.argv[:]
    assert main(["beam", str(script), *args, "--db", str(tmp_path / "t.db")]) == status
    assert said in capsys.readouterr().err
    assert sys.argv == argv  # the script's argv is put back


def test_budget_needs_a_script_and_a_duration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["beam", "gemm", "--small", "--budget", "5m"]) == 2
    assert "--budget applies to a script" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["beam", "model.py", "--budget", "soon"])
    assert e.value.code == 2
    assert main(["beam", "absent.py"]) == 2
