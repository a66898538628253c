"""bench/gpu.sh, the prepared run for a machine with an NVIDIA GPU, kept working where there is none: it says so,
lowers and compiles the benchmarks for sm_90 and exits 0; and a benchmark stage's code, run on the CPU at a small
size, checks and times what it would on the GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cuda.support import HAVE_GPU

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import gpu  # noqa: E402  (bench/ is no package)


@pytest.mark.skipif(HAVE_GPU, reason="this machine has a GPU: the script would run the whole plan")
def test_without_a_gpu_the_script_says_so_and_exits_0(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable}
    r = subprocess.run(["bash", str(ROOT / "bench" / "gpu.sh")], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert "no GPU here" in r.stdout and (tmp_path / "nvidia-smi.txt").exists()
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["gpu"] is None and set(results["lowered_for_sm_90"]) == set(gpu.BENCHES)
    if results["nvrtc"]:
        assert all(row["cubin_bytes"] > 0 for row in results["lowered_for_sm_90"].values())


@pytest.mark.parametrize("name", ["gemm_fp16", "layernorm"])
def test_a_benchmark_stage_checks_against_torch(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path))
    row = gpu.stage_bench(name, tmp_path, 0.02, device="CPU", n=48)
    assert row["kernels"] and all(k["beam_ms"] > 0 and k["heuristic_ms"] > 0 for k in row["kernels"])
    assert row["max_abs_err"] <= 1e-4 * max(1.0, row["max_abs_want"]) and row["ms"] > 0 and row["torch_ms"] > 0
    assert row["torch_result_dtype"] == "torch.float32"  # fp16 inputs: torch's gemm as it ran is in the row
