"""A trace file whose kernel's Range bound was edited to run past its buffers (4 elements, a loop of 40) cannot
crash the server: loading it is a 422 naming the buffer, the indices and the size; a trace that got in some other
way is refused by "time it" and by BEAM with the same KernelBoundsError, and the server answers after each."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from uopviz.backend.store import StoredTrace, TraceStore

import uopviz
import uopviz.trace.model
from uopviz import Tensor
from uopviz.search.beam import BeamError, beam
from uopviz.trace import TraceFormatError

BOUND = "40"  # the loop the edit makes: ten times the 4 elements of each buffer


def edited_trace(path: Path) -> tuple[Path, Path]:
    """A recorded a*2+1 of 4 elements on the CPU, saved as it is and with its kernel's Ranges bounded by 40."""
    with uopviz.trace() as tr:
        (Tensor(np.arange(4, dtype=np.float32), device="CPU") * 2 + 1).numpy()
    good = path / "good.uopviz-trace.json"
    tr.save(good)
    doc = json.loads(good.read_text())
    kernel = next(c for c in doc["contexts"] if c["kind"] == "kernel")
    graph = {kernel["passes"][0]["input"]}
    for _ in range(64):  # the nodes under the kernel's input
        graph |= {s for n in graph for s in doc["nodes"][n]["src"]}
    ranges = [n for n in graph if doc["nodes"][n]["op"] == "Range"]
    assert ranges
    doc["nodes"][BOUND] = {"op": "Const", "dtype": "index", "shape": [], "tag": None,
                           "arg": {"ConstArg": {"value": 40, "dtype": {"dtype": "index"}}}, "src": []}
    for n in ranges:
        doc["nodes"][n]["src"] = [BOUND]
    bad = path / "edited.uopviz-trace.json"
    bad.write_text(json.dumps(doc))
    return good, bad


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return edited_trace(tmp_path)


@pytest.fixture
def client(tmp_path: Path, missing_dist: Path, make_client: Callable[..., TestClient]) -> Iterator[TestClient]:
    with make_client(TraceStore("CPU"), db=tmp_path / "tuning.db", dist=missing_dist,
                     allow_dirs=[tmp_path.resolve()]) as c:
        yield c


def test_the_edited_trace_is_refused_at_load(files: tuple[Path, Path], client: TestClient) -> None:
    good, bad = files
    with pytest.raises(TraceFormatError, match=r"context 1: kernel \w+: .* of 4 elements may reach indices 0\.\.39"):
        uopviz.trace.load(bad)
    r = client.post("/api/traces", json={"path": str(bad)})
    assert r.status_code == 422 and "of 4 elements may reach indices 0..39, outside [0, 4)" in r.json()["detail"]
    assert client.post("/api/traces", json={"path": str(good)}).status_code == 201  # the server goes on
    assert client.get("/api/traces").status_code == 200


def _smuggled(bad: Path, client: TestClient, monkeypatch: pytest.MonkeyPatch) -> str:
    """The edited trace in the server's store as if the load had not checked it; its id."""
    with monkeypatch.context() as m:
        m.setattr(uopviz.trace.model, "check_kernels", lambda *a: None, raising=False)
        tr = uopviz.trace.load(bad)
    store: TraceStore = client.app.state.answers.store  # type: ignore[attr-defined]
    return store.add(StoredTrace("edited", "edited", "file", None, tr)).id


def test_time_it_and_beam_refuse_it_and_the_server_lives(files: tuple[Path, Path], client: TestClient,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    tid = _smuggled(files[1], client, monkeypatch)
    ci = next(i for i, c in enumerate(client.get(f"/api/traces/{tid}").json()["contexts"]) if c["kind"] == "kernel")
    r = client.post(f"/api/traces/{tid}/contexts/{ci}/time", json={})
    assert r.status_code == 422
    assert "KernelBoundsError" in r.json()["detail"] and "may reach indices 0..39, outside [0, 4)" in r.json()["detail"]
    r = client.post(f"/api/traces/{tid}/contexts/{ci}/beam", json={"width": 2, "max_rounds": 1})
    assert r.status_code == 422 and "may reach indices 0..39, outside [0, 4)" in r.json()["detail"]
    assert client.get("/api/traces").status_code == 200  # still answering
    assert client.post(f"/api/traces/{tid}/contexts/{ci}/time", json={}).status_code == 422  # and again


def test_beam_refuses_the_kernel_itself(files: tuple[Path, Path], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:
        m.setattr(uopviz.trace.model, "check_kernels", lambda *a: None, raising=False)
        tr = uopviz.trace.load(files[1])
    c = next(c for c in tr.contexts if c.kind == "kernel")
    ast = tr.uop(c.passes[0].input)
    with pytest.raises(BeamError, match=r"unoptimized kernel failed: KernelBoundsError: .* may reach indices 0\.\.39, "
                                        r"outside \[0, 4\)"):
        beam(ast, 2, "CPU", db=tmp_path / "tuning.db", max_rounds=1, progress=False, workers=1)
