"""The differential fuzzer in CI (issue 27): a seeded budget of random programs and their gradients on every device
against torch; the fuzzer's own machinery (a deterministic JSON generator whose op mix covers every op, a shrinker
that finds the minimal program of an injected mismatch); and the shrunk programs it found, as regressions.

Programs that fail because of a known, unfixed bug are strict xfails with the bug as the reason, so that the fix
turns them into passes (and strict makes the list shrink). `python bench/fuzz.py` runs the fuzzer long.
"""

from __future__ import annotations

import json
from typing import Any

import fuzzing
import pytest
import torch
from devices_here import needs_cl
from tensor_testing import on_devices

BUDGET = {"CPU": (0, 40), "CL": (1000, 12), "PYTHON": (2000, 60)}
"""(first seed, programs) each device runs in CI, about 80 s of CPU time in all: CL compiles slowly, PYTHON's
programs are small."""

KNOWN: dict[tuple[str, int], str] = {}
"""(device, seed) of budget programs that fail because of a known bug: the reason names it."""


def _params() -> list[Any]:
    out = []
    for dev, (first, n) in BUDGET.items():
        marks = [needs_cl] if dev == "CL" else []
        out.append(pytest.param(dev, [s for s in range(first, first + n) if (dev, s) not in KNOWN], marks=marks,
                                id=dev))
        for (d, s), why in KNOWN.items():
            if d == dev:
                out.append(pytest.param(dev, [s], marks=[*marks, pytest.mark.xfail(strict=True, reason=why)],
                                        id=f"{dev}-seed{s}"))
    return out


@pytest.mark.parametrize(("device", "seeds"), _params())
def test_budget(device: str, seeds: list[int]) -> None:
    failed = {}
    for seed in seeds:
        _, found = fuzzing.find(seed, device, **fuzzing.DEVICE_SIZES[device])
        if found:
            failed[seed] = found
    assert not failed, "shrink with: python bench/fuzz.py --device {} --seed S --programs 1\n{}".format(
        device, "\n".join(f"seed {s}: {m}" for s, m in failed.items()))


# ---------------------------------------------------------------- the machinery
def test_generator_is_deterministic_json() -> None:
    for seed in range(5):
        prog = fuzzing.generate(seed)
        assert json.loads(json.dumps(prog)) == prog == fuzzing.generate(seed)
        assert fuzzing.valid(prog)


def test_op_mix_covers_every_op_and_dtype() -> None:
    progs = [fuzzing.generate(seed) for seed in range(300)]
    assert {op["op"] for p in progs for op in p["ops"]} == set(fuzzing.OPS)
    assert {p["dtype"] for p in progs} == {*fuzzing.FLOATS, *fuzzing.INTS}


def test_shrinker_finds_the_minimal_program() -> None:
    """A fake mismatch (a matmul with an input dim of 3 or more) shrinks to one matmul of 1s and 3s, ones-filled."""
    def fails(p: fuzzing.Program) -> bool:
        return any(op["op"] == "matmul" for op in p["ops"]) and \
            any(d >= 3 for v in p["inputs"].values() for d in v["shape"])
    prog = next(p for p in map(fuzzing.generate, range(100)) if fails(p) and len(p["ops"]) >= 8)
    small = fuzzing.shrink(prog, fails)
    assert [op["op"] for op in small["ops"]] == ["matmul"]
    dims = [d for v in small["inputs"].values() for d in v["shape"]]
    assert max(dims) == 3 and set(dims) <= {1, 3}
    assert {v["fill"] for v in small["inputs"].values()} == {"ones"}


def test_injected_bug_is_found_and_shrunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong sigmoid planted in the uopviz interpreter: the fuzzer reports the mismatch and shrinks the program
    to the sigmoid alone."""
    monkeypatch.setitem(fuzzing.OPS, "sigmoid", fuzzing.OpDef(lambda a: a.sigmoid() * 1.01, torch.sigmoid))
    prog = next(p for p in (fuzzing.generate(s, **fuzzing.DEVICE_SIZES["PYTHON"]) for s in range(200))
                if len(p["ops"]) >= 5 and p["dtype"] == "float32" and any(op["op"] == "sigmoid" for op in p["ops"]))
    assert fuzzing.mismatches(prog, "PYTHON")
    small = fuzzing.shrink(prog, lambda p: bool(fuzzing.mismatches(p, "PYTHON")))
    assert [op["op"] for op in small["ops"]] == ["sigmoid"]
    assert all(d == 1 for v in small["inputs"].values() for d in v["shape"])


# ---------------------------------------------------------------- regressions found by the fuzzer
def _inp(shape: tuple[int, ...], seed: int) -> dict[str, Any]:
    return {"shape": list(shape), "fill": "normal", "seed": seed}


def _op(name: str, args: list[str], out: list[str], **p: Any) -> dict[str, Any]:
    return {"op": name, "args": args, "out": out, "p": p}


ATTENTION = {
    "seed": 0, "dtype": "float32",
    "inputs": {"x": _inp((4, 8), 1), "g": _inp((8,), 2), "Wa": _inp((8, 24), 3), "Wp": _inp((8, 8), 4),
               "w": _inp((4, 8), 5)},
    "ops": [_op("mul", ["x", "g"], ["h"]), _op("matmul", ["h", "Wa"], ["qkv"]),
            _op("chunk", ["qkv"], ["q", "k", "v"], chunks=3, dim=1), _op("permute", ["k"], ["kt"], order=[1, 0]),
            _op("matmul", ["q", "kt"], ["s"]), _op("softmax", ["s"], ["p"], axis=-1),
            _op("matmul", ["p", "v"], ["o"]), _op("matmul", ["o", "Wp"], ["y"]), _op("mul", ["y", "w"], ["out"])],
    "outputs": ["out"]}
"""Issue 27's small case: ((x·g)@Wa split in q, k, v; softmax(q·kᵀ)·v·Wp·w; its gradients were wrong (the memory
plan let a buffer's new tenant overwrite it before an earlier reader ran)."""


