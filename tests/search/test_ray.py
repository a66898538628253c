"""BEAM on a Ray cluster: a local cluster on 127.0.0.1 (a head with no CPUs and two worker nodes, each owning this
machine's CPU device through its own resources) builds and times searches of gemm and sum, both in one call; the
database must hold what a local search holds (every candidate once, the winner verified), the same timings must give
the same decisions, a build that hangs must cost only its candidate, a driver killed mid-search must leave a
database the next run resumes, and a worker node killed mid-search must cost no candidate. One cluster serves the
module (starting one takes seconds); the test that kills a node runs last."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.search.support import REPO, kernel
from uopviz.cli import main
from uopviz.codegen.opt import Opt
from uopviz.compiler import compile_kernel
from uopviz.runtime.cpu import find_compiler
from uopviz.search import BeamResult, beam
from uopviz.search.beam import BeamError, beam_many
from uopviz.search.db import Candidate, TuningDB
from uopviz.search.ray_executor import BUILD_GRACE_S, RayExecutor, RayUnavailableError, device_resources
from uopviz.search.timing import Workbench
from uopviz.trace.ids import node_id

pytestmark = pytest.mark.slow
ARGS: dict[str, Any] = {"max_rounds": 1, "progress": False}
FREEZING_CC = """#!/bin/sh
# {real}, except while {flag} exists: then it freezes the worker that called it (SIGSTOP), as a hang in native
# code would (no timer of the worker's can fire then), and compiles nothing
if [ -e '{flag}' ] && [ "$1" != --version ]; then kill -STOP "$PPID"; exit 1; fi
exec '{real}' "$@"
"""


def test_without_ray_the_flag_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is not installed
    assert main(["beam", "sum", "--small", "--ray"]) == 1
    assert "pip install 'uopviz[ray]'" in capsys.readouterr().err
    with pytest.raises(RayUnavailableError, match=r"uopviz\[ray\]"):
        RayExecutor()


@dataclass
class Cluster:
    cluster: Any
    nodes: list[Any]
    ex: RayExecutor
    freeze: Path
    """While this file exists, the workers' C compiler freezes the worker that runs it."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback addresses
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster as RayCluster
    tmp = tmp_path_factory.mktemp("ray")
    real = find_compiler()
    cc = tmp / "bin" / Path(real).name  # the compiler's own name: the workers' target is this machine's
    cc.parent.mkdir()
    cc.write_text(FREEZING_CC.format(real=real, flag=tmp / "freeze"))
    cc.chmod(0o755)
    # the nodes' processes inherit these: the workers' compiled kernels, and their compiler
    env = {"UOPVIZ_CACHE_DIR": str(tmp / "cache"), "CC": str(cc)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        c = RayCluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1",
                                                             "include_dashboard": False})
        resources = device_resources(["CPU"])
        nodes = [c.add_node(node_ip_address="127.0.0.1", num_cpus=1, resources=resources) for _ in range(2)]
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v
    ray.init(address=c.address, log_to_driver=False)
    ex = RayExecutor()
    try:
        yield Cluster(c, nodes, ex, tmp / "freeze")
    finally:
        ex.close()
        ray.shutdown()
        c.shutdown()


def check_search(db_path: Path, search_id: int | None, name: str) -> list[Candidate]:
    """The invariants of a finished search: every candidate stored once per round, its parent earlier in the same
    search, a stored winner that is the fastest of the final check (of all, where there was none to make), and that
    winner right on fresh random inputs."""
    with TuningDB(db_path) as db:
        info = db.search(search_id)  # type: ignore[arg-type]
        cands = db.candidates(search_id)  # type: ignore[arg-type]
    assert info is not None and info.status == "done"
    assert_once(cands)
    ids = {c.id for c in cands}
    assert all(c.parent_id is None or c.parent_id in ids for c in cands)
    timed = [c for c in cands if c.median_s is not None and c.error is None]
    last = [c for c in timed if c.round == max(c.round for c in cands)]
    final_check = all(c.compile_s is None for c in last)  # a last round that times contenders again decides
    best = min(last if final_check else timed, key=lambda c: c.median_s or 0.0)
    assert info.best_candidate_id == best.id
    ast, _ = kernel(name)
    k, prog = compile_kernel(ast, "CPU", [Opt.from_json(o) for o in best.opts])
    bench = Workbench(ast, "CPU", seed=7)
    assert bench.mismatch(bench.run_from_start(bench.bind(k, prog))[1]) is None
    return cands


def assert_once(cands: list[Candidate]) -> None:
    """Every candidate stored once: no (round, opts) twice."""
    keys = [(c.round, json.dumps(c.opts)) for c in cands]
    assert len(keys) == len(set(keys))


