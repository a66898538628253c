"""The `uopviz` command line as a user runs it."""

import json
import subprocess
import sys

import pytest

from uopviz.cli import main


def test_demo_runs_a_gemm_and_saves_a_loadable_trace(tmp_path, capsys):
    out = tmp_path / "demo.uopviz-trace.json"
    assert main(["demo", "--out", str(out), "--shape", "6", "5", "3"]) == 0
    text = capsys.readouterr().out
    # the heuristic's opts (no tuning database in tests): 6 rows as 3 x UPCAST 2, a vector accumulator, the column
    # loop outside the row loop
    assert "kernel r_L5_L3_R3_u2 on CPU" in text and "error vs NumPy" in text
    assert "*(float2_u*)(acc0) = ((float2){0.0f,0.0f});" in text
    doc = json.loads(out.read_text())
    assert doc["format"] == "uopviz-trace" and [c["name"] for c in doc["contexts"]] == ["schedule", "r_L5_L3_R3_u2"]
    assert main(["trace", "show", str(out)]) == 0
    assert "Rangeify / rangeify" in capsys.readouterr().out


def test_trace_show_reports_a_bad_file_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "uopviz.cli", "trace", "show", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "uopviz:" in r.stderr
    r = subprocess.run([sys.executable, "-m", "uopviz.cli", "trace", "show", str(tmp_path / "missing.json")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "No such file" in r.stderr


def test_kernels_lists_and_runs_the_zoo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels"]) == 0
    listing = capsys.readouterr().out
    assert all(n in listing for n in ("gemm", "conv2d", "attention", "scatter_add", "elementwise"))
    assert main(["kernels", "softmax", "--small", "--device", "PYTHON"]) == 0
    assert "matches NumPy" in capsys.readouterr().out
    assert main(["kernels", "gemm", "--device", "TPU"]) == 1
    assert "unknown device 'TPU'" in capsys.readouterr().err
