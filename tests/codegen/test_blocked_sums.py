"""Blocked sums (uopviz/codegen/blocked_sums.py): a long float sum accumulates in blocks, so its error grows with
about √N roundings, not N; every other reduction keeps one accumulator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from devices_here import needs_cl

import uopviz
from uopviz import Tensor
from uopviz.codegen.blocked_sums import BLOCKED_MIN, _block

N = 1 << 16
WANT = float(np.float32(0.1)) * N


@pytest.mark.parametrize("device", ["CPU", pytest.param("CL", marks=needs_cl)])
def test_a_long_sum_of_a_repeated_value_keeps_its_digits(device: str) -> None:
    """65536 float32 0.1s along rows and along columns: one accumulator a lane was 3.8e-5 off along rows and
    6.2e-4 along columns (every rounding the same way); in blocks 9e-7 and 3.5e-6."""
    rows = Tensor(np.full((8, N), 0.1, np.float32), device=device).sum(1).numpy()
    cols = Tensor(np.full((N, 8), 0.1, np.float32), device=device).sum(0).numpy()
    assert np.abs(rows - WANT).max() / WANT < 4e-6
    assert np.abs(cols - WANT).max() / WANT < 1e-5


def _blocked_kernels(build: object) -> list[bool]:
    """For each kernel the build realizes: whether its blocked sums pass changed it (and nested a Reduce)."""
    with uopviz.trace() as tr:
        build()  # type: ignore[operator]
    out = []
    for c in (c for c in tr.contexts if c.kind == "kernel"):
        p = next(p for p in c.passes if p.name == "blocked sums")
        out.append(p.output is not None and p.output != p.input)
    return out


def test_only_long_float_sums_are_blocked() -> None:
    """A row's loop of 4096 iterations (16 lanes a row) is blocked; a max, an int sum and a short sum are not."""
    x = np.ones((4, N), np.float32)
    assert _blocked_kernels(lambda: Tensor(x).sum(1).realize()) == [True]
    assert _blocked_kernels(lambda: Tensor(x).max(1).realize()) == [False]
    assert _blocked_kernels(lambda: Tensor(x.astype(np.int32)).sum(1, dtype="int32").realize()) == [False]
    assert _blocked_kernels(lambda: Tensor(x[:, :1024]).sum(1).realize()) == [False]


def test_the_block_is_the_divisor_nearest_the_root_or_the_root_with_a_tail() -> None:
    assert _block(4096) == 64 and _block(8192) in (64, 128) and _block(6 * 1024) in (64, 96)
    assert _block(4099) == 64 and _block(2 * 4099) == 90  # no divisor near the root: the root, a tail loop left
    for n in range(BLOCKED_MIN, BLOCKED_MIN + 300):
        b = _block(n)
        assert math.sqrt(n) / 2 <= b <= 2 * math.sqrt(n)


@pytest.mark.parametrize("device", ["CPU", "PYTHON", pytest.param("CL", marks=needs_cl)])
def test_a_prime_length_sum_keeps_its_digits(device: str) -> None:
    """1000003 terms (a prime): blocks of 1000 and a tail of 3, 1.5e-8 to 5.9e-7 off over six seeds (one
    accumulator was 1.2e-5 off); a ragged sum in float64 checks that the tail's terms are each added once."""
    n = 1000003 if device != "PYTHON" else 4099
    x = np.random.default_rng(5).standard_normal(n).astype(np.float32) + 0.5
    exact = x.astype(np.float64).sum()
    got = float(Tensor(x, device=device).sum().numpy())
    assert abs(got - exact) / abs(exact) < 2e-6
    ragged = np.random.default_rng(6).standard_normal((3, 4099)).astype(np.float64)
    np.testing.assert_allclose(Tensor(ragged, device=device).sum(1).numpy(), ragged.sum(1), rtol=1e-12)


def test_a_blocked_sum_is_still_the_sum() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 6 * BLOCKED_MIN)).astype(np.float64)
    got = Tensor(x, device="PYTHON").sum(1).numpy()
    np.testing.assert_allclose(got, x.sum(1), rtol=1e-12)
