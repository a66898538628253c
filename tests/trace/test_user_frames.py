"""Where a trace says work came from: the user's code, never uopviz's (its server, installed from its own folder in
a checkout, included); the zoo's kernels as programs of their own; a notebook cell as IPython names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from uopviz.trace import recorder

REPO = Path(__file__).resolve().parents[2]


def test_the_server_is_uopviz_and_the_zoo_is_a_program() -> None:
    assert recorder.user_file(str(REPO / "backend" / "recording.py")) is None
    assert recorder.user_file(str(REPO / "uopviz" / "realize.py")) is None
    assert recorder.user_file(str(REPO / "kernels" / "zoo.py")) == str((REPO / "kernels" / "zoo.py").resolve())
    assert recorder.user_file(__file__) == str(Path(__file__).resolve())


def test_a_zoo_recording_points_at_no_server_code() -> None:
    from uopviz.backend import recording

    tr = recording.record_zoo("softmax", "PYTHON", small=True)
    assert not [f for c in tr.contexts for f in c.stack if "backend" in Path(f["file"]).parts]


def test_a_notebook_cell_is_named_as_ipython_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """IPython compiles each cell from a file of its own; the trace names the cell ("Cell In[3]"), as IPython's
    tracebacks do, with the line and code of the cell."""
    interactive = pytest.importorskip("IPython.core.interactiveshell")
    monkeypatch.chdir(tmp_path)
    shell = interactive.InteractiveShell.instance()
    try:
        for cell in ("import uopviz\nfrom uopviz import Tensor", "x = 2",
                     "with uopviz.trace() as tr:\n    (Tensor.ones(5, device='PYTHON') * x).realize()"):
            assert shell.run_cell(cell, store_history=True).success
        stack = shell.user_ns["tr"].contexts[0].stack
    finally:
        interactive.InteractiveShell.clear_instance()
    assert stack[-1] == {"file": "Cell In[3]", "line": 2, "function": "<module>",
                         "code": "(Tensor.ones(5, device='PYTHON') * x).realize()"}
