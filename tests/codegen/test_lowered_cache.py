"""Lowered kernels kept on disk (uopviz.lowered_cache): read back as the very kernel lowering gives, under a key that
changes with anything lowering reads (graph, opts, target, device, uopviz's code) and is the same in every process;
a damaged entry or a value without a canonical form is a miss, never an error or a wrong kernel."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from uopviz import Tensor, lowered_cache
from uopviz.codegen.opt import Opt
from uopviz.pipeline import calls_of, lower, schedule
from uopviz.realize import _key
from uopviz.runtime import device as devices
from uopviz.target import Cache, Kernel, Target
from uopviz.uop.ops import Ops, UOp


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path))
    return tmp_path


def cpu_target() -> Target:
    return devices.get("CPU").target


def a_kernel(f: Callable[[Tensor], Tensor] = lambda x: (x.sin() * 2.0).sum(1)) -> tuple[UOp, str, tuple[Opt, ...]]:
    """The (graph, device, default opts) of f's kernel on an 8 x 12 input."""
    x = Tensor(np.arange(96, dtype=np.float32).reshape(8, 12), device="CPU")
    return next(_key(c) for c in calls_of(schedule([f(x).uop])) if c.ast.op is not Ops.COPY)


def stored() -> tuple[str, Kernel]:
    ast, device, opts = a_kernel()
    target = devices.get(device).target
    name = lowered_cache.key(ast, device, opts, target)
    assert name is not None
    kernel = lower(ast, target, opts)
    lowered_cache.store(name, kernel, target)
    return name, kernel


def test_a_stored_kernel_is_read_back_as_lowering_gives_it() -> None:
    name, kernel = stored()
    back = lowered_cache.load(name, cpu_target())
    assert back is not None and back == kernel  # every compared field
    assert back.linear is kernel.linear and back.meta == kernel.meta


def test_an_entry_is_data_and_its_source_is_rendered_again(cache: Path) -> None:
    """No pickle and no stored source: machine code comes only from source rendered from the IR."""
    name, kernel = stored()
    doc = json.loads((cache / "lowered" / f"{name}.json").read_text())
    assert "source" not in doc and doc["linear"] and lowered_cache.load(name, cpu_target()).source == kernel.source


def test_the_key_changes_with_whatever_lowering_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    ast, device, opts = a_kernel()
    target = devices.get(device).target
    name = lowered_cache.key(ast, device, opts, target)
    other_ast = a_kernel(lambda x: x.exp2().sum(1))[0]
    others = [lowered_cache.key(other_ast, device, opts, target),
              lowered_cache.key(ast, device, (), target),
              lowered_cache.key(ast, "CPU:1", opts, target),
              lowered_cache.key(ast, device, opts, dataclasses.replace(target, l1=Cache(64, 32, 8))),
              lowered_cache.key(ast, device, opts, dataclasses.replace(target, vectors=frozenset({4})))]
    monkeypatch.setattr(lowered_cache, "_code_digest", lambda: "an edited pass")
    others.append(lowered_cache.key(ast, device, opts, target))
    assert None not in others and len({name, *others}) == len(others) + 1


def test_the_key_is_the_same_in_every_process() -> None:
    """Sets (of Ops, of lane counts) are ordered by hash, which differs between processes: the key must not."""
    code = ("import sys; sys.path.insert(0, 'tests/codegen'); import test_lowered_cache as t; "
            "from uopviz import lowered_cache; from uopviz.runtime import device as d; a, dev, o = t.a_kernel(); "
            "print(lowered_cache.key(a, dev, o, d.get(dev).target))")
    root = Path(__file__).parents[2]
    names = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                            env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip() for seed in ("1", "2", "3")}
    ast, device, opts = a_kernel()
    assert names == {lowered_cache.key(ast, device, opts, devices.get(device).target)}


def test_a_damaged_or_missing_entry_is_a_miss(cache: Path) -> None:
    assert lowered_cache.load("0" * 40, cpu_target()) is None  # no folder yet
    name, _ = stored()
    entry = cache / "lowered" / f"{name}.json"
    entry.write_bytes(entry.read_bytes()[:100])
    assert lowered_cache.load(name, cpu_target()) is None
    entry.write_bytes(b"not json")
    assert lowered_cache.load(name, cpu_target()) is None
    assert lowered_cache.load("1" * 40, cpu_target()) is None


def test_a_value_without_a_canonical_form_is_not_kept() -> None:
    """An object whose state the key cannot see (a function, slots) would let two kernels share one entry."""
    ast, device, opts = a_kernel()
    target = devices.get(device).target

    class Slotted:
        __slots__ = ("x",)

    for odd in (lambda: 0, Slotted()):
        assert lowered_cache.key(ast, device, opts, dataclasses.replace(target, l1=odd)) is None  # type: ignore[arg-type]


def test_nothing_is_kept_where_the_code_cannot_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """uopviz imported from an archive: no digest of its code, so no key another version could share."""
    monkeypatch.setattr(lowered_cache, "_code_digest", lambda: "")
    ast, device, opts = a_kernel()
    assert lowered_cache.key(ast, device, opts, devices.get(device).target) is None


def test_nothing_is_kept_where_the_cache_cannot_be_written(cache: Path) -> None:
    (cache / "lowered").write_text("a file where the folder would be")
    name, _ = stored()  # no error
    assert lowered_cache.load(name, cpu_target()) is None


def test_the_heuristics_opts_are_chosen_once_and_read_back_by_a_new_process(cache: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process (default_opts' memory empty) reads the opts any process chose back from disk, without running
    the heuristic; a damaged entry is chosen again."""
    from uopviz.search import policy
    monkeypatch.setattr(policy, "_chosen", {})
    ast, device, opts = a_kernel(lambda x: (x * 3.0).exp2().sum(0))
    assert opts and list(cache.glob("lowered/*.opts.json"))
    monkeypatch.setattr(policy, "_chosen", {})
    monkeypatch.setattr(policy, "heuristic_opts", lambda s: pytest.fail("the heuristic ran again"))
    assert policy.default_opts(ast, device) == opts
    for f in cache.glob("lowered/*.opts.json"):
        f.write_text("[{")
    monkeypatch.setattr(policy, "_chosen", {})
    monkeypatch.setattr(policy, "heuristic_opts", lambda s: list(opts))
    assert policy.default_opts(ast, device) == opts
