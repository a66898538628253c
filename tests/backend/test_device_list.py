"""What keeps a big trace's server small: the devices listed by a child process (backend/device_list.py), a trace's
outline written one context at a time (views.detail_json), a loaded trace's kernel check not keeping the UOps it
rebuilt. Each must answer exactly what the plain way answers."""

from __future__ import annotations

import json
import sys

import pytest
from test_api import gemm_context
from uopviz.backend import device_list, recording, views
from uopviz.backend.store import TraceStore

import uopviz
from uopviz.tensor import Tensor


def test_the_child_lists_what_this_process_lists() -> None:
    probe = device_list._Probe()
    probe.thread.join()
    assert probe.failure == "" and probe.answer == device_list.here()
    assert "CPU" in probe.answer


def test_a_child_that_fails_is_named_and_the_devices_listed_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    probe = device_list._Probe()
    probe.thread.join()
    assert probe.answer is None and "/nonexistent/python" in probe.failure
    monkeypatch.setattr(device_list, "_probe", probe)
    with pytest.warns(RuntimeWarning, match="listing the devices in a child process failed"):
        assert device_list.device_opts() == device_list.here()


@pytest.fixture(scope="module")
def profiled() -> TraceStore:
    """A trace of several kernels with a profile, so that an outline's profiles are written too."""
    s = TraceStore("CPU")
    with uopviz.trace() as tr, uopviz.profile():
        x = Tensor.arange(12, device="CPU").reshape(3, 4).float()
        ((x * 2).sum(axis=1) + x.max(axis=1)).realize()
    s.add_recorded(tr, "profiled")
    return s


def test_the_outline_written_a_context_at_a_time_is_the_outline(store: TraceStore, profiled: TraceStore) -> None:
    for st in [*store.all(), *profiled.all()]:
        assert json.loads(views.detail_json(st)) == views.detail(st).model_dump(mode="json"), st.id
    assert views.detail(profiled.all()[0]).profiles  # the profile's launches are in it


def test_checking_a_loaded_trace_keeps_no_rebuilt_uop(store: TraceStore) -> None:
    st = store.get("gemm")
    st.trace.uop(st.trace.contexts[gemm_context(store)].passes[0].input)
    assert st.trace._table._uops
    recording.check_sources(st.trace, "gemm")
    assert not st.trace._table._uops
