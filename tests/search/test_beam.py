"""BEAM search: it keeps only verified kernels, remembers everything in the tuning database, answers a repeated
search from it, resumes an interrupted one; `uopviz beam`; realize() using the results and UOPVIZ_BEAM."""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from uopviz.kernels import ZOO

from tests.search.support import REPO, kernel
from uopviz.cli import main
from uopviz.cli.beam import _coloured
from uopviz.codegen.opt import Opt, OptOps
from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, schedule
from uopviz.runtime import device as devices
from uopviz.runtime.cpu import CPURuntime
from uopviz.search import BeamResult, beam
from uopviz.search import executor as executor_module
from uopviz.search.beam import FINAL_REPEATS, BeamError, Progress, _Node, beam_many
from uopviz.search.db import SearchBusyError, TuningDB
from uopviz.search.executor import GIVEN_UP, LocalExecutor, Pool, build_candidate, flatten, unflatten
from uopviz.search.keys import cache_key
from uopviz.search.policy import default_opts
from uopviz.search.timing import Workbench
from uopviz.target import Kernel
from uopviz.uop.ops import AxisType, UOp

beam_module = sys.modules["uopviz.search.beam"]  # `uopviz.search.beam` is the function


def search(db: Path, name: str = "gemm", **kw: Any) -> BeamResult:
    ast, _ = kernel(name)
    return beam(ast, 2, "CPU", db=db, max_rounds=kw.pop("max_rounds", 2), progress=False, **kw)


def final_check(db_path: Path, r: BeamResult) -> int:
    """How many candidates a search's final check stored (its last round re-times earlier ones)."""
    with TuningDB(db_path) as db:
        return sum(c.round == r.rounds and c.compile_s is None for c in db.candidates(r.search_id))


def run_opts(ast: UOp, bufs: list[UOp], opts: list[Opt] | tuple[Opt, ...]) -> np.ndarray:
    from uopviz.runtime import buffer as buffers
    _, prog = compile_kernel(ast, "CPU", list(opts))
    prog([buffers.handle(b) for b in bufs], wait=True)
    return buffers.to_numpy(bufs[0]).copy()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "beam.db"


# ---- the search ----
def test_search_finds_opts_that_verify(db_path: Path) -> None:
    ast, bufs = kernel("gemm")
    r = beam(ast, 2, "CPU", db=db_path, max_rounds=2, progress=False)
    np.testing.assert_allclose(run_opts(ast, bufs, r.opts), run_opts(ast, bufs, []), rtol=1e-5, atol=1e-6)
    with TuningDB(db_path) as db:
        (info,) = db.searches()
        cands = db.candidates(info.id)
        assert info.status == "done" and info.params == {"beam": 2, "max_rounds": 2, "threshold": 0.01}
        final = [c for c in cands if c.round == r.rounds]  # the final check: the winner, the heuristic's, no opts
        built = [c for c in cands if c.round < r.rounds]
        assert (r.kernel_name, r.from_db, r.compiled) == ("r_L15_L10_R12", False, len(built))
        assert 2 <= len(final) <= 3 and [] in [c.opts for c in final]
        assert all(c.compile_s is None and len(c.samples) == FINAL_REPEATS for c in final)
        assert {c.program_hash for c in final} <= {c.program_hash for c in built}
        timed = [c for c in built if c.samples]
        assert all(c.error is None and c.program_hash and c.compile_s is not None and c.uop_count for c in timed)
        assert r.time_s == min(c.median_s for c in final) == info.best_median_s
        assert cands[0].opts == [] and cands[0].parent_id is None and r.checked
        # the result's three times are the final check's, taken in turns (a round's times may be luck)
        assert r.unoptimized_s == next(c.median_s for c in final if c.opts == [])
        assert {c.round for c in cands} == set(range(r.rounds + 1))
        assert all(c.parent_id is not None for c in cands[1:])
        assert db.lookup(cache_key(ast, "CPU")).opts == [o.to_json() for o in r.opts]  # type: ignore[union-attr]
    assert r.time_s <= r.unoptimized_s  # type: ignore[operator]
    assert r.heuristic_s is None or r.time_s <= r.heuristic_s