@pytest.mark.parametrize("device", on_devices())
def test_attention_gradients(device: str) -> None:
    assert fuzzing.mismatches(ATTENTION, device) == []


MOD_AT_THE_EXTREMES = {
    "seed": 126, "dtype": "int64",
    "inputs": {"a": {"shape": [1, 1, 1], "fill": "ones", "seed": 0},
               "d": {"shape": [3, 1, 1], "fill": "divisor", "seed": 123890329}},
    "ops": [_op("mod", ["a", "d"], ["r"])], "outputs": ["r"]}
"""1 % [7, -2, 2^63 − 1] gave [1, -1, -1] at commit 8b0f7f4: an int Mod whose divisor is near the dtype's edge
overflowed (also -1 % INT_MIN gave INT_MAX, 5 % INT_MAX a negative number); found by the fuzzer (CPU, seed 126)."""


@pytest.mark.parametrize("device", on_devices())
def test_mod_at_the_extremes(device: str) -> None:
    assert fuzzing.mismatches(MOD_AT_THE_EXTREMES, device) == []


PADDED_VIEWS = {
    "slice after reshape": {
        "seed": 10008, "dtype": "float32", "inputs": {"a": {"shape": [7, 1, 12], "fill": "ones", "seed": 0}},
        "ops": [_op("reshape", ["a"], ["r"], shape=[1, 42, 2]),
                _op("slice", ["r"], ["s"], slices=[[0, 1, 1], [28, -2, 1], [None, None, None]])],
        "outputs": ["r", "s"]},
    "cat then flatten": {
        "seed": 10039, "dtype": "int32", "inputs": {"a": {"shape": [3, 3], "fill": "ones", "seed": 0}},
        "ops": [_op("cat", ["a", "a"], ["c"], dim=-2), _op("flatten", ["c"], ["f"], start=0, end=1)],
        "outputs": ["f"]}}
"""Kernels the bounds check (uop/bounds.py) refused though they stay inside their buffers: an upcast view whose
lanes' loads are guarded (found by the fuzzer on CPU, seeds 10008 and 10039, the day the check landed)."""


@pytest.mark.parametrize("device", on_devices())
@pytest.mark.parametrize("name", list(PADDED_VIEWS))
def test_guarded_views_are_not_refused(name: str, device: str) -> None:
    assert fuzzing.mismatches(PADDED_VIEWS[name], device) == []


MANY_AXES = {
    "seed": 10717, "dtype": "float32",
    "inputs": {"a": {"shape": [2, 6], "fill": "normal", "seed": 276493179},
               "w": {"shape": [6, 1], "fill": "ones", "seed": 0}},
    "ops": [_op("layernorm", ["a"], ["n"]), _op("matmul", ["n", "w"], ["m"]), _op("tanh", ["m"], ["t"])],
    "outputs": ["t"]}
"""A kernel of so many axes that its name passed 64 characters, which the renderer refuses as a C identifier
(RenderError on CPU; found by the fuzzer, CPU seed 10717): a long name keeps its head and ends in a digest."""


@pytest.mark.parametrize("device", on_devices())
def test_a_kernel_of_many_axes_gets_a_name(device: str) -> None:
    assert fuzzing.mismatches(MANY_AXES, device) == []


HALF_LAYERNORM = {
    "seed": 11069, "dtype": "float16", "inputs": {"a": {"shape": [8, 4], "fill": "normal", "seed": 56849460}},
    "ops": [_op("permute", ["a"], ["at"], order=[1, 0]), _op("matmul", ["a", "at"], ["m"]), _op("exp", ["m"], ["e"]),
            _op("layernorm", ["e"], ["n"])],
    "outputs": ["n"]}
"""layernorm of float16 values in the hundreds: its squares overflowed float16, so rows came out -0 or NaN; torch
normalizes a half input in float32 (found by the fuzzer, CPU seeds 10310 and 11069)."""


@pytest.mark.parametrize("device", on_devices())
def test_half_layernorm_of_large_values(device: str) -> None:
    assert fuzzing.mismatches(HALF_LAYERNORM, device) == []


