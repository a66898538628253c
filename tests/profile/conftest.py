"""The profile tests' `device` fixture (every runtime, CL skipped only where no OpenCL device starts) and fixed roofs:
measuring them is roofs.py's own test, so the others do not pay for it."""

from __future__ import annotations

import pytest
from devices_here import HAS_CL

from uopviz.profile import record
from uopviz.profile.roofs import Roofs

ROOFS = Roofs(100.0, 10.0)


@pytest.fixture(params=["CPU", "CL", "PYTHON"])
def device(request: pytest.FixtureRequest) -> str:
    if request.param == "CL" and not HAS_CL:
        pytest.skip("no OpenCL device here")
    return request.param


@pytest.fixture(autouse=True)
def fixed_roofs(monkeypatch: pytest.MonkeyPatch) -> Roofs:
    monkeypatch.setattr(record, "roofs_of", lambda device: ROOFS)
    return ROOFS
