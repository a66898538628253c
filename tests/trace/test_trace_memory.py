"""A loaded trace takes at most about three times its file's size in memory (a 250 MB trace took 2.0 GB: JSON
parsing made a new string for every mention of a node id, and the bytes read stayed alive through the parse)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import uopviz
from uopviz import Tensor

REPO = Path(__file__).resolve().parents[2]

# loads the trace in a fresh process; prints the resident memory that added, held after and at its peak
MEASURE = """
import resource, sys
import uopviz
def status(key):  # VmHWM, not ru_maxrss: that one keeps the parent's peak across fork and exec
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key))
base = status("VmRSS:")
tr = uopviz.trace.load(sys.argv[1])
assert tr.contexts
print(status("VmRSS:") - base, status("VmHWM:") - base)
"""


def big_trace(path: Path, mb: float) -> int:
    """A recorded trace's contexts repeated until its file has about `mb` megabytes; its size."""
    with uopviz.trace() as tr:
        x = Tensor(np.arange(64, dtype=np.float32).reshape(8, 8))
        ((x @ x.T).softmax(-1) * 2 + x.sum(0)).numpy()
    doc = tr.to_dict()
    one = len(json.dumps(doc["contexts"]))
    doc["contexts"] = doc["contexts"] * max(1, int(mb * 1e6 / one))
    text = json.dumps(doc, separators=(",", ":"))
    path.write_text(text)
    return len(text)


def test_a_loaded_trace_takes_at_most_three_times_its_size(tmp_path: Path) -> None:
    size = big_trace(tmp_path / "big.uopviz-trace.json", 20)
    r = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path / "big.uopviz-trace.json")], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    held, peak = (int(v) for v in r.stdout.split())
    assert held < 3 * size and peak < 3.5 * size, \
        f"{size / 1e6:.1f} MB file: held {held / size:.2f}x, peak {peak / size:.2f}x"
