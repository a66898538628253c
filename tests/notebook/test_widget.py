"""The widget's Python side without a kernel: what show() takes and refuses, the traitlets, the comm's answers
(the server's, to the byte), the static export, and the CLI's `export`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import traitlets
from fastapi.testclient import TestClient
from uopviz.backend.answers import Answers
from uopviz.backend.app import create_app
from uopviz.backend.security import Access
from uopviz.backend.store import TraceStore

import uopviz
from uopviz.codegen.opt import Opt, OptOps
from uopviz.uop.ops import AxisType
from uopviz.widget import TraceView, show, to_html
from uopviz.widget.export import answers_of
from uopviz.widget.requests import answer


@pytest.fixture
def gemm() -> TraceView:
    a, b = uopviz.Tensor(np.ones((8, 12), np.float32)), uopviz.Tensor(np.ones((12, 6), np.float32))
    return show(a @ b)


def test_show_says_what_it_takes() -> None:
    with pytest.raises(TypeError, match=r"uopviz.show takes a Tensor .* got int"):
        uopviz.show(42)
    with pytest.raises(FileNotFoundError, match="no such trace file"):
        uopviz.show("no/such.uopviz-trace.json")
    t = uopviz.Tensor([1.0, 2.0]) + 1
    t.realize()
    with pytest.raises(ValueError, match="realized already, so there is nothing left to record"):
        uopviz.show(t)
    with pytest.raises(ValueError, match="realized already, so there is nothing left to search"):
        t.beam(2)  # it searched nothing and returned [] before


def test_a_tensor_a_trace_a_file_and_a_kernel_all_show(gemm: TraceView, tmp_path: Path) -> None:
    assert gemm.trace and gemm.context == -1 and gemm.opts is None
    with uopviz.trace() as tr:
        (uopviz.Tensor(np.ones(4, np.float32)) * 2).realize()
    tr.save(tmp_path / "t.uopviz-trace.json")
    from uopviz.pipeline import kernels_of, schedule
    ast, _ = kernels_of(schedule([(uopviz.Tensor(np.ones(4, np.float32)) * 3).uop]))[0]
    for x in (tr, tmp_path / "t.uopviz-trace.json", str(tmp_path / "t.uopviz-trace.json"), ast):
        w = show(x)
        detail = answer(w.answers, 1, "trace", [w.trace])["ok"]
        assert any(c["kind"] == "kernel" for c in detail["contexts"])
    assert type(tr._repr_mimebundle_()[0]["application/vnd.jupyter.widget-view+json"]) is dict


def test_opts_take_opt_objects_or_json_and_refuse_malformed_ones(gemm: TraceView) -> None:
    gemm.opts = [Opt(OptOps.SPLIT, 1, (2, AxisType.UPCAST, False))]
    assert gemm.opts == [{"op": "SPLIT", "axis": 1, "arg": [2, "UPCAST", False]}]
    gemm.opts = [{"op": "PADTO", "axis": 0, "arg": 16}]
    with pytest.raises(traitlets.TraitError, match="unknown OptOp 'SPLAT'"):
        gemm.opts = [{"op": "SPLAT", "axis": 0, "arg": 2}]
    gemm.opts = None


def test_the_comm_answers_as_the_server_does(gemm: TraceView) -> None:
    """The same store behind the HTTP app and the widget's requests: the same JSON for every read."""
    store = gemm.answers.store
    client = TestClient(create_app(store, access=Access(None, 0, False)))
    tid = gemm.trace
    for method, args, path in [("meta", [], "meta"), ("traces", [], "traces"), ("trace", [tid], f"traces/{tid}"),
                               ("step", [tid, 1, 1, 2], f"traces/{tid}/contexts/1/passes/1/steps/2"),
                               ("kernel", [tid, 1], f"traces/{tid}/contexts/1/kernel"),
                               ("results", [], "tuning/results")]:
        assert answer(gemm.answers, 7, method, args) == {"response": 7, "ok": client.get(f"/api/{path}").json()}
    split_by_7 = [{"op": "SPLIT", "axis": 0, "arg": [7, "UPCAST", False]}]
    for method, args, status in [("step", [tid, 1, 0, 10_000], 404), ("step", [tid, -1, 0, 0], 422),
                                 ("kernel", [tid, 0], 404), ("trace", ["nope"], 404), ("trace", [], 422),
                                 ("applyOpts", [tid, 1, split_by_7], 422),
                                 ("startBeam", [tid, 1, 99, 2], 422), ("eval", ["1+1"], 422)]:
        got: dict[str, Any] = answer(gemm.answers, 8, method, args)
        assert got["error"]["status"] == status, (method, args, got)


