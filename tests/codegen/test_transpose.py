"""Transposing copies (codegen/transpose.py): vectors that gather a column of n rows, with the next columns of the
same rows in the same iteration, become vector loads along the rows and two-vector shuffles. Every case is checked
against NumPy; the source checks say which form the CPU got."""

from __future__ import annotations

import re

import numpy as np
import pytest

from uopviz import Tensor
from uopviz.codegen.opt import Opt, OptOps
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, schedule
from uopviz.pipeline import scheduler as scheduler_of
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.uop.ops import AxisType

U = AxisType.UPCAST


def panels(w: Tensor, n: int) -> Tensor:
    """w (rows, k) as panels of n rows, each k x n: what schedule/pack.py copies a weight's transpose into."""
    rows, k = w.shape
    return w.reshape(rows // n, n, k).permute(0, 2, 1)


def run(out: Tensor, device: str, opts: list[Opt] | None) -> tuple[np.ndarray, str, list[Opt]]:
    """out computed as one kernel with opts (None: the heuristic's): its value, its source ('' on PYTHON), the
    opts."""
    ((ast, bufs),) = kernels_of(schedule([out.uop]))
    if opts is None:
        opts = heuristic_opts(scheduler_of(ast, devices.target_of(device)))
    kernel, prog = compile_kernel(ast, device, opts)
    prog([buffers.handle(b) for b in bufs], wait=True)
    return buffers.to_numpy(bufs[0])[: out.uop.size].reshape(out.shape), kernel.source or "", opts


@pytest.mark.parametrize(("lanes", "cols"), [(16, 8), (16, 4), (16, 2), (16, 16), (8, 8), (8, 2), (4, 4), (4, 2)])
def test_columns_of_rows_are_vector_loads_and_shuffles(lanes: int, cols: int) -> None:
    # 3 panels of `lanes` rows, 48 columns (a float past a row's end would be the next row's: any read across
    # the wrong rows shows), read `cols` columns an iteration
    w = np.random.default_rng(lanes * cols).standard_normal((3 * lanes, 48)).astype(np.float32)
    opts = [Opt(OptOps.SPLIT, 2, (lanes, U, False)), Opt(OptOps.SPLIT, 1, (cols, U, False))]
    got, src, _ = run(panels(Tensor(w, device="CPU"), lanes), "CPU", opts)
    np.testing.assert_array_equal(got, w.reshape(3, lanes, 48).transpose(0, 2, 1))
    assert not re.search(r"float val\d+ = data1\[", src)  # no scalar load is left
    assert src.count(f"float{cols} val") == lanes and src.count("__builtin_shufflevector") > 0


@pytest.mark.parametrize(("rows", "k"), [(32, 12), (48, 6), (16, 7), (40, 24), (16, 1)])
def test_heuristic_transposes_odd_sizes(rows: int, k: int) -> None:
    # columns that 8 does not divide take 4 or 2 an iteration (12, 6), a prime count none (7); 40 rows pad to 48
    # for panels of 16 (a Pad's guarded loads keep their gathers); one column has no loop to upcast
    w = np.random.default_rng(rows + k).standard_normal((rows, k)).astype(np.float32)
    wide = -(-rows // 16) * 16
    x = Tensor(w, device="CPU")
    x = x.pad(((0, wide - rows), (0, 0))) if wide != rows else x
    got, src, opts = run(panels(x, 16), "CPU", None)
    want = np.pad(w, ((0, wide - rows), (0, 0))).reshape(wide // 16, 16, k).transpose(0, 2, 1)
    np.testing.assert_array_equal(got, want)
    upcasts = sorted(o.arg[0] for o in opts if o.op is OptOps.SPLIT and o.arg[1] is U)
    expect = {12: 4, 6: 2, 24: 8}.get(k) if wide == rows else None
    assert upcasts == sorted([16, expect] if expect else [16])
    assert ("__builtin_shufflevector" in src) == bool(expect)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_a_transpose_feeding_arithmetic(dtype: type) -> None:
    # the gathers feed an op before the store (x.T * 3 + 1): the shuffled columns feed it alike
    w = (np.arange(24 * 40) % 97).astype(dtype).reshape(24, 40)
    got, src, _ = run(Tensor(w, device="CPU").T * 3 + 1, "CPU", None)
    np.testing.assert_array_equal(got, w.T * 3 + 1)
    assert "__builtin_shufflevector" in src
