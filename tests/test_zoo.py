"""Every zoo kernel on every runtime, at its small sizes, against its NumPy reference; and the kernel counts
that show fusion is real."""

from __future__ import annotations

import numpy as np
import pytest
from uopviz.kernels import ZOO, get

from uopviz.pipeline import kernels_of, schedule
from uopviz.runtime import device as devices

DEVICES = ["CPU", "PYTHON", *devices.available(["CL"])]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_kernel_matches_numpy(name: str, device: str) -> None:
    z = ZOO[name]
    out, arrays = z.build(z.sizes(small=True), device)
    np.testing.assert_allclose(out.numpy(), z.reference(*arrays), rtol=z.rtol, atol=z.rtol)


@pytest.mark.parametrize(("name", "most"), [("elementwise", 1), ("softmax", 1), ("gemm", 1), ("sum", 1),
                                            ("layernorm", 1), ("conv2d", 2), ("attention", 3)])
def test_fusion_kernel_counts(name: str, most: int) -> None:
    z = get(name)
    out, _ = z.build(z.sizes(small=True))
    assert 1 <= len(kernels_of(schedule([out.uop]))) <= most


def test_sizes_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown: Q"):
        get("gemm").sizes(Q=3)
    with pytest.raises(KeyError, match="the zoo has"):
        get("nope")


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_computes_in_its_inputs_dtypes(name: str) -> None:
    """No zoo program is silently promoted (a NumPy float64 scalar would turn a float32 program into float64)."""
    z = ZOO[name]
    out, _ = z.build(z.sizes(small=True))
    allowed = {np.dtype(i.dtype).name for i in z.inputs} | {"float32", "bool", "int32", "index", "void"}
    used = {u.dtype.name for ast, _ in kernels_of(schedule([out.uop])) for u in ast.toposort()}
    assert used <= allowed, f"{name} computes in {sorted(used - allowed)}"
