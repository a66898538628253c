"""BEAM on a Ray cluster: a local cluster on 127.0.0.1 (a head with no CPUs and two worker nodes, each owning this
machine's CPU device through its own resources) builds and times searches of gemm and sum; the database must hold
what a local search holds (every candidate once, the winner verified), the same timings must give the same
decisions, and a worker node killed mid-search must cost no candidate. One cluster serves the module (starting one
takes seconds); the test that kills a node runs last."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.search.test_beam import kernel
from uopviz.cli import main
from uopviz.compiler import compile_kernel
from uopviz.search import BeamResult, beam
from uopviz.search.db import Candidate, TuningDB
from uopviz.search.ray_executor import RayExecutor, RayUnavailableError, device_resources
from uopviz.search.timing import Workbench

pytestmark = pytest.mark.slow
ARGS: dict[str, Any] = {"max_rounds": 2, "progress": False}


def test_without_ray_the_flag_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is not installed
    assert main(["beam", "sum", "--small", "--ray"]) == 1
    assert "pip install 'uopviz[ray]'" in capsys.readouterr().err
    with pytest.raises(RayUnavailableError, match=r"uopviz\[ray\]"):
        RayExecutor()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[Any], RayExecutor]]:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback addresses
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster
    saved = os.environ.get("UOPVIZ_CACHE_DIR")
    os.environ["UOPVIZ_CACHE_DIR"] = str(tmp_path_factory.mktemp("ray-cache"))  # the workers' compiled kernels
    try:
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1",
                                                          "include_dashboard": False})
        resources = device_resources(["CPU"])
        nodes = [c.add_node(node_ip_address="127.0.0.1", num_cpus=1, resources=resources) for _ in range(2)]
    finally:
        if saved is None:
            del os.environ["UOPVIZ_CACHE_DIR"]
        else:
            os.environ["UOPVIZ_CACHE_DIR"] = saved
    ray.init(address=c.address, log_to_driver=False)
    ex = RayExecutor()
    try:
        yield c, nodes, ex
    finally:
        ex.close()
        ray.shutdown()
        c.shutdown()


def check_search(db_path: Path, search_id: int | None, name: str) -> list[Candidate]:
    """The invariants of a finished search: every candidate stored once per round, its parent earlier in the same
    search, a stored winner that is the fastest of the last round, and that winner right on fresh random inputs."""
    with TuningDB(db_path) as db:
        info = db.search(search_id)  # type: ignore[arg-type]
        cands = db.candidates(search_id)  # type: ignore[arg-type]
    assert info is not None and info.status == "done"
    keys = [(c.round, str(c.opts)) for c in cands]
    assert len(keys) == len(set(keys))
    ids = {c.id for c in cands}
    assert all(c.parent_id is None or c.parent_id in ids for c in cands)
    last = [c for c in cands if c.round == max(k for k, _ in keys) and c.median_s is not None]
    best = min(last, key=lambda c: c.median_s or 0.0)
    assert info.best_candidate_id == best.id
    ast, _ = kernel(name)
    from uopviz.codegen.opt import Opt
    k, prog = compile_kernel(ast, "CPU", [Opt.from_json(o) for o in best.opts])
    bench = Workbench(ast, "CPU", seed=7)
    assert bench.mismatch(bench.run_from_start(bench.bind(k, prog))[1]) is None
    return cands


@pytest.fixture(scope="module")
def ray_gemm(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BeamResult]:
    """A search of gemm on the cluster (shared: a search takes seconds)."""
    db = tmp_path_factory.mktemp("ray-gemm") / "ray.db"
    ast, _ = kernel("gemm")
    return db, beam(ast, 2, "CPU", db=db, executor=cluster[2], **ARGS)


@pytest.mark.parametrize("name", ["gemm", "sum"])
def test_a_distributed_search_stores_what_a_local_one_does(cluster: Any, ray_gemm: tuple[Path, BeamResult],
                                                          tmp_path: Path, name: str) -> None:
    ast, _ = kernel(name)
    db, r = ray_gemm if name == "gemm" else (tmp_path / "ray.db", beam(ast, 2, "CPU", db=tmp_path / "ray.db",
                                                                          executor=cluster[2], **ARGS))
    local = beam(ast, 2, "CPU", db=tmp_path / "local.db", **ARGS)
    on_ray = check_search(db, r.search_id, name)
    here = check_search(tmp_path / "local.db", local.search_id, name)
    assert r.kernel_name == local.kernel_name and r.compiled > 0
    assert [c.opts for c in on_ray if c.round == 0] == [c.opts for c in here if c.round == 0]
    # built and timed on the cluster's worker nodes, the final re-timing on one of them; none here
    final = max(c.round for c in on_ray)
    assert all("ray node" in (c.built_on or "") for c in on_ray if c.round < final)
    assert all("ray node" in (c.measured_on or "") for c in on_ray if c.median_s is not None)
    assert len({c.measured_on for c in on_ray if c.round == final}) == 1
    assert all(c.measured_on is not None and "ray node" not in c.measured_on for c in here if c.median_s is not None)


def test_the_same_timings_give_the_same_search(ray_gemm: tuple[Path, BeamResult], tmp_path: Path) -> None:
    """A distributed search's measurements, handed to a local search as an interrupted run of its own (all but the
    final round), lead it to build nothing and store the same candidates: the decisions are the executor's no
    matter where the timings came from."""
    ray_db, r = ray_gemm
    ast, _ = kernel("gemm")
    with TuningDB(ray_db) as db:
        doc = db.export_doc()
    (s,) = doc["searches"]
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


def test_cli_tunes_several_programs_on_the_cluster(cluster: Any, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import ray
    cluster[2].close()  # its timing workers hold the device: the command's executor takes them (the next test's
    # searches start them again)
    assert main(["beam", "sum", "max", "--small", "--beam", "1", "--db", str(tmp_path / "t.db"), "--ray",
                 ray.get_runtime_context().gcs_address]) == 0
    out = capsys.readouterr().out
    assert out.count("BEAM width 1") == 2
    assert main(["cache", "show", "1", "--db", str(tmp_path / "t.db")]) == 0
    assert "ray node" in capsys.readouterr().out


def test_a_worker_killed_mid_search_costs_no_candidate(cluster: Any, tmp_path: Path) -> None:
    """Runs last: it removes one of the cluster's two worker nodes while round 1 is being timed."""
    c, nodes, ex = cluster
    ast, _ = kernel("gemm")
    seen: list[dict[str, Any]] = []

    def kill_in_round_1(event: dict[str, Any]) -> None:
        if event["event"] == "candidate" and event["round"] == 1:
            seen.append(event)
            if len(seen) == 2:
                c.remove_node(nodes[0], allow_graceful=False)

    r = beam(ast, 2, "CPU", db=tmp_path / "ray.db", executor=ex, max_rounds=2, progress=kill_in_round_1)
    assert len(seen) > 2  # the search went on after the kill
    cands = check_search(tmp_path / "ray.db", r.search_id, "gemm")
    assert not [c.error for c in cands if c.error is not None and ("died" in c.error or "not measured" in c.error)]
    after = [c for c in cands if c.round > 1]
    assert after and len({c.measured_on for c in after if c.median_s is not None}) == 1
