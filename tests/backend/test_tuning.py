"""The tuning database and BEAM searches over HTTP: a search started on a kernel streams its progress as server-sent
events to its end, and the tuning routes then show exactly what it stored (candidates, rounds, the winning path,
the result); one search at a time (409); a stopped search is shown as interrupted and resumes; a client that
leaves a stream breaks nothing; bad ids are 404, bad bodies 422, and a corrupt database a 503 naming the file."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from uopviz.backend.app import create_app
from uopviz.backend.security import Access
from uopviz.backend.store import TraceStore
from uopviz.backend.tuning import BeamJob

from uopviz.search.db import TuningDB
from uopviz.search.executor import LocalExecutor
from uopviz.search.keys import CacheKey, TargetInfo

BEAM = "/api/traces/{tid}/contexts/{ci}/beam"
SMALL = {"width": 2, "max_rounds": 2}


@pytest.fixture(scope="module")
def tiny() -> TraceStore:
    """Zoo kernels small enough to search in a second: max (one kernel) and sum, at their small sizes."""
    s = TraceStore("CPU")
    s.record_zoo("max", small=True)
    s.record_zoo("sum", small=True)
    return s


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "tuning.db"


@pytest.fixture
def client(tiny: TraceStore, db: Path, missing_dist: Path, make_client: Callable[..., TestClient]
           ) -> Iterator[TestClient]:
    with make_client(tiny, db=db, dist=missing_dist) as c:
        yield c


def events_of(text: str) -> list[dict[str, Any]]:
    """The JSON events of a server-sent event stream (each `data:` line one event)."""
    return [json.loads(line.removeprefix("data: ")) for line in text.splitlines() if line.startswith("data: ")]


def kernel_of(c: TestClient, tid: str) -> dict[str, Any]:
    return c.get(f"/api/traces/{tid}").json()["contexts"][1]


def wait_for(predicate: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_a_search_streams_its_progress_and_the_routes_show_what_it_stored(client: TestClient, db: Path) -> None:
    kernel = kernel_of(client, "max-small")
    r = client.post(BEAM.format(tid="max-small", ci=1), json=SMALL)
    assert r.status_code == 202, r.json()
    started = r.json()
    assert (started["kernel_name"], started["device"], started["resumed"]) == (kernel["name"], "CPU", False)
    busy = client.post(BEAM.format(tid="sum-small", ci=1), json=SMALL)
    assert busy.status_code == 409 and "running already" in busy.json()["detail"]
    (listed,) = client.get("/api/tuning/searches").json()["searches"]
    assert (listed["id"], listed["status"], listed["job"]) == (started["search_id"], "running", started["job"])

    stream = client.get(f"/api/beam/{started['job']}/events")
    assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
    events = events_of(stream.text)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    first, done = events[0], events[-1]
    assert first == {"seq": 1, "event": "start", "search_id": started["search_id"], "kernel": kernel["name"],
                     "device": "CPU", "resumed": False, "stored": 0,
                     "executor": LocalExecutor().describe()}
    assert done["event"] == "done" and done["search_id"] == started["search_id"]
    assert client.get(f"/api/beam/{started['job']}/events").text == stream.text  # a late reader sees it all

    sid = started["search_id"]
    s = client.get(f"/api/tuning/searches/{sid}").json()
    assert (s["status"], s["job"], s["kernel_hash"], s["width"]) == ("done", None, kernel["kernel_hash"], 2)
    cands = s["candidates"]
    streamed = [e for e in events if e["event"] == "candidate"]
    assert [(e["id"], e["parent"], e["round"], e["opts"], e["error"], e["time_s"]) for e in streamed] == [
        (c["id"], c["parent"], c["round"], c["opts"], c["error"], None if c["error"] else c["median_s"]) for c in cands]
    assert [(e["built_on"], e["measured_on"]) for e in streamed] == [(c["built_on"], c["measured_on"]) for c in cands]
    assert all(c["measured_on"] for c in cands if c["samples"])  # where each timing was taken (this machine)
    with TuningDB(db) as tdb:  # the database the app was given is the one the search wrote
        assert [c.id for c in tdb.candidates(sid)] == [c["id"] for c in cands]
    timed = [c for c in cands if c["median_s"] is not None and c["error"] is None]
    best = min(timed, key=lambda c: c["median_s"])
    assert (s["best_id"], s["best_s"], s["best_opts"]) == (best["id"], done["time_s"], done["opts"]) == \
        (best["id"], best["median_s"], best["opts"])
    path = s["winning_path"]
    by_id = {c["id"]: c for c in cands}
    assert by_id[path[0]]["opts"] == [] and by_id[path[0]]["parent"] is None and path[-1] == s["best_id"]
    assert all(by_id[b]["parent"] == a and by_id[b]["opts"][:-1] == by_id[a]["opts"] for a, b in pairwise(path))
    assert s["unoptimized_s"] == by_id[path[0]]["median_s"] == done["unoptimized_s"]
    assert [r["round"] for r in s["rounds"]] == list(range(done["rounds"] + 1))
    for rv in s["rounds"]:
        in_round = [c for c in cands if c["round"] == rv["round"]]
        assert rv["candidates"] == len(in_round) == rv["timed"] + rv["failed"] + rv["duplicates"]
        assert rv["best_s"] == min(c["median_s"] for c in in_round if c in timed)
    ends = [e for e in events if e["event"] == "round_end"]
    assert ends[-1]["best_id"] == s["best_id"]

    (result,) = client.get("/api/tuning/results").json()
    assert (result["kernel_hash"], result["opts"], result["search_id"], result["median_s"]) == \
        (kernel["kernel_hash"], done["opts"], sid, done["time_s"])
    other = kernel_of(client, "sum-small")["kernel_hash"]
    assert client.get("/api/tuning/searches", params={"kernel_hash": other}).json()["searches"] == []
    assert client.get("/api/tuning/results", params={"kernel_hash": other}).json() == []
    mine = client.get("/api/tuning/searches", params={"kernel_hash": kernel["kernel_hash"]}).json()["searches"]
    assert [x["id"] for x in mine] == [sid]


def hold_at_first_candidate(job: BeamJob, proc: subprocess.Popen[str]) -> threading.Event:
    """Pause the search process as its first candidate arrives, and let it go on once the server has asked it to
    stop (its stdin closed): the stop then lands mid-search however fast, or loaded, the machine is. Set once held."""
    held, add = threading.Event(), job.add

    def go_on_once_asked_to_stop() -> None:
        while proc.stdin is not None and not proc.stdin.closed:
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGCONT)

    def add_and_hold(fields: dict[str, Any]) -> None:
        if fields.get("event") == "candidate" and not held.is_set():
            os.kill(proc.pid, signal.SIGSTOP)
            held.set()
            threading.Thread(target=go_on_once_asked_to_stop, daemon=True).start()
        add(fields)

    job.add = add_and_hold  # type: ignore[method-assign]
    return held


def test_a_stopped_search_is_interrupted_and_resumes(tiny: TraceStore, db: Path, missing_dist: Path,
                                                    make_client: Callable[..., TestClient]) -> None:
    with make_client(tiny, db=db, dist=missing_dist) as c:
        app = c.app
        started = c.post(BEAM.format(tid="max-small", ci=1), json=SMALL).json()
        job = app.state.beams.get(started["job"])
        held = hold_at_first_candidate(job, app.state.beams._running[1])
        wait_for(held.is_set)
    # shutting the app down stopped the search: its stream ends saying so, its candidates are kept
    last = job.since(0)[0][-1]
    assert (last.event, getattr(last, "kind", None)) == ("error", "interrupted")
    with make_client(tiny, db=db, dist=missing_dist) as c:
        (s,) = c.get("/api/tuning/searches").json()["searches"]
        assert (s["id"], s["status"], s["job"]) == (started["search_id"], "interrupted", None)
        again = c.post(BEAM.format(tid="max-small", ci=1), json=SMALL).json()
        assert (again["search_id"], again["resumed"]) == (started["search_id"], True)
        events = events_of(c.get(f"/api/beam/{again['job']}/events").text)
        assert events[0]["stored"] == s["n_candidates"] > 0 and events[-1]["event"] == "done"
        reused = [e for e in events if e["event"] == "candidate" and not e["measured"]]
        assert len(reused) == s["n_candidates"]
        assert c.get(f"/api/tuning/searches/{started['search_id']}").json()["status"] == "done"


def test_delete_stops_a_search_started_over_the_api_and_a_later_search_resumes_it(client: TestClient) -> None:
    started = client.post(BEAM.format(tid="max-small", ci=1), json=SMALL).json()
    beams = client.app.state.beams  # type: ignore[attr-defined]
    held = hold_at_first_candidate(beams.get(started["job"]), beams._running[1])
    wait_for(held.is_set)
    r = client.delete(f"/api/beam/{started['job']}")
    assert r.status_code == 200, r.text
    assert r.json() == {"job": started["job"], "search_id": started["search_id"], "stopped": True}
    events = events_of(client.get(f"/api/beam/{started['job']}/events").text)
    assert (events[-1]["event"], events[-1]["kind"]) == ("error", "interrupted")
    (s,) = client.get("/api/tuning/searches").json()["searches"]
    assert (s["id"], s["status"], s["job"]) == (started["search_id"], "interrupted", None) and s["n_candidates"] > 0
    # stopping it again changes nothing; a new search of the kernel goes on from what the stopped one stored
    assert client.delete(f"/api/beam/{started['job']}").json()["stopped"] is False
    again = client.post(BEAM.format(tid="max-small", ci=1), json=SMALL).json()
    assert (again["search_id"], again["resumed"]) == (started["search_id"], True)
    events = events_of(client.get(f"/api/beam/{again['job']}/events").text)
    assert events[0]["stored"] == s["n_candidates"] and events[-1]["event"] == "done"
    assert client.delete(f"/api/beam/{again['job']}").json() == {"job": again["job"],
                                                                 "search_id": again["search_id"], "stopped": False}


def test_delete_of_an_unknown_job_is_404_and_needs_no_body(client: TestClient) -> None:
    r = client.delete("/api/beam/nope")
    assert r.status_code == 404 and "no BEAM job 'nope'" in r.json()["detail"], r.text
    assert client.delete("/api/beam/nope", headers={"Origin": "http://evil.example"}).status_code == 403


def test_a_search_process_that_dies_ends_its_stream_saying_so(client: TestClient) -> None:
    """A crash (a candidate that kills the process, the OOM killer) is no hang: the stream ends with an error."""
    started = client.post(BEAM.format(tid="max-small", ci=1), json=SMALL).json()
    beams = client.app.state.beams  # type: ignore[attr-defined]
    beams._running[1].kill()
    events = events_of(client.get(f"/api/beam/{started['job']}/events").text)
    assert events[-1]["event"] == "error" and events[-1]["kind"] == "failed"
    assert "exit status -9" in events[-1]["detail"]
    assert client.get(f"/api/tuning/searches/{started['search_id']}").json()["status"] == "interrupted"
    again = client.post(BEAM.format(tid="max-small", ci=1), json=SMALL)  # nothing is left running
    assert again.status_code == 202 and again.json()["resumed"]
    assert events_of(client.get(f"/api/beam/{again.json()['job']}/events").text)[-1]["event"] == "done"


def test_a_client_that_leaves_a_stream_breaks_nothing(tiny: TraceStore, db: Path, missing_dist: Path, token: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    auth = {"Authorization": f"token {token}"}
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url, port = f"http://127.0.0.1:{sock.getsockname()[1]}", sock.getsockname()[1]
    app = create_app(tiny, db=db, dist=missing_dist, access=Access(token, port, loopback=True))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 30)
        started = httpx.post(url + BEAM.format(tid="max-small", ci=1), json=SMALL, headers=auth, timeout=60).json()
        with httpx.stream("GET", f"{url}/api/beam/{started['job']}/events", headers=auth, timeout=60) as s:
            first = next(line for line in s.iter_lines() if line)
        assert json.loads(first.removeprefix("data: "))["event"] == "start"  # ... and the client is gone
        assert httpx.get(url + "/api/meta", headers=auth, timeout=10).status_code == 200
        events = events_of(httpx.get(f"{url}/api/beam/{started['job']}/events", headers=auth, timeout=60).text)
        assert events[-1]["event"] == "done"  # the search went on to its end
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


@pytest.mark.parametrize(("method", "url"), [
    ("post", BEAM.format(tid="nope", ci=1)), ("post", BEAM.format(tid="max-small", ci=0)),
    ("post", BEAM.format(tid="max-small", ci=9)), ("get", "/api/beam/nope/events"),
    ("get", "/api/tuning/searches/1")])
def test_unknown_ids_are_404_json(client: TestClient, method: str, url: str) -> None:
    r = getattr(client, method)(url, **({"json": SMALL} if method == "post" else {}))
    assert r.status_code == 404 and r.json()["detail"], r.json()


@pytest.mark.parametrize(("body", "words"), [
    ({}, "body.width: Field required"), ({"width": 0}, "body.width: Input should be greater than or equal to 1"),
    ({"width": 17}, "body.width: Input should be less than or equal to 16"), ({"width": "x"}, "body.width"),
    ({"width": 2, "max_rounds": 0}, "body.max_rounds"), ({"width": 2, "max_rounds": 99}, "body.max_rounds"),
    ({"width": 2, "force": True}, "body.force: Extra inputs are not permitted")])
def test_bad_beam_bodies_are_422(client: TestClient, body: dict[str, Any], words: str) -> None:
    r = client.post(BEAM.format(tid="max-small", ci=1), json=body)
    assert r.status_code == 422 and words in r.json()["detail"], r.json()


@pytest.mark.parametrize(("method", "url"), [
    ("get", "/api/tuning/searches/0"), ("get", "/api/tuning/searches/x"), ("get", f"/api/tuning/searches/{2**63}"),
    ("get", "/api/tuning/searches?limit=0"),
    ("get", "/api/tuning/results?kernel_hash="), ("post", BEAM.format(tid="max-small", ci=-1))])
def test_bad_params_are_422(client: TestClient, method: str, url: str) -> None:
    r = getattr(client, method)(url, **({"json": SMALL} if method == "post" else {}))
    assert r.status_code == 422 and r.json()["errors"], r.json()


def test_a_kernel_that_names_no_device_cannot_be_searched(store: TraceStore, db: Path, missing_dist: Path,
                                                          make_client: Callable[..., TestClient]) -> None:
    with make_client(store, db=db, dist=missing_dist) as c:
        r = c.post(BEAM.format(tid="broken", ci=0), json=SMALL)
    assert r.status_code == 422 and "names no device" in r.json()["detail"]


def test_reading_a_missing_database_creates_nothing(client: TestClient, db: Path) -> None:
    assert client.get("/api/tuning/searches").json() == {"searches": [], "next_before": None}
    assert client.get("/api/tuning/results").json() == []
    r = client.get("/api/tuning/searches/1")
    assert r.status_code == 404 and str(db) in r.json()["detail"]
    assert not db.exists()


def test_a_corrupt_database_is_503_naming_the_file(client: TestClient, db: Path) -> None:
    db.write_bytes(b"this is not an SQLite database, whatever its name says" * 100)
    for url in ("/api/tuning/searches", "/api/tuning/results", "/api/tuning/searches/1"):
        r = client.get(url)
        assert r.status_code == 503 and str(db) in r.json()["detail"] and "uopviz cache clear" in r.json()["detail"]
    for _ in range(2):  # the search cannot begin, and leaves nothing running behind it
        r = client.post(BEAM.format(tid="max-small", ci=1), json=SMALL)
        assert r.status_code == 503 and str(db) in r.json()["detail"], r.json()


def _fill(db: Path) -> dict[str, list[int]]:
    """Searches of two kernels, by kernel hash: done (its winner is not its fastest), running (two candidates
    tie for fastest), failed, empty, and more of the other kernel than one page holds."""
    a, b = CacheKey.of("aaaa", TargetInfo("CPU"), 1), CacheKey.of("bbbb", TargetInfo("CPU"), 1)
    split = [{"op": "SPLIT", "axis": 0, "arg": [2, "UPCAST", False]}]
    ids: dict[str, list[int]] = {"aaaa": [], "bbbb": []}
    with TuningDB(db) as d:
        h = d.begin_search(a, "r_L4", "ast", {"beam": 2})
        root = d.add_candidate(h.id, None, 0, [], "p0", 10, 0.1, None, [4e-6, 5e-6])
        d.add_candidate(h.id, root, 1, split, None, None, 0.1, "wrong result", [])
        d.add_candidate(h.id, root, 1, split * 2, "p0", 10, 0.1, None, [])  # a duplicate
        fast = d.add_candidate(h.id, root, 1, split * 3, "p3", 10, 0.1, None, [1e-6])
        d.add_candidate(h.id, fast, 2, split * 4, "p4", 10, 0.1, None, [0.5e-6])
        d.finish_search(h.id, fast)  # the winner is what the search chose
        ids["aaaa"].append(h.id)
        h = d.begin_search(a, "r_L4", "ast", {"beam": 3})
        root = d.add_candidate(h.id, None, 0, [], "p0", 10, 0.1, None, [6e-6])
        d.add_candidate(h.id, root, 0, split * 5, "p5", 10, 0.1, None, [3e-6])  # a root with opts: no unoptimized
        d.add_candidate(h.id, root, 1, split, "p1", 10, 0.1, None, [2e-6])
        d.add_candidate(h.id, root, 1, split * 2, "p2", 10, 0.1, None, [2e-6])
        ids["aaaa"].append(h.id)
        h = d.begin_search(b, "r_L8", "ast", {"beam": 1})
        d.add_candidate(h.id, None, 0, [], None, None, 0.1, "does not compile", [])
        d.fail_search(h.id, "nothing compiled")
        ids["bbbb"].append(h.id)
        ids["aaaa"].append(d.begin_search(a, "r_L4", "ast", {"beam": 4}).id)
        for width in range(5, 10):
            ids["bbbb"].append(d.begin_search(b, "r_L8", "ast", {"beam": width}).id)
    return ids


def _expected(d: TuningDB, sid: int) -> dict[str, Any]:
    """A search's summary computed from all its candidates, as the list once did."""
    info = d.search(sid)
    assert info is not None
    cands = d.candidates(sid)
    timed = [c for c in cands if c.error is None and c.median_s is not None]
    best = next(c for c in cands if c.id == info.best_candidate_id) if info.best_candidate_id else \
        min(timed, key=lambda c: c.median_s or 0.0, default=None)
    unoptimized = next((c.median_s for c in timed if c.parent_id is None and c.opts == []), None)
    return {"best_id": best and best.id, "best_s": best and best.median_s, "best_opts": best and best.opts,
            "unoptimized_s": unoptimized, "n_candidates": len(cands)}


