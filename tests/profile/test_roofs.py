"""A device's roofs are measured once (kernels uopviz builds, under an open trace and profile without showing in
them) and kept in the cache directory; a kept entry of another uopviz version or another device (its runtime's
description), or a damaged file, is measured again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz.profile import roofs
from uopviz.runtime import device as devices


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(roofs, "MEASURE_S", 0.01)
    return tmp_path / "roofs.json"


def test_measured_once_then_kept(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with uopviz.trace() as tr, uopviz.profile() as p:
        found = roofs.roofs_of("PYTHON")
    assert found.gflops > 0 and found.gbs > 0
    assert tr.contexts == [] and p.runs == []  # its kernels are not the user's
    assert json.loads(cache.read_text())["PYTHON"]["gflops"] == found.gflops

    def measure(device: str) -> roofs.Roofs:
        raise AssertionError("measured again")
    monkeypatch.setattr(roofs, "measure", measure)
    assert roofs.roofs_of("PYTHON") == found


DAMAGED = json.dumps({"PYTHON": {"gflops": "x", "gbs": 1, "uopviz": uopviz.__version__,
                                 "describe": devices.get("PYTHON").describe()}})


ELSEWHERE = json.dumps({"PYTHON": {"gflops": 1, "gbs": 1, "uopviz": uopviz.__version__,
                                   "describe": {"device": "PYTHON", "name": "another machine"}}})


@pytest.mark.parametrize("text", ["{not json", '{"PYTHON": {"gflops": 1, "gbs": 1, "uopviz": "0.0.1"}}', DAMAGED,
                                  ELSEWHERE, "[]"])
def test_stale_or_damaged_is_measured_again(cache: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    cache.write_text(text)
    monkeypatch.setattr(roofs, "measure", lambda device: roofs.Roofs(2.0, 3.0))
    assert roofs.roofs_of("PYTHON") == roofs.Roofs(2.0, 3.0)
    assert json.loads(cache.read_text())["PYTHON"]["gbs"] == 3.0


def test_a_profile_looks_its_roofs_up(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from uopviz.profile import record
    monkeypatch.setattr(record, "roofs_of", roofs.roofs_of)  # undo the suite's fixed roofs
    monkeypatch.setattr(roofs, "measure", lambda device: roofs.Roofs(5.0, 7.0))
    with uopviz.profile() as p:
        (Tensor(np.ones(5, np.float32), device="PYTHON") * 2).realize()
    assert p.roofs == {"PYTHON": roofs.Roofs(5.0, 7.0)}
