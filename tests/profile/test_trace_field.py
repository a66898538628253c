"""A profile that ends while a trace records is filed in it (`Trace.profiles`), saved with it as the optional
`profiles` key and read back as it was; a trace without one reads as before; a malformed profile document is refused
with the place and the problem named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import uopviz
from uopviz import Tensor
from uopviz.profile import Profile
from uopviz.trace import TraceFormatError


def _traced_profile(tmp_path: Path) -> tuple[Profile, Path]:
    a = Tensor(np.arange(20, dtype=np.float32).reshape(4, 5))
    with uopviz.trace() as tr, uopviz.profile() as p:
        (a.exp() + 1).sum(1).realize()
    path = tmp_path / "t.uopviz-trace.json"
    tr.save(path)
    assert tr.profiles == [p.to_dict()]
    return p, path


def test_saved_and_loaded(tmp_path: Path) -> None:
    p, path = _traced_profile(tmp_path)
    loaded = uopviz.trace.load(path)
    assert loaded.profiles == [json.loads(json.dumps(p.to_dict()))]
    assert Profile.from_dict(loaded.profiles[0]).runs == p.runs
    assert loaded.to_dict()["profiles"] == loaded.profiles


def test_a_trace_without_profiles_has_none(tmp_path: Path) -> None:
    with uopviz.trace() as tr:
        (Tensor([1.0, 2.0]) * 3).realize()
    assert tr.profiles == [] and "profiles" not in tr.to_dict()
    assert uopviz.trace.Trace.from_json(tr.to_json()).profiles == []


def test_a_profile_outside_a_trace_is_filed_nowhere() -> None:
    with uopviz.profile():
        (Tensor([1.0, 2.0]) + 1).realize()
    with uopviz.trace() as tr:
        pass
    assert tr.profiles == []


@pytest.mark.parametrize(("path", "value", "message"), [
    (("wall_s",), -1.0, "profiles[0].wall_s: expected a finite number >= 0"),
    (("roofs", "CPU", "gbs"), 0, "profiles[0].roofs['CPU'].gbs: a roof must be > 0"),
    (("launches", 0, "time_s"), "1", "profiles[0].launches[0].time_s: expected integer or number, got string"),
    (("launches", 0, "flops"), 1.5, "profiles[0].launches[0].flops: expected integer, got number"),
    (("launches", 0, "device_s"), float("inf"), "profiles[0].launches[0].device_s: expected a finite number >= 0"),
    (("launches", 0, "device"), "CL9", "profiles[0].launches[0].device: 'CL9' has no roofs"),
    (("launches", 0, "line"), {"file": "x.py"}, "profiles[0].launches[0].line: missing field 'line'"),
    (("launches",), {}, "profiles[0].launches: expected array, got object"),
])
def test_malformed_profiles_are_refused(tmp_path: Path, path: tuple[Any, ...], value: Any, message: str) -> None:
    _, saved = _traced_profile(tmp_path)
    doc = json.loads(saved.read_text())
    where = doc["profiles"][0]
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = value
    with pytest.raises(TraceFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        uopviz.trace.Trace.from_dict(doc)
