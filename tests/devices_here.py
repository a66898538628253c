"""Which optional devices this machine has, asked once for the whole suite. Tests of a missing device skip; CI
sets UOPVIZ_REQUIRE_CL (tests/conftest.py), so there a missing OpenCL driver fails the run instead of quietly
skipping every CL test."""

from __future__ import annotations

import pytest

from uopviz.runtime import device as devices

HAS_CL = bool(devices.available(["CL"]))
needs_cl = pytest.mark.skipif(not HAS_CL, reason="no OpenCL device here")
