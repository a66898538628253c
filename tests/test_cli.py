"""The `uopviz` command line as a user runs it."""

import json
import subprocess
import sys

from uopviz.cli import main


def test_demo_simplifies_and_saves_a_loadable_trace(tmp_path, capsys):
    out = tmp_path / "demo.uopviz-trace.json"
    assert main(["demo", "--out", str(out), "--shape", "6", "5", "3"]) == 0
    text = capsys.readouterr().out
    assert "((r0*3)+r2)" in text and "((r2*5)+r1)" in text and "((r0*5)+r1)" in text
    doc = json.loads(out.read_text())
    assert doc["format"] == "uopviz-trace" and doc["contexts"][0]["name"] == "gemm"
    assert main(["trace", "show", str(out)]) == 0
    assert "Symbolic / simplify index math" in capsys.readouterr().out


def test_trace_show_reports_a_bad_file_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = subprocess.run([sys.executable, "-m", "uopviz.cli", "trace", "show", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "uopviz:" in r.stderr
    r = subprocess.run([sys.executable, "-m", "uopviz.cli", "trace", "show", str(tmp_path / "missing.json")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "No such file" in r.stderr