NAMES = ("gemm", "sum")


@pytest.fixture(scope="module")
def on_ray(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[Path, dict[str, BeamResult], list[dict[str, Any]]]:
    """gemm and sum searched in one call on the cluster, with the progress events (shared: it takes seconds)."""
    db = tmp_path_factory.mktemp("ray-many") / "ray.db"
    events: list[dict[str, Any]] = []
    rs = beam_many([(kernel(n)[0], "CPU") for n in NAMES], 2, db=db, executor=cluster.ex, max_rounds=1,
                   progress=events.append)
    return db, dict(zip(NAMES, rs, strict=True)), events


@pytest.mark.parametrize("name", NAMES)
def test_a_distributed_search_stores_what_a_local_one_does(on_ray: tuple[Path, dict[str, BeamResult], Any],
                                                          tmp_path: Path, name: str) -> None:
    db, results, _ = on_ray
    r = results[name]
    local = beam(kernel(name)[0], 2, "CPU", db=tmp_path / "local.db", **ARGS)
    on_ray_cands = check_search(db, r.search_id, name)
    here = check_search(tmp_path / "local.db", local.search_id, name)
    assert r.kernel_name == local.kernel_name and r.compiled > 0
    assert [c.opts for c in on_ray_cands if c.round == 0] == [c.opts for c in here if c.round == 0]
    # built and timed on the cluster's worker nodes, the final re-timing on one of them; none here
    final = max(c.round for c in on_ray_cands)
    assert all("ray node" in (c.built_on or "") for c in on_ray_cands if c.round < final)
    assert all("ray node" in (c.measured_on or "") for c in on_ray_cands if c.median_s is not None)
    assert len({c.measured_on for c in on_ray_cands if c.round == final}) == 1
    assert all(c.measured_on is not None and "ray node" not in c.measured_on for c in here if c.median_s is not None)


def test_the_kernels_of_one_call_are_searched_side_by_side(on_ray: tuple[Path, dict[str, BeamResult],
                                                                         list[dict[str, Any]]]) -> None:
    """sum's search starts, and has candidates measured, before gemm's ends: one call keeps the cluster busy with
    both (each search's own decisions are checked above and below)."""
    _, results, events = on_ray
    gemm_end = max(i for i, e in enumerate(events) if e["index"] == 0)
    assert {(e["index"], e["kernel"]) for e in events if e["event"] == "start"} == \
        {(i, results[n].kernel_name) for i, n in enumerate(NAMES)}
    assert any(e["index"] == 1 and e["event"] == "candidate" and e["measured"] for e in events[:gemm_end])
    (gemm_span, sum_span) = (results[n].span for n in NAMES)
    assert sum_span[0] < gemm_span[1] and gemm_span[0] < sum_span[1]


def test_the_same_timings_give_the_same_search(on_ray: tuple[Path, dict[str, BeamResult], Any],
                                               tmp_path: Path) -> None:
    """A distributed search's measurements, handed to a local search as an interrupted run of its own (all but the
    final round), lead it to build nothing and store the same candidates: the decisions are the executor's no
    matter where the timings came from, or which other search shared the cluster."""
    ray_db, results, _ = on_ray
    r = results["gemm"]
    ast, _ = kernel("gemm")
    with TuningDB(ray_db) as db:
        doc = db.export_doc()
    (s,) = doc["searches"] = [s for s in doc["searches"] if s["kernel_hash"] == node_id(ast)]
    final = max(c["round"] for c in s["candidates"])
    s.update(status="running", finished_at=None, best_candidate=None,
             candidates=[c for c in s["candidates"] if c["round"] < final])
    doc["results"] = []
    with TuningDB(tmp_path / "replay.db") as db:
        db.import_doc(doc)
    again = beam(ast, 2, "CPU", db=tmp_path / "replay.db", **ARGS)
    assert again.compiled == 0 and again.rounds == r.rounds
    with TuningDB(tmp_path / "replay.db") as db:
        replayed = db.candidates(again.search_id)  # type: ignore[arg-type]
    with TuningDB(ray_db) as db:
        original = db.candidates(r.search_id)  # type: ignore[arg-type]
    assert [(c.round, c.opts) for c in replayed] == [(c.round, c.opts) for c in original]


def test_a_build_that_hangs_fails_its_candidate_and_its_worker_is_replaced(cluster: Cluster, tmp_path: Path) -> None:
    """The workers' compiler freezes its worker: the worker's own timer cannot fire, so the search gives the build
    up after the timeout and the grace, records why, and Ray's next worker builds the next search."""
    ast, _ = kernel("max")  # compiled by no other test: the frozen compiler is called
    cluster.freeze.touch()
    cluster.ex.build_grace_s = 1.0
    try:
        t0 = time.monotonic()
        with pytest.raises(BeamError, match=r"the build did not end within 3 s .*its worker was killed"):
            beam(ast, 1, "CPU", db=tmp_path / "t.db", executor=cluster.ex, timeout_s=2.0, **ARGS)
        assert time.monotonic() - t0 < 15
    finally:
        cluster.freeze.unlink()
        cluster.ex.build_grace_s = BUILD_GRACE_S
    with TuningDB(tmp_path / "t.db") as db:
        (failed,) = db.searches()
        (cand,) = db.candidates(failed.id)
    assert failed.status == "failed" and "did not end" in (cand.error or "") and cand.opts == []
    r = beam(ast, 1, "CPU", db=tmp_path / "t.db", executor=cluster.ex, **ARGS)
    assert r.search_id != failed.id and r.compiled > 0
    check_search(tmp_path / "t.db", r.search_id, "max")


def test_cli_tunes_several_programs_on_the_cluster(cluster: Cluster, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import ray
    cluster.ex.close()  # its timing workers hold the device: the command's executor takes them (later searches
    # start them again)
    assert main(["beam", "sum", "max", "--small", "--beam", "1", "--db", str(tmp_path / "t.db"), "--ray",
                 ray.get_runtime_context().gcs_address]) == 0
    out = capsys.readouterr().out
    assert out.count("BEAM width 1") == 2
    assert main(["cache", "show", "1", "--db", str(tmp_path / "t.db")]) == 0
    assert "ray node" in capsys.readouterr().out


def stored(db: Path) -> int:
    """Candidates in the database file so far (0 before it exists), read as another process would."""
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return int(conn.execute("SELECT count(*) FROM candidates").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        conn.close()


def test_a_driver_killed_mid_search_leaves_a_database_the_next_run_resumes(cluster: Cluster, tmp_path: Path) -> None:
    """`uopviz beam --ray` killed (kill -9) while it searches on the cluster: the database is intact, holds every
    candidate once, and the same command then finishes the search without measuring a stored candidate again."""
    import ray
    cluster.ex.close()  # the driver's executor takes the device's timing workers
    address = ray.get_runtime_context().gcs_address
    db = tmp_path / "t.db"
    cmd = ["beam", "gemm", "--small", "--beam", "1", "--rounds", "2", "--db", str(db), "--ray", address]
    env = {**os.environ, "UOPVIZ_CACHE_DIR": str(tmp_path / "cache")}
    driver = subprocess.Popen([sys.executable, "-m", "uopviz.cli", *cmd], cwd=REPO, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while stored(db) < 3 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert driver.poll() is None, driver.communicate()[1]  # still searching
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.communicate()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with TuningDB(db) as tdb:
        (killed,) = tdb.searches()
        before = tdb.candidates(killed.id)
    assert killed.status == "running" and len(before) >= 3
    assert_once(before)
    assert main([*cmd, "--json"]) == 0
    with TuningDB(db) as tdb:
        (done,) = tdb.searches()
        after = tdb.candidates(done.id)
    assert done.id == killed.id and done.status == "done"
    kept = {c.id: c for c in after}  # the stored candidates kept as they were (by id: the resumed run may store
    assert all(kept.get(c.id) == c for c in before)  # the rest of a round in between), none measured again
    assert_once(after)
    check_search(db, done.id, "gemm")


def test_a_worker_killed_mid_search_costs_no_candidate(cluster: Cluster, tmp_path: Path) -> None:
    """Runs last: it removes one of the cluster's two worker nodes while round 1 is being timed."""
    ast, _ = kernel("gemm")
    seen: list[dict[str, Any]] = []

    def kill_in_round_1(event: dict[str, Any]) -> None:
        if event["event"] == "candidate" and event["round"] == 1:
            seen.append(event)
            if len(seen) == 2:
                cluster.cluster.remove_node(cluster.nodes[0], allow_graceful=False)

    r = beam(ast, 2, "CPU", db=tmp_path / "ray.db", executor=cluster.ex, max_rounds=1, progress=kill_in_round_1)
    assert len(seen) > 2  # the search went on after the kill
    cands = check_search(tmp_path / "ray.db", r.search_id, "gemm")
    assert not [c.error for c in cands if c.error is not None and ("died" in c.error or "not measured" in c.error)]
    after = [c for c in cands if c.round > 1]
    assert after and len({c.measured_on for c in after if c.median_s is not None}) == 1
