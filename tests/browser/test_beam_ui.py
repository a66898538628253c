"""The BEAM tab in a real browser against `uopviz serve`: past searches come from the database `--db` names (one
with a failed and a repeated candidate, drawn as such); a small BEAM search of the zoo gemm (small sizes) started
from its kernel view is followed live, then shows a dot per timed candidate at its round, the winning path and its
opts as the database has them; the winner opens in the Kernel tab; a reload shows the same search. Screenshots
go to test-artifacts/browser/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from uopviz.backend.child import served
from uopviz.backend.recording import record_zoo

from tests.browser.support import api
from uopviz.search.db import TuningDB
from uopviz.search.keys import CacheKey, TargetInfo

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow
SEARCH_TIMEOUT_MS = 120_000
OTHER_SEARCHES = 200  # with search 1, one more than the first page of the list (the route's default limit)
WRONG = "wrong result: 12 elements differ"
NODE_A, NODE_B = "box-a (ray node 1a2b3c4d)", "box-b (ray node 5e6f7a8b)"  # where the past search's candidates ran


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`uopviz serve gemm-small.uopviz-trace.json --db tuning.db`, the database holding one earlier search of its
    kernel (on another machine, a Ray cluster of two nodes: each candidate built and timed on one of them, the final
    check on one): the unoptimized kernel and the heuristic's, a candidate that failed, one whose program repeats an
    earlier one, the winner, and the final check timing those three again; then OTHER_SEARCHES of another kernel,
    more than a page of the list."""
    tmp = tmp_path_factory.mktemp("beam-ui")
    trace = record_zoo("gemm", "CPU", small=True)
    trace.save(tmp / "gemm-small.uopviz-trace.json")
    kernel_hash = next(p.input for p in trace.contexts[1].passes if p.depth == 0)
    with TuningDB(tmp / "tuning.db") as db:
        h = db.begin_search(CacheKey.of(kernel_hash, TargetInfo("CPU", "another CPU"), 1), trace.contexts[1].name,
                            "ast", {"beam": 1, "max_rounds": 1, "threshold": 0.01})
        root = db.add_candidate(h.id, None, 0, [], "p0", 40, 0.02, None, [4e-6, 5e-6, 6e-6], NODE_A, NODE_A)
        heuristic = [{"op": "SPLIT", "axis": 1, "arg": [2, "UPCAST", False]}]
        heur = db.add_candidate(h.id, root, 0, heuristic, "ph", 44, 0.02, None, [3e-6, 3e-6, 3e-6], NODE_B, NODE_B)
        upcast = [{"op": "SPLIT", "axis": 0, "arg": [3, "UPCAST", False]}]
        db.add_candidate(h.id, root, 1, upcast, "p1", 52, 0.03, WRONG, [], NODE_B, NODE_A)
        db.add_candidate(h.id, root, 1, [{"op": "SPLIT", "axis": 1, "arg": [2, "UNROLL", False]}], "p0", 40, 0.02,
                         None, [])
        best_opts = [{"op": "SPLIT", "axis": 1, "arg": [5, "UPCAST", False]}]
        best = db.add_candidate(h.id, root, 1, best_opts, "p3", 48, 0.03, None, [1e-6, 2e-6, 3e-6], NODE_A, NODE_B)
        # the final check: the winner, the heuristic's and the unoptimized kernels timed again, each as a child
        db.add_candidate(h.id, heur, 2, heuristic, "ph", 44, None, None, [3e-6, 4e-6, 5e-6], measured_on=NODE_B)
        db.add_candidate(h.id, root, 2, [], "p0", 40, None, None, [5e-6, 5e-6, 6e-6], measured_on=NODE_B)
        db.finish_search(h.id, db.add_candidate(h.id, best, 2, best_opts, "p3", 48, None, None, [1e-6, 2e-6, 3e-6],
                                                measured_on=NODE_B))
        for _ in range(OTHER_SEARCHES):
            other = db.begin_search(CacheKey.of("0ther", TargetInfo("CPU"), 1), "r_L8", "ast", {"beam": 1})
            db.finish_search(other.id, db.add_candidate(other.id, None, 0, [], "q0", 10, 0.01, None, [1e-6]))
    with served(str(tmp / "cache"), str(tmp / "gemm-small.uopviz-trace.json"), "--db", str(tmp / "tuning.db")) as url:
        yield url


