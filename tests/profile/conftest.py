"""The profile tests' fixed roofs: measuring them is roofs.py's own test, so the others do not pay for it (the
`device` fixture is the suite's, tests/conftest.py)."""

from __future__ import annotations

import pytest

from uopviz.profile import record
from uopviz.profile.roofs import Roofs

ROOFS = Roofs(100.0, 10.0)


@pytest.fixture(autouse=True)
def fixed_roofs(monkeypatch: pytest.MonkeyPatch) -> Roofs:
    monkeypatch.setattr(record, "roofs_of", lambda device: ROOFS)
    return ROOFS
