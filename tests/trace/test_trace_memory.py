"""A loaded trace takes at most about three times its file's size in memory (a 250 MB trace took 2.0 GB: JSON
parsing made a new string for every mention of a node id, and the bytes read stayed alive through the parse)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

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


def big_trace(path: Path, mb: float, node_share: float = 0.0) -> int:
    """A recorded trace's contexts repeated until its file has about `mb` megabytes, `node_share` of them in
    distinct nodes added to its node table (as a GPT step's trace has: 94k nodes in 20 MB); its size."""
    with uopviz.trace() as tr:
        x = Tensor(np.arange(64, dtype=np.float32).reshape(8, 8))
        ((x @ x.T).softmax(-1) * 2 + x.sum(0)).numpy()
    doc = tr.to_dict()
    one = len(json.dumps(doc["contexts"]))
    doc["contexts"] = doc["contexts"] * max(1, int(mb * (1 - node_share) * 1e6 / one))
    rng, ids = random.Random(0), list(doc["nodes"])
    for _ in range(int(mb * node_share * 1e6 / 110)):  # an entry below is about 110 bytes of JSON
        nid = f"{rng.getrandbits(64):016x}"
        src = [rng.choice(ids) for _ in range(rng.choice((1, 2, 2, 3)))]
        doc["nodes"][nid] = {"op": "Add", "dtype": "float32", "shape": [8, 8], "arg": None, "src": src, "tag": None,
                             "device": "CPU"}
        ids.append(nid)
    text = json.dumps(doc, separators=(",", ":"))
    path.write_text(text)
    return len(text)


@pytest.mark.parametrize(("node_share", "peak_x"), [(0.0, 3.5), (0.7, 4.0)], ids=["steps", "nodes"])
def test_a_loaded_trace_takes_at_most_three_times_its_size(tmp_path: Path, node_share: float, peak_x: float) -> None:
    """Mostly steps, or mostly nodes (a dict per node entry, and malloc keeping what the parse freed once the
    file's bytes were freed before it, held 4.0x and peaked at 4.8x)."""
    size = big_trace(tmp_path / "big.uopviz-trace.json", 20, node_share)
    r = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path / "big.uopviz-trace.json")], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    held, peak = (int(v) for v in r.stdout.split())
    assert held < 3 * size and peak < peak_x * size, \
        f"{size / 1e6:.1f} MB file: held {held / size:.2f}x, peak {peak / size:.2f}x"