def describe(opt: dict[str, Any]) -> str:
    """How the UI writes an opt (panels/kernel.js describeOpt)."""
    if opt["op"] == "SPLIT":
        factor, axis_type, top = opt["arg"]
        return f"{axis_type} a{opt['axis']} ×{factor}{' top' if top else ''}"
    return {"PADTO": f"PADTO a{opt['axis']} to {opt['arg']}", "SWAP": f"SWAP a{opt['axis']} ↔ a{opt['arg']}"}.get(
        opt["op"], opt["op"])


def chart_ids(page: Page, selector: str) -> list[int]:
    return sorted(page.eval_on_selector_all(selector, "els => els.map(e => Number(e.dataset.id))"))


def check_chart(page: Page, search: dict[str, Any]) -> None:
    """The chart draws every candidate of the search where it belongs, and its winning path."""
    cands = search["candidates"]
    timed = [c for c in cands if c["median_s"] is not None and c["error"] is None]
    assert chart_ids(page, ".uv-beam-dot") == sorted(c["id"] for c in timed)
    assert chart_ids(page, ".uv-beam-failed") == sorted(c["id"] for c in cands if c["error"] is not None)
    assert chart_ids(page, ".uv-beam-repeat") == sorted(c["id"] for c in cands if c["duplicate"])
    rounds = page.eval_on_selector_all(".uv-beam-dot", "els => els.map(e => [e.dataset.id, e.dataset.round])")
    assert {int(i): int(r) for i, r in rounds} == {c["id"]: c["round"] for c in timed}
    assert chart_ids(page, ".uv-beam-dot.uv-best") == [search["best_id"]]
    assert chart_ids(page, ".uv-beam-dot.uv-on-path") == sorted(search["winning_path"])
    assert page.get_attribute(".uv-beam-path", "d")  # the line through the winning path
    by_id = {c["id"]: c for c in cands}

    def kind(c: dict[str, Any]) -> str:
        if c["parent"] is None:
            return "unoptimized"
        if c["round"] == 0:
            return "heuristic"
        return "re-timed" if c["opts"] == by_id[c["parent"]]["opts"] else "step"

    def rows(selector: str) -> list[list[Any]]:
        return page.eval_on_selector_all(selector, "els => els.map(e => [Number(e.dataset.id), e.dataset.kind, "
                                         "[...e.querySelectorAll('.uv-chip')].map(c => c.textContent), "
                                         "e.querySelector('.uv-beam-step-time').textContent])")

    def expected(c: dict[str, Any]) -> list[Any]:
        return [c["id"], kind(c), [describe(o) for o in c["opts"]] or ["no opts"]]

    # every step of the winning path with its full opts, the unoptimized, heuristic and re-timed kernels named
    path = [by_id[i] for i in search["winning_path"]]
    steps = rows(".uv-beam-step")
    assert [row[:3] for row in steps] == [expected(c) for c in path]
    assert all("GFLOP/s" in row[3] and "GB/s" in row[3] for row, c in zip(steps, path) if c["median_s"] is not None)
    # the heuristic's candidate is named with its full opts and speed even when BEAM's path does not go through it
    heuristic = [c for c in cands if kind(c) == "heuristic"]
    others = [c for c in heuristic if c["id"] not in search["winning_path"]]
    others += [c for c in cands if c["parent"] in {h["id"] for h in others} and kind(c) == "re-timed"]
    shown = rows(".uv-beam-other")
    assert [row[:3] for row in shown] == [expected(c) for c in others]
    assert all("GFLOP/s" in row[3] for row, c in zip(shown, others) if c["median_s"] is not None)
    labelled = [c["id"] for c in heuristic if c["median_s"] is not None and c["error"] is None]
    assert chart_ids(page, ".uv-beam-dot-label") == labelled


