"""`compiles`, the kernels a test makes its device compile (the `device` fixture is the suite's, tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from uopviz.runtime import device as devices


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
