"""uopviz: a compiler for the UOp dialect whose every rewrite can be seen, changed and tuned.

`import uopviz` stays light: it loads the IR and the trace recorder, not NumPy, FastAPI or any runtime.
"""

from uopviz import trace
from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import AxisType, GroupOp, Ops, SpecError, UOp
from uopviz.version import __version__

__all__ = ["AxisType", "DType", "GroupOp", "Ops", "SpecError", "Tensor", "UOp", "__version__", "dtypes", "show",
           "trace"]


def show(x: object, **kwargs: object) -> object:
    """The uopviz widget of a Tensor (its realize recorded), a Trace, a saved trace file, or a kernel: see
    uopviz.widget.show (imported here on use: it brings anywidget)."""
    from uopviz.widget import show as show_widget
    return show_widget(x, **kwargs)  # type: ignore[arg-type]


def __getattr__(name: str) -> object:
    """`uopviz.Tensor` is imported on first use: it brings NumPy, which `import uopviz` must not load."""
    if name == "Tensor":
        from uopviz.tensor import Tensor
        return Tensor
    raise AttributeError(f"module 'uopviz' has no attribute {name!r}")
