"""Issue 28, item 4: machine code only from the IR. A trace file's stored Source text is never compiled: a loaded
trace whose Source is not what the renderer makes of its Linear program is refused (a named error, 422), and the
machine-code route compiles the source rendered again from the Linear program, so an `#include` of a file (its
first line in the compiler's error) or of a FIFO (a compiler that never ends) planted in a trace reaches no
compiler."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from uopviz.backend import recording
from uopviz.backend.app import create_app
from uopviz.backend.recording import SourceMismatchError, record_zoo
from uopviz.backend.security import Access
from uopviz.backend.store import StoredTrace, TraceStore

from uopviz.cli import main
from uopviz.runtime import device as devices
from uopviz.runtime.cpu import CPURuntime
from uopviz.trace import Trace

TOKEN = "the-token-of-the-source-tests"
AUTH = {"Authorization": f"token {TOKEN}"}
SECRET = "the-first-line-of-a-file-no-answer-may-show"


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """fn's result, failing (not hanging) when it takes longer than `seconds`."""
    out: list[Any] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:  # handed to the test's thread
            failed.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds} s"
    if failed:
        raise failed[0]
    return out[0]


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    """The zoo max's trace (small, CPU) as its JSON document."""
    return json.loads(record_zoo("max", "CPU", small=True).to_json())


def source_node(doc: dict[str, Any]) -> str:
    """The id of the Source node of the (one) kernel's rendered Program."""
    (kernel,) = [c for c in doc["contexts"] if c["kind"] == "kernel"]
    render = next(p for p in kernel["passes"] if p["name"] == "render")
    return doc["nodes"][render["output"]]["src"][1]


def planted(doc: dict[str, Any], include: Path, to: Path) -> Path:
    """The trace with `#include "<include>"` put in front of its kernel's stored Source, saved at `to`."""
    d = json.loads(json.dumps(doc))
    node = d["nodes"][source_node(d)]
    node["arg"] = f'#include "{include}"\n' + node["arg"]
    to.write_text(json.dumps(d))
    return to


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    f = tmp_path / "secret.txt"
    f.write_text(SECRET + "\n")
    return f


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    f = tmp_path / "fifo"
    os.mkfifo(f)
    return f


def test_an_honest_trace_loads_and_its_source_is_what_the_linear_program_renders(doc: dict[str, Any],
                                                                                 tmp_path: Path) -> None:
    path = tmp_path / "max.uopviz-trace.json"
    path.write_text(json.dumps(doc))
    tr = TraceStore("CPU").load_file(path).trace
    (kernel,) = [c for c in tr.contexts if c.kind == "kernel"]
    made = recording.rendered(tr, kernel)
    assert made is not None and made.source == made.stored == doc["nodes"][source_node(doc)]["arg"]
    assert made.device == "CPU" and '#include "' not in made.source


@pytest.mark.parametrize("target", ["secret_file", "fifo"])
def test_a_planted_include_is_refused_at_load_naming_the_kernel(doc: dict[str, Any], tmp_path: Path, target: str,
                                                               request: pytest.FixtureRequest) -> None:
    path = planted(doc, request.getfixturevalue(target), tmp_path / "planted.uopviz-trace.json")
    with pytest.raises(SourceMismatchError, match="stored Source is not what the renderer makes") as e:
        within(60, lambda: TraceStore("CPU").load_file(path))
    assert SECRET not in str(e.value)


@pytest.mark.parametrize("target", ["secret_file", "fifo"])
def test_post_traces_answers_422_and_shows_nothing_of_the_file(doc: dict[str, Any], tmp_path: Path, target: str,
                                                               request: pytest.FixtureRequest) -> None:
    path = planted(doc, request.getfixturevalue(target), tmp_path / "planted.uopviz-trace.json")
    app = create_app(TraceStore("CPU"), dist=tmp_path / "no-dist", access=Access(TOKEN, 8000, loopback=True),
                     allow_dirs=[tmp_path.resolve()])
    c = TestClient(app, base_url="http://127.0.0.1:8000", headers=AUTH)
    r = within(60, lambda: c.post("/api/traces", json={"path": str(path)}))
    assert r.status_code == 422 and "stored Source" in r.json()["detail"], r.text
    assert SECRET not in r.text
    assert c.get("/api/traces").json() == []


