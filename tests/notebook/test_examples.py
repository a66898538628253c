"""Every example notebook runs top to bottom without edits, and leaves widgets whose state (traitlets) and comm
answers are what the notebook asked for. Each runs a real kernel, so they are slow (but in the default run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.notebook.conftest import Comm, Ran, execute

pytestmark = pytest.mark.slow
UPCAST_4 = [{"op": "SPLIT", "axis": 1, "arg": [4, "UPCAST", False]}]


def ok(reply: dict[str, Any]) -> Any:
    assert "ok" in reply, reply
    return reply["ok"]


def outputs(ran: Ran, mime: str) -> list[str]:
    return [o["data"][mime] for c in ran.nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if mime in o.get("data", {})]


def test_tour_shows_the_recorded_trace_and_steps_it_from_python(work: Path) -> None:
    async def talk(comm: Comm, ran: Ran) -> list[dict[str, Any]]:
        (cid, s), *_ = ran.of("TraceView", step=1)
        return [await comm.request(cid, "meta"), await comm.request(cid, "trace", s["trace"]),
                await comm.request(cid, "step", s["trace"], s["context"], s["pass_index"], s["step"]),
                await comm.request(cid, "kernel", s["trace"], s["context"]),
                await comm.request(cid, "step", s["trace"], s["context"], 999, 0),
                await comm.request(cid, "nosuch")]

    ran = execute("01-tour.ipynb", work, talk)
    meta, trace, step, kernel, missing, unknown = ran.replies
    (_, s), *_ = ran.of("TraceView", step=1)
    ctx = ok(trace)["contexts"][s["context"]]
    assert ctx["kind"] == "kernel" and ctx["passes"][s["pass_index"]]["name"] == "simplify"
    assert {"CPU", "PYTHON"} <= set(ok(meta)["device_opts"])
    colours = {t["name"]: t["color"] for t in ok(meta)["axis_types"]}
    ranges = [n for n in ok(step)["nodes"] if n["op"] == "Range"]
    assert ranges and all(n["color"] == colours[n["axis_type"]] for n in ranges)  # AxisType-filled ranges
    assert ok(step)["rule"] is not None  # step 1 is a rewrite, with its rule
    assert "void" in ok(kernel)["source"] and ok(kernel)["name"] == ctx["name"]
    assert missing["error"]["status"] == 404 and "no pass 999" in missing["error"]["detail"]
    assert unknown["error"]["status"] == 422 and "nosuch" in unknown["error"]["detail"]
    # the saved output falls back to the static view where there is no widget, and the page was written
    html = outputs(ran, "text/html")
    assert html and all('class="uopviz-data"' in h for h in html)
    assert (work / "softmax.html").stat().st_size > 100_000


def test_kernel_by_hand_lowers_and_takes_opts_from_python(work: Path) -> None:
    async def talk(comm: Comm, ran: Ran) -> list[dict[str, Any]]:
        (cid, s), = ran.of("TraceView")
        return [await comm.request(cid, "kernel", s["trace"], 0),
                await comm.request(cid, "applyOpts", s["trace"], 0, s["opts"]),
                await comm.request(cid, "applyOpts", s["trace"], 0, [{"op": "SPLIT", "axis": 1,
                                                                       "arg": [3, "UPCAST", False]}])]

    ran = execute("02-kernel-by-hand.ipynb", work, talk)
    (_, s), = ran.of("TraceView")
    assert s["opts"] == UPCAST_4 and s["tab"] == "kernel"
    compiled, applied, illegal = ran.replies
    assert ok(applied)["name"].endswith("_u4") and ok(applied)["source"] != ok(compiled)["source"]
    assert ok(applied)["opts"] == UPCAST_4 and ok(applied)["trace_id"]
    assert illegal["error"]["status"] == 422 and "not divisible by 3" in illegal["error"]["detail"]
    text = "".join(o.get("text", "") for c in ran.nb.cells for o in c.get("outputs", []))
    assert float(text.split("max error vs NumPy: ")[1].split()[0]) < 1e-4


def test_tune_gemm_shows_the_search_live_then_its_results_and_the_database(work: Path) -> None:
    async def talk(comm: Comm, ran: Ran) -> list[dict[str, Any]]:
        (cid, s), = ran.of("TraceView", tab="beam")
        trace = ok(await comm.request(cid, "trace", s["trace"]))
        kernel = next(c for c in trace["contexts"] if c["kind"] == "kernel")
        page = ok(await comm.request(cid, "searches", kernel["kernel_hash"]))
        return [page, await comm.request(cid, "search", page["searches"][0]["id"]),
                await comm.request(cid, "results", kernel["kernel_hash"])]

    ran = execute("03-tune-gemm.ipynb", work, talk)
    (_, beam), = ran.of("BeamView")
    assert beam["status"] == "done"
    kinds = [e["event"] for e in beam["events"]]
    assert kinds[0] == "start" and "candidate" in kinds and "round_end" in kinds and kinds[-1] == "done"
    total = beam["summary"]["total"]
    assert set(total) == {"unoptimized", "heuristic", "beam"}
    assert all(total[v]["time_s"] > 0 and total[v]["gflops"] > 0 and total[v]["gbs"] > 0 for v in total)
    page, search, results = ran.replies
    assert [s["status"] for s in page["searches"]] == ["done"]
    detail = ok(search)
    assert detail["winning_path"][0] == detail["candidates"][0]["id"] and len(detail["candidates"]) > 2
    assert ok(results) and ok(results)[0]["search_id"] == detail["id"]


def test_compare_opts_keeps_two_widgets_apart(work: Path) -> None:
    async def talk(comm: Comm, ran: Ran) -> list[dict[str, Any]]:
        views = ran.of("TraceView", tab="kernel")
        return [await comm.request(cid, "applyOpts", s["trace"], s["context"], s["opts"]) for cid, s in views]

    ran = execute("04-compare-opts.ipynb", work, talk)
    views = ran.of("TraceView", tab="kernel")
    assert len(views) == 2 and views[0][1]["opts"] != views[1][1]["opts"]
    left, right = (ok(r) for r in ran.replies)
    assert left["name"] != right["name"] and {left["name"][-3:], right["name"][-3:]} == {"_u4", "_r4"}
    text = "".join(o.get("text", "") for c in ran.nb.cells for o in c.get("outputs", []))
    assert text.count("correct") == 3


def test_train_digits_notebook_trains_both_models_and_shows_a_step(work: Path) -> None:
    """examples/train_digits.ipynb: both models reach 95% on the digits' test split; the recorded training step
    holds forward, backward and update kernels."""
    import json
    import shutil

    from tests.notebook.conftest import EXAMPLES
    shutil.copy(EXAMPLES / "train_digits.py", work / "train_digits.py")
    ran = execute("train_digits.ipynb", work)
    text = "".join(o.get("text", "") for c in ran.nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    accs = [float(line.split(": ")[1].split("%")[0]) for line in text.splitlines()
            if line.startswith(("MLP:", "conv:"))]
    assert len(accs) == 2 and min(accs) >= 95, text
    trace = json.loads((work / "mlp-step.uopviz-trace.json").read_text())
    assert len(trace["contexts"]) > 5
    assert ran.of("TraceView")
