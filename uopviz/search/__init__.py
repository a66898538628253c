"""Autotuning: BEAM search over kernel opts and the SQLite tuning database that remembers every measurement.

`uopviz.search.beam(ast, width, device)` is the search (the function shadows its module's name here: import the
module's other names with `from uopviz.search.beam import ...`); `uopviz.search.db` is the database.
"""

from uopviz.search.beam import BeamResult, beam

__all__ = ["BeamResult", "beam"]