def test_the_list_comes_a_page_at_a_time_with_each_summary_as_its_candidates_give_it(client: TestClient,
                                                                                     db: Path) -> None:
    ids = _fill(db)
    everything = sorted(ids["aaaa"] + ids["bbbb"], reverse=True)
    for kernel, want in (None, everything), ("aaaa", ids["aaaa"][::-1]), ("bbbb", ids["bbbb"][::-1]):
        pages, before = [], None
        while True:
            params = {"limit": 3, "kernel_hash": kernel, "before": before}
            page = client.get("/api/tuning/searches", params={k: v for k, v in params.items() if v is not None}).json()
            pages.append([s["id"] for s in page["searches"]])
            if (before := page["next_before"]) is None:
                break
            assert before == pages[-1][-1]
        assert [i for p in pages for i in p] == want
        assert all(len(p) == 3 for p in pages[:-1]) and 0 < len(pages[-1]) <= 3
    listed = client.get("/api/tuning/searches").json()
    assert listed["next_before"] is None and [s["id"] for s in listed["searches"]] == everything
    with TuningDB(db) as d:
        for s in listed["searches"]:
            assert {k: s[k] for k in ("best_id", "best_s", "best_opts", "unoptimized_s", "n_candidates")} == \
                _expected(d, s["id"]), s
    by_id = {s["id"]: s for s in listed["searches"]}
    done, running, failed, empty = ids["aaaa"][0], ids["aaaa"][1], ids["bbbb"][0], ids["aaaa"][2]
    assert (by_id[done]["status"], by_id[done]["best_s"], by_id[done]["unoptimized_s"]) == ("done", 1e-6, 4.5e-6)
    assert (by_id[running]["status"], by_id[running]["best_s"], by_id[running]["best_opts"]) == \
        ("interrupted", 2e-6, [{"op": "SPLIT", "axis": 0, "arg": [2, "UPCAST", False]}])  # the earlier of a tie
    assert (by_id[failed]["status"], by_id[failed]["best_id"], by_id[failed]["unoptimized_s"]) == ("failed", None, None)
    assert (by_id[empty]["n_candidates"], by_id[empty]["best_id"]) == (0, None)
    assert client.get(f"/api/tuning/searches/{running}").json()["winning_path"] == [by_id[running]["best_id"] - 2,
                                                                                    by_id[running]["best_id"]]
    assert client.get("/api/tuning/searches", params={"before": everything[-1]}).json() == \
        {"searches": [], "next_before": None}


