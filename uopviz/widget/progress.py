"""A notebook line that a long operation rewrites in place (a first call's "compiling n of N kernels"): the notebook
face of uopviz.hooks.compile_display, imported only inside an IPython kernel."""

from __future__ import annotations

from IPython.display import display


class NotebookLine:
    """One line of a cell's output, replaced as it changes (IPython's display handle)."""

    def __init__(self) -> None:
        self.handle = display({"text/plain": ""}, raw=True, display_id=True)

    def update(self, text: str) -> None:
        self.handle.update({"text/plain": text}, raw=True)