def test_a_time_budget_stops_the_search_between_rounds(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the budget spent after round 0, no round is expanded; the winner is still checked and verified."""
    rounds: list[int] = []
    monkeypatch.setattr(beam_module._Search, "evaluate", _counting(beam_module._Search.evaluate, rounds))
    r = search(db_path, max_rounds=4, budget_s=1e-9)
    assert set(rounds) == {0} and r.rounds <= 1 and r.time_s > 0
    with pytest.raises(ValueError, match="time budget must be a positive"):
        search(db_path, force=True, budget_s=0)


def test_a_budget_spent_inside_a_round_stops_timing_its_candidates(db_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget runs out after one candidate of round 1: the round's others are neither timed nor stored, and
    that candidate (or round 0's best) is the result, checked as ever."""
    monkeypatch.setattr(beam_module._Search, "_past_deadline", lambda self: len(self.timed) >= 3)
    r = search(db_path, max_rounds=4, budget_s=60)
    with TuningDB(db_path) as db:
        cands = db.candidates(r.search_id)
    assert sum(c.round == 1 for c in cands) == 1 and max(c.round for c in cands) <= 2 and r.time_s > 0


def test_builds_past_the_deadline_are_given_up() -> None:
    """A round's builds are waited for only until the budget is spent (a loaded machine took 2 minutes to build a
    5 s share's round): those not done are given up, not stored, and the search ends."""
    ast, _ = kernel("gemm")
    pool = Pool(ast, "CPU", devices.get("CPU").target, 1, 30.0)
    opts: list[list[dict[str, Any]]] = [[], [], []]
    try:
        assert [b.error for b in pool.build(opts, deadline=time.perf_counter() - 1)] == [GIVEN_UP] * 3
        done = pool.build(opts[:1], deadline=time.perf_counter() + 60)
        assert done[0].error is None and done[0].kernel is not None
    finally:
        pool.close(wait=True)


def _counting(fn: Any, rounds: list[int]) -> Any:
    def evaluate(self: Any, items: Any, round: int) -> Any:
        rounds.append(round)
        return fn(self, items, round)
    return evaluate


def test_beam_many_searches_a_kernel_given_twice_once(db_path: Path) -> None:
    (gemm, _), (total, _) = kernel("gemm"), kernel("sum")
    rs = beam_many([(gemm, "CPU"), (total, "CPU"), (gemm, "CPU")], 1, db=db_path, max_rounds=1, progress=False)
    assert rs[0] is rs[2] and rs[1].kernel_name != rs[0].kernel_name
    with TuningDB(db_path) as db:
        assert len(db.searches()) == 2


def test_a_wrong_kernel_is_never_kept(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels with an UPCAST axis are made to write garbage and claim to take no time: every one is rejected."""
    real = CPURuntime.compile

    def corrupt(self: CPURuntime, k: Kernel) -> Any:
        prog = real(self, k)
        if "_u" not in k.name:
            return prog

        def run(handles: list[Any], vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
            prog(handles, vals)
            handles[0][:] += 1.0
            return 1e-12 if wait else None
        return run

    monkeypatch.setattr(CPURuntime, "compile", corrupt)
    r = search(db_path)
    assert "_u" not in r.name and not [o for o in r.opts if isinstance(o.arg, tuple) and o.arg[1] is AxisType.UPCAST]
    with TuningDB(db_path) as db:
        upcast = [c for c in db.candidates(r.search_id)  # type: ignore[arg-type]
                  if any(o["arg"][1] == "UPCAST" for o in c.opts if o["op"] == "SPLIT")]
    assert upcast and all(c.error and c.error.startswith("wrong result:") and c.samples == [] for c in upcast)


def _symbolic_kernel(hi: int = 60) -> UOp:
    """A row sum over the first n rows of a (60, 24) buffer, n a variable in 1..hi."""
    import uopviz
    from uopviz.tensor import Tensor
    n = uopviz.Variable("n", 1, hi)
    x = Tensor(np.random.default_rng(3).random((60, 24), dtype=np.float32))[:n.bind(7)]
    ((ast, _),) = kernels_of(schedule([(x * 2).sum(1).uop]))
    return ast


def test_a_symbolic_kernel_is_searched_at_one_value_and_verified_at_others(db_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Timed at the variable's largest value; candidates right there but wrong at other values (and claiming to
    take no time, so they would win) are rejected when the winner is checked at other values."""
    ast = _symbolic_kernel()
    real = CPURuntime.compile
    timed_at: set[tuple[int, ...]] = set()

    def wrong_below_max(self: CPURuntime, k: Kernel) -> Any:
        prog = real(self, k)
        if not k.meta["opts"]:
            return prog

        def run(handles: list[Any], vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
            timed_at.add(tuple(vals))
            prog(handles, vals)
            if vals != (60,):
                handles[0][:] += 1.0
            return 1e-12 if wait else None  # the fastest by far, so it would win
        return run

    monkeypatch.setattr(CPURuntime, "compile", wrong_below_max)
    r = beam(ast, 2, "CPU", db=db_path, max_rounds=1, progress=False)
    assert r.opts == () and {(60,)} < timed_at  # searched at n = 60, then checked elsewhere: only [] survives
    with TuningDB(db_path) as db:
        rejected = [c for c in db.candidates(r.search_id) if c.error and c.error.startswith("at {'n': ")]  # type: ignore[arg-type]
    assert rejected and all(c.samples and c.median_s is None for c in rejected)


def test_the_tuning_key_holds_the_variables_and_their_ranges() -> None:
    assert cache_key(_symbolic_kernel(60), "CPU").kernel_hash != cache_key(_symbolic_kernel(59), "CPU").kernel_hash


def test_identical_programs_are_timed_once(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = beam_module.program_hash
    monkeypatch.setattr(beam_module, "program_hash", lambda d, k: "same" if "_u" in k.name else real(d, k))
    r = search(db_path, max_rounds=1)
    with TuningDB(db_path) as db:
        same = [c for c in db.candidates(r.search_id) if c.program_hash == "same"]  # type: ignore[arg-type]
    assert len(same) > 1 and len([c for c in same if c.samples and c.compile_s is not None]) == 1
    assert all(c.error is None and c.median_s is None for c in same if not c.samples)


def test_a_repeated_search_is_answered_from_the_database(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = search(db_path)
    calls: list[str] = []
    for cls, name in ((Pool, "build"), (CPURuntime, "compile"), (Workbench, "__init__")):
        monkeypatch.setattr(cls, name, lambda *a, _n=name, **k: calls.append(_n))
    t0 = time.perf_counter()
    again = search(db_path)
    assert time.perf_counter() - t0 < 2 and calls == []
    assert (again.from_db, again.compiled, again.search_id) == (True, 0, first.search_id)
    assert (again.opts, again.time_s, again.name) == (first.opts, first.time_s, first.name)
    assert (again.unoptimized_s, again.heuristic_s, again.candidates) == \
        (first.unoptimized_s, first.heuristic_s, first.candidates)


def test_force_searches_again(db_path: Path) -> None:
    first = search(db_path, max_rounds=1)
    again = search(db_path, max_rounds=1, force=True)
    assert not again.from_db and again.search_id != first.search_id and again.compiled > 0


def test_ctrl_c_resumes_with_the_stored_candidates(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real, measured = Workbench.measure, []

    def interrupted(self: Workbench, *a: Any, **k: Any) -> Any:
        if len(measured) == 5:
            raise KeyboardInterrupt
        measured.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(Workbench, "measure", interrupted)
    with pytest.raises(KeyboardInterrupt):
        search(db_path)
    with TuningDB(db_path) as db:
        (info,) = db.searches()
        assert (info.status, info.n_candidates) == ("running", 5)
    monkeypatch.setattr(Workbench, "measure", real)
    r = search(db_path)
    assert r.search_id == info.id and r.compiled == r.candidates - 5 - final_check(db_path, r)


KILLED_SEARCH = """
import os, signal, sys
from uopviz.search.db import SearchBusyError, TuningDB
real, stored = TuningDB.add_candidate, []
def add(self, *a, **k):
    stored.append(real(self, *a, **k))
    if len(stored) == 4:
        os.kill(os.getpid(), signal.SIGKILL)
    return stored[-1]
TuningDB.add_candidate = add
sys.path.insert(0, sys.argv[2])
from tests.search.test_beam import search
search(sys.argv[1])
"""


def test_kill_9_resumes(db_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", KILLED_SEARCH, str(db_path), str(REPO)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    with TuningDB(db_path) as db:
        (info,) = db.searches()
        assert (info.status, info.n_candidates) == ("running", 4)
    r = search(db_path)
    assert r.search_id == info.id and r.compiled == r.candidates - 4 - final_check(db_path, r)
    with TuningDB(db_path) as db:
        cands = db.candidates(info.id)
    built = [c for c in cands if c.compile_s is not None or c.error is not None]
    assert len({json.dumps(c.opts) for c in built}) == len(built)  # nothing built twice


def test_two_searches_of_one_kernel_at_once_take_turns(db_path: Path, cache_dir: Path) -> None:
    """`uopviz beam` twice at once: the second waits for the first (which holds the kernel's lease in the
    database), says so, then answers from its result; one search, no candidate measured twice."""
    cmd = [sys.executable, "-m", "uopviz.cli", "beam", "gemm", "--small", "--beam", "2", "--db", str(db_path)]
    env = {**os.environ, "UOPVIZ_CACHE_DIR": str(cache_dir)}
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    assert first.stderr is not None
    first_err = first.stderr.readline()  # round 0 is measured: the first holds the lease and goes on searching
    os.kill(first.pid, signal.SIGSTOP)  # ... paused there, however fast the machine: the second must find it busy
    second = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    watchdog = threading.Timer(120, second.kill)  # a second that never says it waits fails the test, not hangs it
    watchdog.start()
    try:
        assert second.stderr is not None
        said = second.stderr.readline()  # the second's first word is that it waits
    finally:
        watchdog.cancel()
        os.kill(first.pid, signal.SIGCONT)
    second_out, second_err = second.communicate(timeout=300)
    out, rest = first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, (first_err + rest, said + second_err)
    assert f"is being searched by process {first.pid}" in said and "waiting" in said, said
    with TuningDB(db_path) as db:
        (info,) = db.searches()
        cands = db.candidates(info.id)
    assert info.status == "done" and sum(c.parent_id is None for c in cands) == 1
    built = [c for c in cands if c.compile_s is not None or c.error is not None]
    assert len({json.dumps(c.opts) for c in built}) == len(built)
    assert out.splitlines()[-1] == second_out.splitlines()[-1]  # the same opts chosen


def test_a_search_of_a_kernel_being_searched_can_refuse_instead(db_path: Path) -> None:
    ast, _ = kernel()
    with TuningDB(db_path) as other:
        other.begin_search(cache_key(ast, "CPU"), "r_k", "AST", {})
        with pytest.raises(SearchBusyError, match=f"being searched by process {os.getpid()} "):
            beam(ast, 2, "CPU", db=db_path, progress=False, wait=False)


def test_a_compile_timeout_is_the_candidates_error(db_path: Path) -> None:
    with pytest.raises(BeamError, match=r"the unoptimized kernel failed: .*timeout"):
        search(db_path, timeout_s=1e-6)
    with TuningDB(db_path) as db:
        (info,) = db.searches()
    assert info.status == "failed" and "timeout" in (info.error or "")


DIE = [{"die": True}]


def build_or_die(flat: Any, opts: Any, *args: Any) -> Any:
    """A worker's build that kills the worker for the DIE candidate."""
    if opts == DIE:
        os._exit(1)
    return build_candidate(flat, opts, *args)


def test_a_dying_worker_is_charged_to_its_candidate_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_module, "build_candidate", build_or_die)
    ast, _ = kernel("gemm")
    pool = Pool(ast, "CPU", devices.get("CPU").target, 2, 60.0)
    try:
        first, dead, last = pool.build([[], DIE, [Opt(OptOps.SPLIT, 1, (5, AxisType.UPCAST, False)).to_json()]])
    finally:
        pool.close(wait=True)
    assert first.error is None and last.error is None and last.rebuild().name == "r_L15_L2_R12_u5"
    assert dead.error == "the compile worker died while building this candidate (crashed or was killed)"


def test_progress_line() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, log = Tty(), io.StringIO()
    for stream in (tty, log):
        p = Progress(stream=stream)
        p.add("r_L4", 1, 3, 1)
        p.candidate(1, _Node(7, (), None, "h", 2e-3, None), 3, measured=True)  # type: ignore[arg-type]
        p.end_round()
        p.finish()
    assert tty.getvalue().startswith("\rbeam r_L4: round 1, 1/3 candidates, best -\x1b[K")
    assert "\rbeam r_L4: round 1, 2/3 candidates, best 2.00 ms\x1b[K" in tty.getvalue()
    assert log.getvalue() == "beam r_L4: round 1, 2/3 candidates, best 2.00 ms\n"


def test_progress_events_tell_the_whole_search(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A hook hears every candidate the database stores, in order, each round's best, and nothing on stderr."""
    events: list[dict[str, Any]] = []
    ast, _ = kernel("max")
    r = beam(ast, 2, "CPU", db=db_path, max_rounds=2, progress=events.append)
    json.dumps(events)  # JSON-ready
    assert "beam " not in capsys.readouterr().err  # the hook takes the place of the status line
    start, *rest = events
    assert start == {"event": "start", "search_id": r.search_id, "kernel": r.kernel_name, "device": "CPU",
                     "resumed": False, "stored": 0, "executor": LocalExecutor().describe()}
    cands = [e for e in rest if e["event"] == "candidate"]
    with TuningDB(db_path) as db:
        stored = db.candidates(r.search_id)  # type: ignore[arg-type]
    assert [(e["id"], e["parent"], e["round"], e["opts"], e["error"], e["built_on"], e["measured_on"])
            for e in cands] == [(c.id, c.parent_id, c.round, c.opts, c.error, c.built_on, c.measured_on)
                                for c in stored]
    assert {e["measured_on"] for e in cands if e["time_s"] is not None} == {socket.gethostname()}
    assert all(e["time_s"] == c.median_s and e["duplicate"] == (not c.samples and c.error is None) and e["measured"]
               for e, c in zip(cands, stored, strict=True))
    ends = [e for e in rest if e["event"] == "round_end"]
    assert r.rounds >= 1 and [e["round"] for e in ends] == list(range(r.rounds + 1))
    assert ends[-1]["best_s"] == r.time_s and next(c for c in stored if c.id == ends[-1]["best_id"]).opts == \
        [o.to_json() for o in r.opts]
    rounds = [e for e in rest if e["event"] == "round"]
    assert rounds[-1]["candidates"] == sum(c.round == r.rounds for c in stored)
    # each round is announced before its candidates and closed after them
    order = [(e["event"], e["round"]) for e in rest]
    for n in range(r.rounds + 1):
        assert order.index(("round", n)) < order.index(("candidate", n)) < order.index(("round_end", n))


# ---- uopviz beam ----
def test_cli_table_and_json(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["beam", "gemm", "--small", "--beam", "2", "--db", str(db_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("gemm (M=15, K=12, N=10) on CPU: BEAM width 2 over every kernel of the program (1)")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:6]}
    assert rows["time"] == ["time", "GFLOP/s", "GB/s", "speedup", "vs", "heuristic"]
    assert set(rows) == {"time", "unoptimized", "heuristic", "BEAM"} and rows["unoptimized"][-2] == "1.00x"
    assert "r_L15_L10_R12 → r_" in out and "\n  opts: " in out and "\x1b[" not in out
    assert main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (k,) = doc["kernels"]
    assert (doc["program"], doc["device"], doc["flops"], doc["beam"]) == ("gemm (M=15, K=12, N=10)", "CPU", 3600, 2)
    assert k["from_db"] and k["compiled"] == 0 and k["kernel"] == "r_L15_L10_R12"
    assert [Opt.from_json(o) for o in k["opts"]] and doc["total"]["beam"]["time_s"] == k["beam_s"]
    assert doc["total"]["beam"]["gflops"] == pytest.approx(3600 / k["beam_s"] / 1e9)


def test_cli_colours_axes_on_a_terminal() -> None:
    def ansi(t: AxisType, text: str) -> str:
        r, g, b = (int(t.colour[i:i + 2], 16) for i in (1, 3, 5))
        return f"\x1b[38;2;{r};{g};{b}m{text}\x1b[0m"

    assert _coloured("r_L15_R3_u5", False) == "r_L15_R3_u5"
    assert _coloured("r_L15_R3_u5", True) == "_".join(["r", ansi(AxisType.LOOP, "L15"), ansi(AxisType.REDUCE, "R3"),
                                                       ansi(AxisType.UPCAST, "u5")])


def test_cli_every_kernel_of_a_function(tmp_path: Path, db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "prog.py"
    f.write_text("import numpy as np\nfrom uopviz.tensor import Tensor\n\n"
                 "def rows(n=8):\n    x = Tensor(np.arange(n * 5, dtype=np.float32).reshape(n, 5))\n"
                 "    return x.softmax(0)\n")  # along columns: three kernels
    assert main(["beam", f"{f}:rows", "--shape", "n=6", "--beam", "1", "--db", str(db_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["program"] == f"{f}:rows (n=6)" and len(doc["kernels"]) == 3 and doc["flops"] is None
    assert doc["bytes"] > 0 and doc["total"]["beam"]["gbs"] > 0 and doc["total"]["beam"]["gflops"] is None


@pytest.mark.parametrize(("args", "status", "message"), [
    (["nope"], 2, "no zoo kernel 'nope'"),
    (["gemm", "--small", "--shape", "Q=3"], 2, "bad --shape: gemm has sizes M, K, N; unknown: Q"),
    (["gemm", "--small", "--device", "TPU"], 2, "unknown device 'TPU'"),
    (["missing.py:f"], 2, "no file 'missing.py'"),
    (["gemm", "--small"], 1, "not a database"),
])
def test_cli_errors_are_one_line(args: list[str], status: int, message: str, db_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    db_path.write_bytes(b"this is not a database" * 100)
    assert main(["beam", *args, "--db", str(db_path)]) == status
    err = capsys.readouterr().err
    assert err.startswith("uopviz: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize("bad", ["M", "M=0", "M=x", "=4"])
def test_cli_bad_shape_syntax(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["beam", "gemm", "--shape", bad])
    assert e.value.code == 2 and "expected NAME=VALUE" in capsys.readouterr().err


def test_cli_function_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "prog.py"
    f.write_text("def boom():\n    raise RuntimeError('no')\n\ndef number():\n    return 3\n")
    assert main(["beam", f"{f}:absent"]) == 2
    assert main(["beam", f"{f}:boom"]) == 1
    assert main(["beam", f"{f}:number"]) == 2
    assert main(["beam", f"{f}:boom", "--small"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"uopviz: {f} has no function 'absent'", f"uopviz: {f}:boom failed: RuntimeError: no",
                   f"uopviz: {f}:number returned int, not a Tensor",
                   "uopviz: --small applies to zoo kernels; give a function its sizes with --shape"]


# ---- realize() and the database ----
def test_realize_uses_the_databases_opts(cache_dir: Path) -> None:
    z = ZOO["gemm"]
    out, arrays = z.build(z.sizes(small=True), "CPU")
    ((ast, _),) = kernels_of(schedule([out.uop]))
    heuristic = default_opts(ast, "CPU")
    assert not (cache_dir / "tuning.db").exists()  # looking up does not create the database
    tuned = (Opt(OptOps.SPLIT, 1, (5, AxisType.UPCAST, False)),)
    with TuningDB() as db:
        h = db.begin_search(cache_key(ast, "CPU"), "r_L15_L10_R12", "ast", {"test": True})
        c = db.add_candidate(h.id, None, 0, [o.to_json() for o in tuned], None, None, None, None, [1e-3])
        db.finish_search(h.id, c)
    assert heuristic != tuned and default_opts(ast, "CPU") == tuned  # seen without anyone being told
    assert compile_kernel(ast, "CPU", default_opts(ast, "CPU"))[0].meta["opts"] == tuned
    np.testing.assert_allclose(out.numpy(), z.reference(*arrays), rtol=1e-4, atol=1e-5)


def test_a_search_updates_what_realize_uses(db_path: Path, cache_dir: Path) -> None:
    ast, _ = kernel("gemm")
    default_opts(ast, "CPU")
    r = beam(ast, 2, "CPU", max_rounds=1, progress=False)  # the default database
    assert default_opts(ast, "CPU") == r.opts


def test_an_unusable_database_warns_once_and_falls_back(cache_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / "tuning.db").write_bytes(b"garbage" * 1000)
    z = ZOO["softmax"]
    out, arrays = z.build(z.sizes(small=True), "CPU")
    np.testing.assert_allclose(out.numpy(), z.reference(*arrays), rtol=1e-4, atol=1e-6)  # three kernels
    err = capsys.readouterr().err
    assert err.count("uopviz: not using the tuning database:") == 1 and err.count("\n") == 1


def test_uopviz_beam_searches_kernels_as_they_compile(cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("UOPVIZ_BEAM", "1")
    z = ZOO["elementwise"]
    out, arrays = z.build(z.sizes(small=True), "CPU")
    ((ast, _),) = kernels_of(schedule([out.uop]))
    np.testing.assert_allclose(out.numpy(), z.reference(*arrays), rtol=1e-4, atol=1e-5)
    with TuningDB() as db:
        hit = db.lookup(cache_key(ast, "CPU"))
    assert hit is not None and default_opts(ast, "CPU") == tuple(Opt.from_json(o) for o in hit.opts)
    assert "beam E_L1000: round 0" in capsys.readouterr().err
    monkeypatch.setenv("UOPVIZ_BEAM", "two")
    ast2, _ = kernel("sum")
    with pytest.raises(ValueError, match="UOPVIZ_BEAM must be a beam width"):
        default_opts(ast2, "CPU")


def test_uopviz_beam_in_a_script_without_a_main_guard(tmp_path: Path) -> None:
    """Workers do not re-run the parent's script: it prints once."""
    script = tmp_path / "script.py"
    script.write_text("import numpy as np\nfrom uopviz.tensor import Tensor\n"
                      "print('ran', (Tensor(np.ones(7, dtype=np.float32)) * 3).numpy().sum())\n")
    env = {**os.environ, "UOPVIZ_BEAM": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ran 21.0\n" and "beam E_L7: round 0" in proc.stderr


def test_flat_form_survives_pickle_of_deep_graphs() -> None:
    from uopviz.dtype import dtypes
    u = UOp.const(dtypes.int32, 0)
    for i in range(5000):
        u = u + i
    with pytest.raises(RecursionError):
        pickle.dumps(u)
    assert unflatten(pickle.loads(pickle.dumps(flatten(u)))) is u