FLIP_AFTER_RESHAPE = {
    "seed": 12973, "dtype": "float32", "inputs": {"a": {"shape": [3, 16], "fill": "ones", "seed": 0}},
    "ops": [_op("reshape", ["a"], ["r"], shape=[2, 24]), _op("flip", ["r"], ["f"], axes=[0])],
    "outputs": ["f"]}
"""The bounds check refused a flip after a reshape (indices -16..63 of 48): its index is -32·r + 16·(x // 16) + x % 16
with 8·r inside x, in bounds only as one sum (found by the fuzzer, CPU seed 12973)."""


@pytest.mark.parametrize("device", on_devices())
def test_flip_after_reshape(device: str) -> None:
    assert fuzzing.mismatches(FLIP_AFTER_RESHAPE, device) == []


MIN_OF_A_VARIANCE = {
    "seed": 50038, "dtype": "float32", "inputs": {"a": {"shape": [3, 2], "fill": "normal", "seed": 928901762}},
    "ops": [_op("var", ["a"], ["v"], axes=[0, 1], keepdim=True, correction=0),
            _op("min", ["v"], ["m"], axes=[0, -1], keepdim=False)],
    "outputs": ["m"]}
"""The max's gradient goes to the elements equal to the max, but the kernel comparing them summed the variance again
in another order than the one that took the max: no element was equal and the gradient was 0 (fuzzer, CPU seed
50038). A 1-wide max over a matmul's scores gave NaN the same way (seed 51054)."""

MAX_OVER_SCORES = {
    "seed": 51054, "dtype": "float32",
    "inputs": {"a": {"shape": [16], "fill": "ones", "seed": 962555934},
               "w": {"shape": [16, 1], "fill": "ones", "seed": 810465326},
               "p": {"shape": [1, 1], "fill": "ones", "seed": 1052764876},
               "q": {"shape": [1, 1], "fill": "normal", "seed": 48363558}},
    "ops": [_op("reshape", ["a"], ["r"], shape=[16, 1, 1]), _op("cat", ["r", "r"], ["c"], dim=-3),
            _op("mul", ["c", "a"], ["x"]), _op("matmul", ["x", "w"], ["s"]), _op("mul_c", ["s"], ["t"], c=0.57735),
            _op("gt", ["p", "q"], ["k"]), _op("where_c", ["k", "t"], ["z"], v=-10000.0),
            _op("max", ["z"], ["y"], axes=[-1], keepdim=False)],
    "outputs": ["y"]}


@pytest.mark.parametrize("device", on_devices())
@pytest.mark.parametrize("prog", [MIN_OF_A_VARIANCE, MAX_OVER_SCORES], ids=["min_of_var", "max_over_scores"])
def test_max_gradient_of_a_recomputed_sum(device: str, prog: fuzzing.Program) -> None:
    assert fuzzing.mismatches(prog, device) == []


FLIP_OF_AN_EXPANDED_RESHAPE = {
    "seed": 82405, "dtype": "float32", "inputs": {"a": {"shape": [3, 12, 5], "fill": "ones", "seed": 53821451}},
    "ops": [_op("reshape", ["a"], ["r"], shape=[2, 30, 3]), _op("expand", ["r"], ["e"], shape=[12, 2, 30, 3]),
            _op("flip", ["e"], ["f"], axes=[-4, 1])],
    "outputs": ["f"]}
"""The bounds check refused a flip after a reshape whose offset f the index takes apart as 60·(f // 60) +
5·((f // 5) % 12) + f % 5, each part from a differently rewritten sum: 0..179 of 180, but -60..239 by intervals. Such
an index over few points is now computed at every point (fuzzer, CPU seed 82405)."""


@pytest.mark.parametrize("device", on_devices())
def test_flip_of_an_expanded_reshape(device: str) -> None:
    assert fuzzing.mismatches(FLIP_OF_AN_EXPANDED_RESHAPE, device) == []


ONE_WIDE_SOFTMAX = {
    "seed": 82618, "dtype": "float32",
    "inputs": {"a": {"shape": [], "fill": "ones", "seed": 0},
               "p": {"shape": [1, 1, 1], "fill": "ones", "seed": 0},
               "q": {"shape": [1, 1, 1], "fill": "ties", "seed": 1052764876},
               "w": {"shape": [2, 1], "fill": "normal", "seed": 5}},
    "ops": [_op("eq", ["p", "q"], ["k"]), _op("where_c", ["k", "a"], ["m"], v=-10000.0),
            _op("pad", ["m"], ["x"], pads=[[0, 0], [2, 2], [0, 1]], value=1.5), _op("matmul", ["x", "w"], ["s"]),
            _op("mul_c", ["s"], ["t"], c=0.35355339059327373), _op("softmax", ["t"], ["y"], axis=-1)],
    "outputs": ["y"]}
"""A 1-wide softmax has gradient 0, but its kernel computed x·c − max(x·c) as one fused multiply-add while the max's
kernel rounded x·c first: not 0 at the max, and the gradient 3e-4 (fuzzer, CPU seed 82618)."""


@pytest.mark.parametrize("device", on_devices())
def test_one_wide_softmax_of_scaled_scores(device: str) -> None:
    assert fuzzing.mismatches(ONE_WIDE_SOFTMAX, device) == []
