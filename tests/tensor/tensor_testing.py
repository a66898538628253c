"""Helpers of the Tensor tests: the device list, size limits for the PYTHON interpreter, NumPy comparison."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from devices_here import needs_cl

DEVICES = ["CPU", "CL", "PYTHON"]


def on_devices(xfail: dict[str, str] | None = None) -> list[Any]:
    """`device` parameters for a test that fails on some devices because of a known lowering/runtime bug:
    those are strict xfails (the reason is the reproducer), CL is skipped where no OpenCL device starts."""
    out = []
    for d in DEVICES:
        marks = [pytest.mark.xfail(strict=True, reason=xfail[d])] if xfail and d in xfail else []
        if d == "CL":
            marks.append(needs_cl)
        out.append(pytest.param(d, marks=marks))
    return out


def skip_big(device: str, *sizes: int) -> None:
    """The PYTHON runtime interprets every instruction: keep it to small tensors."""
    if device == "PYTHON" and max(sizes, default=0) >= 100:
        pytest.skip("PYTHON is an interpreter; large sizes run on the compiled devices only")


def check(t: Any, ref: Any, rtol: float = 1e-6, atol: float = 0.0) -> None:
    """t's values equal NumPy's ref: exactly for ints and bools, to a tolerance for floats (NaN equals NaN)."""
    got, want = t.numpy(), np.asarray(ref)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if got.dtype.kind in "biu" and want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)


