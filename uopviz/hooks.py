"""Hooks through which a higher layer serves a lower one that must not import it: the lower layer calls the hook
when it is set, the higher one sets it (as `uop.pattern.set_recorder` does for the trace recorder).

- `beam_display(kernel_name, device, width)`: a live display of one kernel's BEAM search in a notebook, or None
  where there is none (not in an IPython kernel); it has `hook(event)` (a search's progress events) and
  `end(result, status, detail)` (result None when the search was interrupted or failed). The package face
  (uopviz/__init__.py) sets it to the notebook widget's, imported on first use.
- `compile_display()`: a line in a notebook's output showing how a long compile goes (uopviz.parallel's
  "compiling n of N kernels"), with `update(text)`; None where there is none (not in an IPython kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

beam_display: Callable[[str, str, int], Any] | None = None
compile_display: Callable[[], Any] | None = None
