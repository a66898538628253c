"""uopviz in a notebook: `show(x)` opens the web UI as a widget (TraceView) over the widget's comm; `to_html`
writes the same view as one self-contained, read-only HTML file; `BeamView` shows a BEAM search live.

The top layer, beside the command line: it imports the server's answer code (backend.answers), anywidget and
ipywidgets, none of which `import uopviz` loads (uopviz.show, Trace.to_html, Tensor.viz import this on use).
"""

from uopviz.widget.beam import BeamView, search_tensor
from uopviz.widget.export import to_html
from uopviz.widget.show import show
from uopviz.widget.view import TraceView

__all__ = ["BeamView", "TraceView", "search_tensor", "show", "to_html"]
