"""A package that is also the call its users write: `with uopviz.trace() as tr:` and `with uopviz.profile() as p:`
call the package itself, so one name is both the block a user writes and the namespace of its API
(`uopviz.trace.load`, `uopviz.profile.Profile`, ...)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any


class _CallableModule(types.ModuleType):
    """A module whose call is its `__call_target__`."""

    __call_target__: Callable[[], Any]

    def __call__(self) -> Any:
        return self.__call_target__()


def make_callable(name: str, target: Callable[[], Any]) -> None:
    """Calling the (imported) module `name` calls `target`."""
    module = sys.modules[name]
    module.__class__ = _CallableModule
    module.__call_target__ = target  # type: ignore[attr-defined]  # set on the module, read by its class
