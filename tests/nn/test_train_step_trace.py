"""The digits example's recorded training step is a trace like any other: it opens as `uopviz serve` opens files,
its kernels (forward and backward) are there, and BEAM tunes the slowest of them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from uopviz.backend import views
from uopviz.backend.store import TraceStore

from uopviz.compiler import compile_kernel
from uopviz.search import beam
from uopviz.search.policy import default_opts
from uopviz.search.timing import Workbench

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_digits.py"


def test_a_training_step_opens_and_its_slowest_kernel_is_tuned(tmp_path: Path) -> None:
    pytest.importorskip("sklearn", reason="the digits data set comes with scikit-learn")
    trace = tmp_path / "step.uopviz-trace.json"
    run = subprocess.run([sys.executable, str(EXAMPLE), "--model", "mlp", "--epochs", "1", "--trace", str(trace)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "UOPVIZ_CACHE_DIR": str(tmp_path / "cache")})
    assert run.returncode == 0, run.stderr
    st = TraceStore("CPU").load_file(trace)  # what `uopviz serve step.uopviz-trace.json` does
    kernels = [i for i, c in enumerate(st.trace.contexts) if c.kind == "kernel"]
    assert len(kernels) > 6  # the forward, the backward and the optimizer's kernels
    timed = []
    for ci in kernels:
        ast, device = views.kernel_input(st, ci)
        kernel, prog = compile_kernel(ast, device, default_opts(ast, device))
        bench = Workbench(ast, device)
        timed.append((bench.measure(bench.bind(kernel, prog), None).median_s or 0.0, ast))
    _, slowest = max(timed, key=lambda t: t[0])
    # a database of its own: tuned opts in the run's would change what realize compiles for the tests after it
    r = beam(slowest, 1, "CPU", db=tmp_path / "tuning.db", max_rounds=1, progress=False)
    assert r.search_id is not None and r.candidates > 2 and not r.from_db