def test_past_searches_come_from_the_database_and_show_failed_and_repeated_candidates(page: Page, server: str,
                                                                                     shots: Path) -> None:
    page.goto(f"{server}#/t/gemm-small/c/1/p/0/s/0/v/beam")
    page.click(".uv-beam-row[data-sid='1']")
    page.locator(".uv-beam-search[data-sid='1'][data-status='done']").wait_for()
    assert page.url.endswith("/v/beam/b/1")
    check_chart(page, api(page, server, "tuning/searches/1"))
    # the path ends in the winner's re-timing; the heuristic's kernel, off the path, is listed with its own
    assert page.locator(".uv-beam-step").last.get_attribute("data-kind") == "re-timed"
    assert page.eval_on_selector_all(".uv-beam-other", "els => els.map(e => e.dataset.kind)") == ["heuristic",
                                                                                                  "re-timed"]
    assert page.inner_text(".uv-beam-other[data-kind='heuristic'] .uv-chip") == "UPCAST a1 ×2"
    page.click(".uv-beam-failed")
    assert page.inner_text(".uv-beam-picked .uv-error") == WRONG
    # nothing in the tab is wider than it (the list's speeds wrap): no sideways scrolling, no clipped text
    assert page.evaluate("() => { const b = document.querySelector('.uv-tab-body.uv-beam'); "
                         "return b.scrollWidth <= b.clientWidth; }")
    assert page.inner_text(".uv-beam-result").startswith("Tuned on another CPU: 2.00 µs with UPCAST a1 ×5")
    page.screenshot(path=shots / "beam-past-search.png")


def test_a_candidate_says_which_machine_built_and_which_timed_it(page: Page, server: str, shots: Path) -> None:
    """The past search ran on two Ray nodes: a picked candidate names the node that built it and the one that timed
    it, as the database has them (a wrong one was built on one node and found wrong on the other; a final
    re-timing was timed, not built)."""
    search = api(page, server, "tuning/searches/1")
    page.goto(f"{server}#/t/gemm-small/c/1/p/0/s/0/v/beam/b/1")
    page.locator(".uv-beam-search[data-sid='1'][data-status='done']").wait_for()

    def facts() -> dict[str, str]:
        keys = page.eval_on_selector_all(".uv-beam-picked dt", "els => els.map(e => e.textContent)")
        values = page.eval_on_selector_all(".uv-beam-picked dd", "els => els.map(e => e.textContent)")
        return dict(zip(keys, values, strict=True))

    winner = next(c for c in search["candidates"] if c["round"] == 1 and c["id"] in search["winning_path"])
    page.click(f".uv-beam-dot[data-id='{winner['id']}']")
    page.locator(".uv-beam-picked").wait_for()
    assert (winner["built_on"], winner["measured_on"]) == (NODE_A, NODE_B)
    assert {k: v for k, v in facts().items() if k.endswith(" on")} == {"built on": NODE_A, "measured on": NODE_B}
    page.screenshot(path=shots / "beam-where-it-ran.png")
    page.click(f".uv-beam-dot[data-id='{search['best_id']}']")  # the final check's re-timing of the winner
    page.wait_for_function("id => document.querySelector('.uv-beam-picked .uv-label').textContent.includes('#' + id)",
                           arg=search["best_id"])
    assert {k: v for k, v in facts().items() if k.endswith(" on")} == {"measured on": NODE_B}
    page.click(".uv-beam-failed")
    page.wait_for_function("() => document.querySelector('.uv-beam-picked .uv-error') !== null")
    assert {k: v for k, v in facts().items() if k.endswith(" on")} == {"built on": NODE_B, "measured on": NODE_A}


