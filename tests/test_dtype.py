"""dtypes: sizes, ranges, promotion lattice, value normalization and the NumPy mapping."""

import math

import numpy as np
import pytest

from uopviz.dtype import DTypeError, dtypes, least_upper_dtype, sum_acc_dtype

INTS = [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64]
UINTS = [dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64]
FLOATS = [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]


def test_all_dtypes_present():
    names = {d.name for d in dtypes.all()}
    assert names == {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                     "bfloat16", "float32", "float64", "index", "float8_e4m3fn", "float8_e5m2"}
    assert dtypes.void.itemsize == 0 and dtypes.index.itemsize == 8


@pytest.mark.parametrize("d", INTS + UINTS + [dtypes.bool])
def test_integer_ranges_match_numpy(d):
    info = np.iinfo(d.name) if d != dtypes.bool else None
    assert d.itemsize == np.dtype(d.name).itemsize
    if info is not None:
        assert (d.min, d.max) == (info.min, info.max)


def test_float_ranges():
    assert dtypes.float32.min == -math.inf and dtypes.float16.finfo_max == float(np.finfo(np.float16).max)


@pytest.mark.parametrize("a, b, want", [
    (dtypes.int8, dtypes.uint8, dtypes.int16),
    (dtypes.bool, dtypes.int32, dtypes.int32),
    (dtypes.int32, dtypes.float16, dtypes.float16),
    (dtypes.int64, dtypes.float32, dtypes.float32),
    (dtypes.float16, dtypes.bfloat16, dtypes.float32),
    (dtypes.uint32, dtypes.int32, dtypes.int64),
    (dtypes.uint64, dtypes.int64, dtypes.float16),
    (dtypes.float32, dtypes.float64, dtypes.float64),
    (dtypes.index, dtypes.int32, dtypes.index),
])
def test_promotion(a, b, want):
    assert least_upper_dtype(a, b) == want == least_upper_dtype(b, a)


def test_promotion_is_an_upper_bound_for_every_pair():
    ds = list(dtypes.all())
    for a in ds:
        for b in ds:
            c = least_upper_dtype(a, b)
            assert least_upper_dtype(a, c) == c and least_upper_dtype(b, c) == c


def test_void_does_not_promote():
    with pytest.raises(DTypeError, match="void"):
        least_upper_dtype(dtypes.void, dtypes.int32)


def test_sum_accumulator():
    assert sum_acc_dtype(dtypes.int8) == dtypes.int32 and sum_acc_dtype(dtypes.uint8) == dtypes.uint32
    assert sum_acc_dtype(dtypes.float16) == dtypes.float32 and sum_acc_dtype(dtypes.float64) == dtypes.float64


@pytest.mark.parametrize("d, v, want", [
    (dtypes.int8, 200, -56), (dtypes.uint8, -1, 255), (dtypes.int32, 2.9, 2), (dtypes.int32, -2.9, -2),
    (dtypes.bool, 3, True), (dtypes.float16, 1e6, math.inf), (dtypes.float32, 0.1, float(np.float32(0.1))),
    (dtypes.bfloat16, 1.00390625, 1.0), (dtypes.float16, 0.1, float(np.float16(0.1))),
    (dtypes.float8_e4m3fn, 1e6, 448.0), (dtypes.float8_e4m3fn, -math.inf, -448.0), (dtypes.float8_e5m2, 1e6, math.inf),
    (dtypes.float8_e5m2, 0.3, 0.3125), (dtypes.float8_e4m3fn, 2.0**-10, 0.0),
])
def test_normalize(d, v, want):
    got = d.normalize(v)
    assert got == want and type(got) is type(want)


def test_numpy_mapping_round_trips():
    for d in dtypes.all():
        if d in (dtypes.bfloat16, dtypes.float8_e4m3fn, dtypes.float8_e5m2):
            with pytest.raises(DTypeError, match="no NumPy equivalent"):
                dtypes.to_numpy(d)
            continue
        npd = dtypes.to_numpy(d)
        assert dtypes.from_numpy(npd) == (dtypes.int64 if d == dtypes.index else d)
    with pytest.raises(DTypeError):
        dtypes.from_numpy(np.complex64)


def test_from_py_and_names():
    assert dtypes.from_py(True) == dtypes.bool and dtypes.from_py(3) == dtypes.int32
    assert dtypes.from_py([1, 2.0]) == dtypes.float32
    assert dtypes.from_name("half") == dtypes.float16 and repr(dtypes.float) == "dtypes.float32"
    with pytest.raises(DTypeError, match="unknown dtype 'floaty'"):
        dtypes.from_name("floaty")
