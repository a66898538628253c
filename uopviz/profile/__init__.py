"""`with uopviz.profile() as p:` profiles every kernel launch in the block: its time, share of the step, GFLOP/s and
GB/s, its place under the device's measured roofs, grouped by the line of the user's code that ran it (record.py).

The package is itself callable (`uopviz.profile()` is `record.profile()`), as `uopviz.trace` is: one name for the
block users write and for the profile's API (`uopviz.profile.Profile`, `uopviz.profile.roofs_of`, ...).
"""

from __future__ import annotations

from uopviz.callable_module import make_callable
from uopviz.profile.record import Profile, Run, profile
from uopviz.profile.roofs import Roofs, roofs_of
from uopviz.profile.work import Work, kernel_work

make_callable(__name__, profile)  # `with uopviz.profile() as p:` profiles every kernel launch in the block into `p`

__all__ = ["Profile", "Roofs", "Run", "Work", "kernel_work", "profile", "roofs_of"]
