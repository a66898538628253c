"""Recording of graph rewrites: `with uopviz.trace() as tr:` captures every named pass and every match.

The module is itself callable (`uopviz.trace()` is `record()`), so the one name serves both as the context
manager users write and as the namespace of the trace API (`uopviz.trace.load`, `uopviz.trace.Trace`, ...).
"""

from __future__ import annotations

from uopviz.callable_module import make_callable
from uopviz.trace.format import FORMAT, VERSION, TraceFormatError
from uopviz.trace.ids import node_id, node_ids
from uopviz.trace.model import Trace, TraceContext, TracePass, TraceRule, TraceStep, load, record
from uopviz.trace.recorder import Recorder, context, stage

make_callable(__name__, record)  # `with uopviz.trace() as tr:` records every graph_rewrite in the block into `tr`

__all__ = ["FORMAT", "VERSION", "Recorder", "Trace", "TraceContext", "TraceFormatError", "TracePass", "TraceRule",
           "TraceStep", "context", "load", "node_id", "node_ids", "record", "stage"]
