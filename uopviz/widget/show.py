"""`uopviz.show(x)`: a TraceView of a Tensor's realize, a recorded trace, a saved trace file, or a kernel."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from uopviz.backend.answers import Answers
from uopviz.backend.store import TraceStore
from uopviz.widget.export import VIEW_HEIGHT
from uopviz.widget.sources import stored
from uopviz.widget.view import TraceView


def show(x: Any, *, device: str | None = None, db: str | os.PathLike[str] | None = None,
         height: int = VIEW_HEIGHT) -> TraceView:
    """A widget of what `x` records, opened on its first kernel: x is a Tensor (realized now, under the recorder),
    a Trace, a saved trace file's path, or a kernel (lowered for `device`, else the device its Params name, else
    the default one). `db`: the tuning database its BEAM tab reads and writes (default: the default one).

    The widget is the cell's value when returned there; keep it (`w = uopviz.show(x)`) to read or set its view
    (`w.step`, `w.opts = [...]`) and display it with `w` or `IPython.display.display(w)`."""
    store = TraceStore(device)
    answers = Answers(store, Path(db).resolve() if db is not None else None)
    st = stored(x, store, device)
    return TraceView(answers, trace=st.id, height=height)
