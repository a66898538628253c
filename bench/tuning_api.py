"""The tuning list route at scale: `GET /api/tuning/searches` over a database of 200,000 candidates.

Fills a tuning database (SEARCHES searches of CANDIDATES candidates each, by import: half of them finished, half
still running, with failed and repeated candidates as a search has them), serves it with `uopviz serve --db`, and
times the list's first page (`?limit=200`, what the BEAM tab asks for): requests one at a time, then CONCURRENT at
once. Prints medians and maxima of the time per request.

    python bench/tuning_api.py [--searches 100] [--candidates 2000] [--runs 5] [--concurrent 10]

To measure another checkout (e.g. before a change), run this file with that checkout first on the path:
`cd OTHER && PYTHONPATH=. python PATH/TO/bench/tuning_api.py`; so it reads the URL the server printed itself, with
or without a token (one goes with every request).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import uopviz.backend.child
from uopviz.backend.child import served

from uopviz import __version__
from uopviz.search.db import EXPORT_FORMAT, EXPORT_VERSION, TuningDB

ROUNDS = 8
PAGE = "api/tuning/searches?limit=200"


def _candidate(i: int, per_round: int) -> dict[str, Any]:
    """Candidate i of a search: round i // per_round, extending one of the round before; every 10th fails, every
    7th repeats an earlier program (so it has no samples)."""
    rnd = i // per_round
    failed, repeated = i % 10 == 9, i % 7 == 6
    return {"id": i, "parent": None if i == 0 else max(0, i - per_round), "round": rnd,
            "opts": [{"op": "SPLIT", "axis": (i + r) % 3, "arg": [2, "UPCAST", False]} for r in range(rnd)],
            "program_hash": f"p{i}", "uop_count": 40 + i % 50, "compile_s": 0.01,
            "error": "wrong result: 3 elements differ" if failed else None,
            "samples": [] if failed or repeated else [1e-6 * (1 + (i * 7919) % 1000 / 100)] * 3,
            "created_at": 1.7e9 + i}


def fill(path: Path, searches: int, candidates: int) -> None:
    per_round = max(1, candidates // ROUNDS)
    cands = [_candidate(i, per_round) for i in range(candidates)]
    best = min((c for c in cands if c["samples"]), key=lambda c: c["samples"][0])["id"]
    target = {"device": "CPU", "device_name": "bench CPU", "driver": "", "compiler": "cc", "compiler_version": "1"}
    kernels = [{"hash": f"{k:016x}", "name": f"r_L{k + 2}_R64", "ast": "SINK(...)"} for k in range(10)]
    doc = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "kernels": kernels, "results": [], "searches": [
        {"uid": uuid.uuid4().hex, "kernel_hash": kernels[s % 10]["hash"], "target": target,
         "action_space_version": 1, "uopviz_version": __version__, "params": {"beam": 4, "max_rounds": ROUNDS},
         "status": "done" if s % 2 else "running", "error": None, "started_at": 1.7e9 + s,
         "finished_at": 1.7e9 + s + 60 if s % 2 else None, "best_candidate": best if s % 2 else None,
         "candidates": cands} for s in range(searches)]}
    with TuningDB(path) as db:
        db.import_doc(doc)


def timed_get(client: httpx.Client, url: str) -> float:
    t0 = time.perf_counter()
    r = client.get(url)
    took = time.perf_counter() - t0
    if r.status_code != 200:
        raise SystemExit(f"GET {url}: {r.status_code} {r.text[:300]}")
    return took


def report(what: str, times: list[float]) -> None:
    print(f"  {what}: median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
          f"({len(times)} requests)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--searches", type=int, default=100)
    ap.add_argument("--candidates", type=int, default=2000, help="per search")
    ap.add_argument("--runs", type=int, default=5, help="requests one at a time; rounds of concurrent ones")
    ap.add_argument("--concurrent", type=int, default=10)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="uopviz-bench-tuning-"))
    t0 = time.perf_counter()
    fill(tmp / "tuning.db", args.searches, args.candidates)
    print(f"{args.searches} searches x {args.candidates} candidates = {args.searches * args.candidates} candidates "
          f"({(tmp / 'tuning.db').stat().st_size / 1e6:.0f} MB) filled in {time.perf_counter() - t0:.1f} s")
    with served(str(tmp / "cache"), "--db", str(tmp / "tuning.db")) as printed:
        base, token = printed.partition("?")[0], parse_qs(urlsplit(printed).query).get("token", [None])[0]
        headers = {"Authorization": f"token {token}"} if token else {}
        with httpx.Client(base_url=base, headers=headers, timeout=600) as client:
            print(f"GET /{PAGE} (uopviz from {Path(uopviz.backend.child.__file__).parents[1]}, "
                  f"{'with' if token else 'without'} a token)")
            timed_get(client, PAGE)  # warm: the database's pages in the OS cache
            report("one at a time", [timed_get(client, PAGE) for _ in range(args.runs)])
            with ThreadPoolExecutor(args.concurrent) as pool:
                times = [t for _ in range(args.runs)
                         for t in pool.map(lambda _: timed_get(client, PAGE), range(args.concurrent))]
            report(f"{args.concurrent} at once", times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
