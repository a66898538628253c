"""A shard kernel tuned end to end: BEAM of one shard's kernel serves the other shard from the tuning database, and
the API's opt-apply endpoint lowers a shard kernel of a recorded sharded program again with opts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient
from uopviz.backend.app import create_app
from uopviz.backend.security import Access
from uopviz.backend.store import TraceStore

import uopviz
from uopviz import Tensor
from uopviz.codegen.opt import Opt, OptOps
from uopviz.compiler import compile_kernel
from uopviz.pipeline import kernels_of, schedule
from uopviz.search.beam import beam
from uopviz.search.db import TuningDB
from uopviz.search.keys import cache_key
from uopviz.tensor.multi import lower
from uopviz.uop.ops import AxisType

D = ("CPU:0", "CPU:1")


def _program() -> Tensor:
    return Tensor(np.arange(48, dtype=np.float32).reshape(8, 6)).shard(D, 0).exp2().sum(1)


def test_beam_of_one_shard_kernel_serves_the_other(tmp_path: Path) -> None:
    (shards,) = lower([_program().uop])
    asts = {bufs[0].arg.device: ast for ast, bufs in kernels_of(schedule(list(shards))) if bufs[0].arg.device in D}
    assert len(asts) == 2 and asts["CPU:0"] is not asts["CPU:1"]  # one kernel per shard (the input's slicing aside)
    with TuningDB(tmp_path / "tuning.db") as db:
        first = beam(asts["CPU:0"], 2, "CPU:0", db=db, max_rounds=1, workers=1, progress=False)
        second = beam(asts["CPU:1"], 2, "CPU:1", db=db, max_rounds=1, workers=1, progress=False)
        assert not first.from_db and first.compiled > 0
        assert second.from_db and second.compiled == 0 and second.opts == first.opts
        assert len(db.results()) == 1 and len(db.searches()) == 1
        # the key realize() looks up (uopviz.search.policy) is the one BEAM stored, for either shard
        assert db.lookup(cache_key(asts["CPU:1"], "CPU:1")) == db.lookup(cache_key(asts["CPU:0"], "CPU:0"))
        assert db.lookup(cache_key(asts["CPU:1"], "CPU:1")) is not None


def test_opt_panel_applies_opts_to_a_shard_kernel(tmp_path: Path) -> None:
    with uopviz.trace() as tr:
        _program().numpy()
    store = TraceStore("CPU")
    st = store.add_recorded(tr, "sharded")
    access = Access("t", 8000, loopback=True)
    c = TestClient(create_app(store, access=access, dist=tmp_path / "dist"), base_url="http://127.0.0.1:8000",
                   headers={"Authorization": "token t"})
    contexts = c.get(f"/api/traces/{st.id}").json()["contexts"]
    kernels = [(i, c.get(f"/api/traces/{st.id}/contexts/{i}/kernel").json()) for i, x in enumerate(contexts)
               if x["kind"] == "kernel"]
    ci, view = next((i, k) for i, k in kernels if k["device"] == "CPU:1")
    (shards,) = lower([_program().uop])
    ast = next(a for a, bufs in kernels_of(schedule(list(shards))) if bufs[0].arg.device == "CPU:1")
    assert contexts[ci]["kernel_hash"] == cache_key(ast, "CPU:1").kernel_hash  # the UI finds its searches
    split = {"op": "SPLIT", "axis": 1, "arg": [3, "UNROLL", False]}
    r = c.post(f"/api/traces/{st.id}/contexts/{ci}/opts", json={"opts": [split]})
    assert r.status_code == 200, r.json()
    want = compile_kernel(ast, "CPU:1", [Opt(OptOps.SPLIT, 1, (3, AxisType.UNROLL, False))])[0]
    got = r.json()
    assert (got["name"], got["source"], got["opts"]) == (want.name, want.source, [split])
    assert got["source"] != view["source"]