def test_serve_refuses_the_planted_trace_with_exit_status_2(doc: dict[str, Any], secret_file: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = planted(doc, secret_file, tmp_path / "planted.uopviz-trace.json")
    assert main(["serve", "--no-browser", str(path)]) == 2
    err = capsys.readouterr().err
    assert "stored Source is not what the renderer makes" in err and SECRET not in err


@pytest.mark.parametrize("target", ["secret_file", "fifo"])
def test_machine_code_compiles_the_rendered_source_never_the_stored_text(
        doc: dict[str, Any], tmp_path: Path, target: str, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a trace that reached the store past the load check (here: added as it is) has its kernel compiled
    from its Linear program: the planted text reaches no compiler, and no answer holds the file's line."""
    tampered = json.loads(planted(doc, request.getfixturevalue(target), tmp_path / "t.json").read_text())
    store = TraceStore("CPU")
    st = store.add(StoredTrace("planted", "planted", "file", None, Trace.from_dict(tampered)))
    compiled: list[str] = []
    library = CPURuntime.library

    def spy(self: CPURuntime, source: str, name: str) -> Path:
        compiled.append(source)
        return library(self, source, name)

    monkeypatch.setattr(CPURuntime, "library", spy)
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path / "cache"))
    app = create_app(store, dist=tmp_path / "no-dist", access=Access(TOKEN, 8000, loopback=True))
    c = TestClient(app, base_url="http://127.0.0.1:8000", headers=AUTH)
    ci = next(i for i, ctx in enumerate(st.trace.contexts) if ctx.kind == "kernel")
    r = within(120, lambda: c.get(f"/api/traces/planted/contexts/{ci}/machine-code"))
    assert r.status_code == 200, r.text
    assert r.json()["device"] == "CPU" and SECRET not in r.text
    (source,) = compiled
    assert '#include "' not in source and source == doc["nodes"][source_node(doc)]["arg"]


def test_a_kernel_name_that_is_a_path_is_never_a_file_name(doc: dict[str, Any], tmp_path: Path) -> None:
    """The machine code is named by the Program's name, which the renderer checks is an identifier, not by the
    context's name (free text in a trace file)."""
    d = json.loads(json.dumps(doc))
    (kernel,) = [c for c in d["contexts"] if c["kind"] == "kernel"]
    kernel["name"] = "../../outside"
    tr = Trace.from_dict(d)
    made = recording.rendered(tr, next(c for c in tr.contexts if c.kind == "kernel"))
    assert made is not None and made.name.isidentifier()


def test_a_kernel_whose_device_is_not_here_loads_unchecked_and_is_never_compiled(doc: dict[str, Any],
                                                                                tmp_path: Path) -> None:
    """Another machine's trace (a device this one lacks) still opens; its kernel can be neither rendered nor
    compiled here, so no machine code is made from it."""
    d = json.loads(json.dumps(doc).replace('"device": "CPU"', '"device": "NOSUCH"'))
    path = tmp_path / "elsewhere.uopviz-trace.json"
    path.write_text(json.dumps(d))
    store = TraceStore("CPU")
    st = store.load_file(path)
    with pytest.raises(devices.DeviceError):
        devices.get("NOSUCH")
    app = create_app(store, dist=tmp_path / "no-dist", access=Access(TOKEN, 8000, loopback=True))
    c = TestClient(app, base_url="http://127.0.0.1:8000", headers=AUTH)
    ci = next(i for i, ctx in enumerate(st.trace.contexts) if ctx.kind == "kernel")
    r = c.get(f"/api/traces/{st.id}/contexts/{ci}/machine-code")
    assert r.status_code == 422 and "NOSUCH" in r.json()["detail"], r.text

