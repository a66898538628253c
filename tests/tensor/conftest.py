"""The `device` fixture of the Tensor tests (every runtime, CL skipped only where no OpenCL device starts) and
`compiles`, the kernels a test makes its device compile."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from devices_here import HAS_CL
from tensor_testing import DEVICES

from uopviz.runtime import device as devices


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> str:
    if request.param == "CL" and not HAS_CL:
        pytest.skip("no OpenCL device here")
    return request.param


@pytest.fixture
def compiles(device: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the kernels the device's runtime compiles while the test runs."""
    rt = devices.get(device)
    seen: list[str] = []
    real = rt.compile

    def counted(kernel: Any) -> Any:
        seen.append(kernel.name)
        return real(kernel)

    monkeypatch.setattr(rt, "compile", counted)
    yield seen
