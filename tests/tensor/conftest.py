"""The `device` fixture of the Tensor tests: every runtime, CL skipped only where no OpenCL device starts."""

from __future__ import annotations

import pytest
from tensor_testing import DEVICES, HAS_CL


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    if request.param == "CL" and not HAS_CL:
        pytest.skip("no OpenCL device here")
    return request.param