def test_every_kernel_s_searches_come_a_page_at_a_time(page: Page, server: str) -> None:
    everything = [s["id"] for s in api(page, server, "tuning/searches?limit=1000")["searches"]]
    page.goto(f"{server}#/t/gemm-small/c/1/p/0/s/0/v/beam")
    page.locator(".uv-beam-row").first.wait_for()
    listed = "els => els.map(e => Number(e.dataset.sid))"
    assert page.eval_on_selector_all(".uv-beam-row", listed) == [1]  # this kernel's only
    assert page.locator(".uv-beam-more").count() == 0
    page.check(".uv-beam-all input")
    page.wait_for_function("n => document.querySelectorAll('.uv-beam-row').length === n", arg=200)
    assert page.eval_on_selector_all(".uv-beam-row", listed) == everything[:200]
    page.click(".uv-beam-more")
    page.wait_for_function("n => document.querySelectorAll('.uv-beam-row').length === n", arg=len(everything))
    assert page.eval_on_selector_all(".uv-beam-row", listed) == everything and everything[-1] == 1
    assert page.locator(".uv-beam-more").count() == 0


def test_run_a_beam_search_and_see_its_candidates_and_winning_path(page: Page, server: str, shots: Path) -> None:
    kernel = api(page, server, "traces/gemm-small")["contexts"][1]
    page.goto(f"{server}#/t/gemm-small/c/1/p/0/s/0/v/beam")
    page.locator(".uv-beam-row").first.wait_for()
    assert kernel["name"] in page.inner_text(".uv-beam .uv-section-title")

    page.fill(".uv-beam-width", "2")
    page.fill(".uv-beam-rounds", "2")
    page.click(".uv-beam-start")
    page.locator(".uv-beam-progress").wait_for()  # live progress: round, candidates measured, best so far
    assert "candidates measured" in page.inner_text(".uv-beam-progress")
    page.wait_for_function("() => /\\/b\\/\\d+$/.test(location.hash)")
    sid = int(page.url.rsplit("/b/", 1)[1])
    assert sid != 1 and page.is_disabled(".uv-beam-start")
    page.wait_for_function("() => document.querySelectorAll('.uv-beam-dot').length >= 5 || "
                           "document.querySelector('.uv-beam-outcome')", timeout=SEARCH_TIMEOUT_MS)
    page.screenshot(path=shots / "beam-gemm-running.png")

    page.locator(".uv-beam-outcome").wait_for(timeout=SEARCH_TIMEOUT_MS)
    page.locator(f".uv-beam-search[data-sid='{sid}'][data-status='done']").wait_for()
    search = api(page, server, f"tuning/searches/{sid}")
    assert search["status"] == "done" and search["kernel_hash"] == kernel["kernel_hash"] and search["width"] == 2
    # the chart ends on the database's winner, which the final round may have moved off the fastest live candidate
    page.locator(f".uv-beam-dot.uv-best[data-id='{search['best_id']}']").wait_for(timeout=10_000)
    check_chart(page, search)
    done = page.inner_text(".uv-beam-outcome")
    results = api(page, server, f"tuning/results?kernel_hash={kernel['kernel_hash']}")
    assert [r["opts"] for r in results if r["search_id"] == sid] == [search["best_opts"]]
    assert page.get_attribute(f".uv-beam-row[data-sid='{sid}'] .uv-beam-pill", "class") == "uv-beam-pill uv-pill-done"
    page.screenshot(path=shots / "beam-gemm-done.png")

    page.reload()
    page.locator(f".uv-beam-search[data-sid='{sid}'][data-status='done']").wait_for()
    check_chart(page, search)

    # A click on a candidate shows its opts; the winner opens in the Kernel tab, lowered with its opts.
    page.click(f".uv-beam-dot[data-id='{search['best_id']}']")
    assert (page.text_content(".uv-beam-picked .uv-label") or "").startswith(f"Candidate #{search['best_id']}")
    page.click(".uv-beam-winner .uv-beam-open")
    page.locator(".uv-opt-reset").wait_for()
    name = page.inner_text(".uv-kernel-title .uv-kname")
    assert name in done and "/v/kernel" in page.url
    assert page.eval_on_selector_all(".uv-kernel .uv-applied .uv-opt-chip", "els => els.map(e => e.textContent)") == \
        [describe(o) for o in search["best_opts"]]
