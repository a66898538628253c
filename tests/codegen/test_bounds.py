"""A kernel that may read or write outside its buffers is refused before it runs, on every device, with a
KernelBoundsError naming the buffer, the indices it may reach and its size; nothing is written. Gated and clamped
accesses (padding, PADTO, symbolic sizes) are not refused."""

from __future__ import annotations

import numpy as np
import pytest

from uopviz import Tensor, compiler
from uopviz.codegen.opt import Opt, OptOps
from uopviz.realize import KernelArgumentError, run_kernel
from uopviz.runtime import buffer as buffers
from uopviz.runtime import device as devices
from uopviz.search.timing import Workbench
from uopviz.uop.bounds import KernelBoundsError, check_bounds
from uopviz.uop.ops import AxisType, Ops, UOp

DEVICES = ["CPU", "PYTHON", *devices.available(["CL", "CUDA"])]


def doubling(bound: int | UOp, size: int | UOp = 4) -> UOp:
    """out[i] = a[i] * 2 for i < bound, over Params of `size` elements."""
    out, a = UOp.param(0, (size,)), UOp.param(1, (size,))
    i = UOp.range(bound, 0)
    return UOp.sink(out.index(i).store(a.index(i).load() * 2.0).end(i))


@pytest.mark.parametrize("device", DEVICES)
def test_a_loop_past_its_buffers_is_refused_before_it_runs(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    rt = devices.get(device)
    real = rt.compile

    def compile_and_note(kernel: object) -> object:
        ran.append("compiled")
        return real(kernel)  # type: ignore[arg-type]
    monkeypatch.setattr(rt, "compile", compile_and_note)
    neighbour = buffers.from_numpy(np.full(64, 7, np.float32), device)  # memory beside the kernel's buffers
    with pytest.raises(KernelBoundsError, match=r"Param 1 \(float32\) of 4 elements may reach indices 0\.\.\d+, "
                                                r"outside \[0, 4\)") as e:
        run_kernel(doubling(8), [np.zeros(4, np.float32), np.ones(4, np.float32)], device)
    assert (e.value.size, e.value.lo) == (4, 0) and e.value.hi >= 4
    assert ran == []  # refused before a program was even built
    np.testing.assert_array_equal(buffers.to_numpy(neighbour), np.full(64, 7, np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_a_store_before_its_buffer_is_refused(device: str) -> None:
    out, a = UOp.param(0, (4,)), UOp.param(1, (4,))
    i = UOp.range(4, 0)
    k = UOp.sink(out.index(i + -1).store(a.index(i).load()).end(i))
    with pytest.raises(KernelBoundsError, match=r"a Store to Param 0 \(float32\) of 4 elements may reach indices "
                                                r"-1\.\."):
        run_kernel(k, [np.zeros(4, np.float32), np.ones(4, np.float32)], device)


def test_python_refuses_up_front_with_the_same_error() -> None:
    """The interpreter checked at run time (ExecutionError); now it is the same named error as every device's,
    before anything runs."""
    with pytest.raises(KernelBoundsError):
        compiler.compile_kernel(doubling(5), "PYTHON", [])


@pytest.mark.parametrize("device", DEVICES)
def test_in_bounds_gated_and_clamped_kernels_run(device: str) -> None:
    x = np.arange(6, dtype=np.float32)
    # PADTO pads the loop to 8 and gates the extra iterations; an upcast makes it a vector load under the gate
    pad = Opt(OptOps.PADTO, 0, 8)
    for opts in ([], [pad], [pad, Opt(OptOps.SPLIT, 0, (4, AxisType.UPCAST, False))]):
        _, prog = compiler.compile_kernel(doubling(6, 6), device, opts)
        bufs = [buffers.from_numpy(np.zeros(6, np.float32), device), buffers.from_numpy(x, device)]
        prog([buffers.handle(b) for b in bufs])
        np.testing.assert_array_equal(buffers.to_numpy(bufs[0]), x * 2)
    # a gated load whose index runs past the buffer where the gate is false
    out, a = UOp.param(0, (6,)), UOp.param(1, (4,))
    i = UOp.range(6, 0)
    k = UOp.sink(out.index(i).store(UOp(Ops.LOAD, (a.index(i), UOp.const(a.dtype, -1.0), i < 4))).end(i))
    got = run_kernel(k, [np.zeros(6, np.float32), np.arange(4, dtype=np.float32)], device)[0]
    np.testing.assert_array_equal(got, [0, 1, 2, 3, -1, -1])
    # an index clamped by a Where: a[i - 2] where i >= 2, else a[0]
    clamped = ((i < 2).where(0, i + -2))
    k = UOp.sink(out.index(i).store(a.index(clamped).load()).end(i))
    got = run_kernel(k, [np.zeros(6, np.float32), np.arange(4, dtype=np.float32)], device)[0]
    np.testing.assert_array_equal(got, [0, 0, 0, 1, 2, 3])


def test_a_gate_that_does_not_cover_the_overrun_is_refused() -> None:
    out, a = UOp.param(0, (6,)), UOp.param(1, (4,))
    i = UOp.range(6, 0)
    k = UOp.sink(out.index(i).store(UOp(Ops.LOAD, (a.index(i), UOp.const(a.dtype, 0.0), i < 5))).end(i))
    with pytest.raises(KernelBoundsError, match=r"indices 0\.\.4, outside \[0, 4\)"):
        compiler.compile_kernel(k, "CPU", [])


def test_an_index_that_wraps_its_32_bit_int_is_refused() -> None:
    """(i * 2**31) // 2**30 is 2i mathematically, inside the buffer; in 32-bit C the product wraps negative."""
    out, a = UOp.param(0, (4,)), UOp.param(1, (4,))
    i = UOp.range(2, 0)
    k = UOp.sink(out.index((i * 2**31) // 2**30).store(a.index(i).load()).end(i))
    with pytest.raises(KernelBoundsError, match="may wrap"):
        check_bounds(k, "wrapping")


def test_symbolic_sizes_count_at_their_largest_and_run_kernel_gives_the_room() -> None:
    n = UOp.variable("n", 1, 8)
    k = doubling(n, n)  # Params of n elements: buffers of 8, whatever n is
    got = run_kernel(k, [np.zeros(3, np.float32), np.arange(3, dtype=np.float32)], "CPU", vals={"n": 3})
    np.testing.assert_array_equal(got[0], [0, 2, 4])
    with pytest.raises(KernelBoundsError, match=r"of 8 elements may reach indices 0\.\.8,"):
        compiler.compile_kernel(doubling(n + 1, n), "CPU", [])
    with pytest.raises(KernelArgumentError):
        run_kernel(k, [np.zeros(2, np.float32), np.arange(3, dtype=np.float32)], "CPU", vals={"n": 3})


def test_timing_refuses_before_running() -> None:
    with pytest.raises(KernelBoundsError):
        Workbench(doubling(40), "CPU")


def test_a_range_that_never_runs_is_not_checked() -> None:
    out = UOp.param(0, (4,))
    j = UOp.range(0, 0)
    check_bounds(UOp.sink(out.index(j * 2 + 100).store(UOp.const(out.dtype, 1.0)).end(j)), "empty")


@pytest.mark.parametrize("device", DEVICES)
def test_a_padded_strided_conv_runs(device: str) -> None:
    """Its window's padding is clamped by a Where whose condition bounds a sum of ranges (0 <= 2*oy + ky - 1 < 5)
    that the index computes through other nodes: bounded term by term it read 6 before and after its input."""
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((2, 2, 5, 6)), rng.standard_normal((4, 2, 3, 2)), rng.standard_normal(4)
    got = Tensor(x, device=device).conv2d(Tensor(w, device=device), Tensor(b, device=device), stride=2,
                                         padding=1).numpy()
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.stack([np.stack([np.einsum("nchw,ochw->no", padded[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 2], w)
                               for j in range(4)], -1) for i in range(3)], -2) + b[:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("end", "refused"), [(6, False), (7, True)])
def test_a_where_over_a_sum_of_ranges_bounds_that_sum(end: int, refused: bool) -> None:
    """a[2i + j - 1] where 1 <= 2i + j < end, else a[0], over 5 elements: the gate's sum (through i*-2) bounds the
    index's (through i*2), and covers the overrun only where end <= 6."""
    out, a = UOp.param(0, (9,)), UOp.param(1, (5,))
    i, j = UOp.range(3, 0), UOp.range(3, 1)
    gate = (j >= i * -2 + 1) & (j < i * -2 + end)
    k = UOp.sink(out.index(i * 3 + j).store(a.index(gate.where(i * 2 + j + -1, 0)).load()).end(i, j))
    if refused:
        with pytest.raises(KernelBoundsError, match=r"indices 0\.\.5, outside \[0, 5\)"):
            check_bounds(k, "window")
    else:
        check_bounds(k, "window")


@pytest.mark.parametrize(("end", "refused"), [(3, False), (4, True)])
def test_a_gate_on_a_quotient_bounds_its_dividend(end: int, refused: bool) -> None:
    """a[2i] where (2i) // 3 < end, over 9 elements: the gate bounds 2i by 3·end − 1, so i by what that allows
    (cat's upcast kernels guard their vector loads so; found by the fuzzer), and covers the overrun only where
    end <= 3."""
    out, a = UOp.param(0, (9,)), UOp.param(1, (9,))
    i = UOp.range(9, 0)
    gate = (i * 2) // 3 < end
    k = UOp.sink(out.index(i).store(a.index(gate.where(i * 2, 0)).load()).end(i))
    if refused:
        with pytest.raises(KernelBoundsError, match=r"indices 0\.\.10, outside \[0, 9\)"):
            check_bounds(k, "halves")
    else:
        check_bounds(k, "halves")


def test_a_multiple_of_a_symbolic_square_comes_out_of_its_division() -> None:
    """a[((x % n) + ((x // n) % n) * n) // n] for x = k + j·n + i·n·n over 2 x n x n, a of 16 elements and n up to
    16: the index is (x // n) % n < n, whatever n is; i·(n·n) is a multiple of n too (a decoder's causal mask at a
    symbolic length was refused at 0..30)."""
    n = UOp.variable("n", 1, 16)
    out, a = UOp.param(0, (32,)), UOp.param(1, (16,))
    i, j, k = UOp.range(2, 0), UOp.range(n, 1), UOp.range(n, 2)
    x = k + j * n + i * (n * n)
    idx = ((x % n) + ((x // n) % n) * n) // n
    check_bounds(UOp.sink(out.index(i * 16 + j).store(a.index(idx).load()).end(i, j, k)), "mask")
    with pytest.raises(KernelBoundsError, match=r"indices 1\.\.16, outside \[0, 16\)"):
        check_bounds(UOp.sink(out.index(i * 16 + j).store(a.index(idx + 1).load()).end(i, j, k)), "mask")
