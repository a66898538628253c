"""A trace's record of one rewrite step (its own module so that the JSON parse can make it: format's object_hook)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)  # slots: a large trace holds hundreds of thousands of steps
class TraceStep:
    """One match: rule index, matched and replacement ids, the rule's time, and the node ids it stored first."""

    rule: int
    match: str
    replacement: str
    time_ns: int
    added: tuple[str, ...]

    @classmethod
    def from_mapping(cls, obj: Mapping[str, Any]) -> TraceStep | None:
        """The step of an object with a step's fields and a list `added`, else None, left to the format check to
        report (which checks the other fields' types)."""
        try:
            if type(added := obj["added"]) is list:
                return cls(obj["rule"], obj["match"], obj["replacement"], obj["time_ns"], tuple(added))
        except KeyError:
            pass
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "match": self.match, "replacement": self.replacement, "time_ns": self.time_ns,
                "added": list(self.added)}