def test_the_static_export_holds_every_step_once_per_node(gemm: TraceView, tmp_path: Path) -> None:
    answers: Answers = gemm.answers
    packed = answers_of(answers, [gemm.trace])
    detail = packed[f"trace/{gemm.trace}"]
    steps = sum(p["steps"] + 1 for c in detail["contexts"] for p in c["passes"])
    assert sum(k.startswith("step/") for k in packed) == steps
    some = packed[f"step/{gemm.trace}/1/0/0"]
    assert all(isinstance(n, str) and n in packed["nodes"] for n in some["nodes"])
    html = to_html(TraceStore("CPU").record_zoo("sum", small=True).trace, tmp_path / "sum.html")
    assert (tmp_path / "sum.html").read_text() == html
    assert html.startswith("<!doctype html>") and "<script src" not in html and "http" not in html.split("<script")[0]


def test_a_widget_shows_as_two_outputs_the_widget_then_its_static_fallback(gemm: TraceView) -> None:
    """JupyterLab draws a widget output's own text/html nowhere (a saved notebook reopened: "model not found"), so
    the fallback is an output of its own, after the widget's (the stylesheet shows one of the two)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()  # display() publishes to a shell's display publisher (else it prints a repr)
    with capture_output() as shown:
        display(gemm)
    widget, fallback = (o.data for o in shown.outputs)
    assert "application/vnd.jupyter.widget-view+json" in widget and "text/html" not in widget
    assert list(fallback) == ["text/html"] and 'class="uopviz-data"' in fallback["text/html"]
    assert len(gemm.fallback) == 32 and f'data-widget="{gemm.fallback}"' in fallback["text/html"]  # the widget hides it
    gemm.close()
    with capture_output() as shown:
        display(gemm)
    assert [list(o.data) for o in shown.outputs] == [["text/plain"]]  # closed: no view, no fallback


def test_views_in_a_box_show_their_fallbacks_after_it_side_by_side(gemm: TraceView) -> None:
    """04-compare-opts shows two views in an HBox, which ipywidgets displays alone: the box's output is followed by
    one holding each view's fallback, in a row as the box lays them out (a box inside a box too); a box without
    views displays as before."""
    import ipywidgets
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    other = show(uopviz.Tensor(np.ones(5, np.float32)) + 1)
    with capture_output() as shown:
        display(ipywidgets.HBox([gemm, ipywidgets.VBox([ipywidgets.Label("x"), other])]))
    box, fallback = (o.data for o in shown.outputs)
    assert "application/vnd.jupyter.widget-view+json" in box and "text/html" not in box
    html = fallback["text/html"]
    assert html.startswith('<div class="uopviz-statics" style="display:flex;flex-direction:row')
    assert html.index(f'data-widget="{gemm.fallback}"') < html.index("flex-direction:column") < html.index(
        f'data-widget="{other.fallback}"')  # the VBox's view inside the HBox's row, after the first view
    assert html.count('class="uopviz-static"') == 2
    with capture_output() as shown:
        display(ipywidgets.HBox([ipywidgets.Label("no view")]))
    assert [sorted(o.data) for o in shown.outputs] == [["application/vnd.jupyter.widget-view+json", "text/plain"]]
    alone = ipywidgets.HBox([other])
    other.close()
    with capture_output() as shown:
        display(alone)
    assert len(shown.outputs) == 1  # a closed view has no fallback


def test_cli_export_names_a_missing_file(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "uopviz.cli", "export", str(tmp_path / "none.json")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "no such trace file" in run.stderr
    (tmp_path / "bad.json").write_text(json.dumps({"format": "other"}))
    run = subprocess.run([sys.executable, "-m", "uopviz.cli", "export", str(tmp_path / "bad.json")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "bad.json" in run.stderr


def test_the_saved_fallback_holds_the_shown_context_alone(gemm: TraceView) -> None:
    """A notebook's fallback is the view shown: every step of its context's passes and the outline of the rest,
    not every pass of every context (a training step's would be megabytes and most of a minute to make)."""
    import base64
    import gzip
    import re

    html = gemm.static_html()
    found = re.search(r'class="uopviz-data">([^<]*)<', html)
    assert found is not None
    packed = json.loads(gzip.decompress(base64.b64decode(found.group(1))))
    detail = packed[f"trace/{gemm.trace}"]
    assert len(detail["contexts"]) > 1  # the outline names every context
    shown = next(c for c in detail["contexts"] if c["kind"] == "kernel")
    steps = {k for k in packed if k.startswith("step/")}
    assert steps == {f"step/{gemm.trace}/{shown['index']}/{p['index']}/{k}"
                     for p in shown["passes"] for k in range(p["steps"] + 1)}