@pytest.mark.parametrize("query", ["before=0", "before=x", f"before={2**63}", "limit=1001", "limit=-1"])
def test_bad_page_parameters_are_422(client: TestClient, query: str) -> None:
    r = client.get(f"/api/tuning/searches?{query}")
    assert r.status_code == 422 and r.json()["errors"], r.json()


def test_the_list_reads_summaries_through_indexes_not_every_candidate(db: Path) -> None:
    """The list's query plan: each search's count, best so far and unoptimized time come from indexes; no
    candidate table scan (at 200,000 candidates, reading them all took seconds)."""
    _fill(db)
    with TuningDB(db) as d:
        statements: list[str] = []
        d._conn.set_trace_callback(statements.append)
        d.searches("aaaa", 3, 100)
        d._conn.set_trace_callback(None)
        (query,) = [q for q in statements if q.lstrip().upper().startswith("SELECT")]
        plan = " | ".join(row[3] for row in d._conn.execute(f"EXPLAIN QUERY PLAN {query}"))
    assert "SCAN candidates" not in plan and "SCAN lead" not in plan, plan
    assert "candidates_timed" in plan and "candidates_roots" in plan and "candidates_by_search" in plan, plan


def test_openapi_documents_the_tuning_routes(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    assert {"/api/tuning/searches", "/api/tuning/searches/{sid}", "/api/tuning/results",
            "/api/traces/{trace_id}/contexts/{ci}/beam", "/api/beam/{job}/events"} <= set(paths)
    listing = {p["name"]: p for p in paths["/api/tuning/searches"]["get"]["parameters"]}
    assert set(listing) == {"kernel_hash", "limit", "before"} and "next_before" in listing["before"]["description"]
    beam = paths["/api/traces/{trace_id}/contexts/{ci}/beam"]["post"]
    assert set(beam["responses"]) == {"202", "400", "401", "403", "404", "409", "415", "422", "503"}
    stream = paths["/api/beam/{job}/events"]["get"]["responses"]["200"]["content"]
    assert "text/event-stream" in stream
    item = json.dumps(stream["text/event-stream"]["itemSchema"])
    assert all(name in item for name in ("StartEvent", "CandidateEvent", "RoundEndEvent", "DoneEvent", "ErrorEvent"))
