"""uopviz: a compiler for the UOp dialect whose every rewrite can be seen, changed and tuned.

`import uopviz` stays light: it loads the IR and the trace recorder, not NumPy, FastAPI or any runtime.
"""

import os
import sys
from typing import TypedDict, Unpack

from uopviz import hooks, trace
from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import AxisType, GroupOp, Ops, SpecError, UOp
from uopviz.uop.variable import Variable
from uopviz.version import __version__

__all__ = ["AxisType", "DType", "GroupOp", "Ops", "SpecError", "Tensor", "UOp", "Variable", "__version__", "dtypes",
           "function", "jit", "profile", "show", "trace"]


class _ShowOptions(TypedDict, total=False):
    """The keywords uopviz.widget.show takes, named here so that `show` passes them on checked."""

    device: str | None
    db: str | os.PathLike[str] | None
    height: int


def show(x: object, **kwargs: Unpack[_ShowOptions]) -> object:
    """The uopviz widget of a Tensor (its realize recorded), a Trace, a saved trace file, or a kernel: see
    uopviz.widget.show (imported here on use: it brings anywidget)."""
    from uopviz.widget import show as show_widget
    return show_widget(x, **kwargs)


def _beam_display(kernel_name: str, device: str, width: int) -> object | None:
    """The notebook's live display of a BEAM search (hooks.beam_display), when running in an IPython kernel; the
    widget (and anywidget) is imported only then."""
    import sys
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    from uopviz.widget.beam import kernel_display
    return kernel_display(kernel_name, device, width)


hooks.beam_display = _beam_display


def _compile_display() -> object | None:
    """A notebook line for a long compile's progress (hooks.compile_display), when running in an IPython kernel."""
    import sys
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or getattr(shell, "kernel", None) is None:
        return None
    from uopviz.widget.progress import NotebookLine
    return NotebookLine()


hooks.compile_display = _compile_display


def __getattr__(name: str) -> object:
    """`uopviz.Tensor`, `uopviz.function`, `uopviz.jit` and `uopviz.profile` are imported on first use: they bring
    NumPy, which `import uopviz` must not load."""
    if name in ("Tensor", "function", "jit"):
        import uopviz.tensor
        return getattr(uopviz.tensor, name)
    if name == "profile":  # the package, callable: `with uopviz.profile() as p:`
        import uopviz.profile
        return sys.modules["uopviz.profile"]
    raise AttributeError(f"module 'uopviz' has no attribute {name!r}")
