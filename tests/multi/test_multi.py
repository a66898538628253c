"""Multi-device tensors: indexed devices, SPEC's seven collectives (values, shapes, axis) for n in 2, 3, 4 on CPU
devices, OpenCL devices and a mix, uneven shards, a data-parallel matmul and a sharded softmax against NumPy, the
shard axis through SPEC's rules, the errors, the trace's shard pass and the tuning key of a shard kernel."""

from __future__ import annotations

import numpy as np
import pytest
from devices_here import needs_cl
from uopviz.backend import display

import uopviz
from uopviz import Tensor
from uopviz.runtime import device as devices
from uopviz.runtime.device import UnknownDeviceError
from uopviz.tensor.multi import ShardError, bounds
from uopviz.trace.nodes import NodeTable
from uopviz.uop.ops import Ops, UOp

CPUS = {n: tuple(f"CPU:{i}" for i in range(n)) for n in (2, 3, 4)}
# one OpenCL device here (PoCL): its two one-core sub-devices, the device as CL:0 and as CL are separate contexts
CLS = {2: ("CL:0.0", "CL:0.1"), 3: ("CL", "CL:0.0", "CL:0.1"), 4: ("CL", "CL:0", "CL:0.0", "CL:0.1")}
MIXED = {2: ("CPU:0", "CL:0.1"), 3: ("CPU:0", "CL:0", "CPU:1"), 4: ("CPU:0", "CL:0.0", "CPU:1", "CL:0.1")}
SETS = [pytest.param(CPUS[n], id=f"cpu{n}") for n in (2, 3, 4)] + [
    pytest.param(d[n], id=f"{name}{n}", marks=needs_cl)
    for name, d in (("cl", CLS), ("mixed", MIXED)) for n in (2, 3, 4)] + [
    pytest.param(("PYTHON:0", "PYTHON:1"), id="python2")]
RNG = np.random.default_rng(18)
S = 12  # each device's elements: divisible by 2, 3 and 4 (SPEC's even case; test_shard_ops has uneven ones)


@pytest.mark.parametrize("D", SETS)
def test_collectives(D: tuple[str, ...]) -> None:
    n = len(D)
    x = RNG.standard_normal(n * S).astype(np.float32)
    parts = x.reshape(n, S)
    T = Tensor(x).scatter_to(D).realize()  # (n*s,) on D, axis 0
    assert (T.shape, T.device, T.axis) == ((n * S,), D, 0)
    g = T.gather_to()
    assert (g.shape, g.device, g.axis) == ((n * S,), D[0], None)
    np.testing.assert_array_equal(g.numpy(), x)
    r = T.reduce_to()
    assert (r.shape, r.device, r.axis) == ((S,), D[0], None)
    np.testing.assert_allclose(r.numpy(), parts.sum(0), rtol=1e-5, atol=1e-6)
    ag = T.allgather()
    assert (ag.shape, ag.device, ag.axis) == ((n * S,), D, None)
    np.testing.assert_array_equal(ag.numpy(), x)
    rs = T.reduce_scatter()
    assert (rs.shape, rs.device, rs.axis) == ((S,), D, 0)
    np.testing.assert_allclose(rs.numpy(), parts.sum(0), rtol=1e-5, atol=1e-6)
    ar = T.allreduce()
    assert (ar.shape, ar.device, ar.axis) == ((S,), D, None)
    np.testing.assert_allclose(ar.numpy(), parts.sum(0), rtol=1e-5, atol=1e-6)
    y = RNG.standard_normal(S + 1).astype(np.float32)  # 13 elements: n never divides them
    b = Tensor(y).broadcast(D)
    assert (b.shape, b.device, b.axis) == ((S + 1,), D, None)
    np.testing.assert_array_equal((b * 2).numpy(), y * 2)
    sc = Tensor(y).scatter_to(D).realize()
    assert (sc.shape, sc.axis) == ((S + 1,), 0)
    np.testing.assert_array_equal(sc.numpy(), y)
    np.testing.assert_allclose((sc + 1).max().numpy(), (y + 1).max())
    np.testing.assert_allclose(sc.sum().numpy(), y.sum(), rtol=1e-5)


def test_every_device_holds_its_own_shard() -> None:
    """The shards are separate buffers on separate runtimes, sliced as a Copy splits (ceil(size/n) each)."""
    from uopviz.runtime import buffer
    from uopviz.tensor.multi import shards_of
    y = np.arange(7, dtype=np.int32)
    t = Tensor(y).scatter_to(CPUS[3]).realize()
    shards = shards_of(t.uop)
    assert [s.src[0].arg.device for s in shards] == list(CPUS[3])
    assert [buffer.to_numpy(s.src[0])[:s.shape[0]].tolist() for s in shards] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len({id(devices.get(d)) for d in CPUS[3]}) == 3
    assert bounds(7, 3) == [(0, 3), (3, 6), (6, 7)] and bounds(2, 3) == [(0, 1), (1, 2), (2, 2)]


@pytest.mark.parametrize("n", [2, 4])
def test_data_parallel_matmul_and_sharded_softmax(n: int) -> None:
    D = CPUS[n]
    a = RNG.standard_normal((10, 7)).astype(np.float32)  # batch 10: uneven over 4 devices
    w = RNG.standard_normal((7, 5)).astype(np.float32)
    out = Tensor(a).shard(D, 0) @ Tensor(w).shard(D)  # batch split, weights replicated
    assert (out.shape, out.axis) == ((10, 5), 0)
    np.testing.assert_allclose(out.numpy(), a @ w, rtol=1e-4, atol=1e-5)
    z = RNG.standard_normal((6, 8)).astype(np.float32)
    e = np.exp(z - z.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    for axis in (0, 1):  # rows apart; each row split over the devices (its max and sum are allreduces)
        sm = Tensor(z).shard(D, axis).softmax(-1)
        assert sm.axis == axis
        np.testing.assert_allclose(sm.numpy(), want, rtol=1e-4, atol=1e-6)


def test_shard_axis_follows_spec() -> None:
    D = CPUS[2]
    t = Tensor(np.zeros((4, 6), np.float32)).shard(D, 1)
    assert t.axis == 1 and t.permute(1, 0).axis == 0 and t.reshape(4, 2, 3).axis == 1
    assert t.sum(0).axis == 0 and t.sum(1).axis is None  # a reduction over the shard axis is replicated
    assert (t + 1).axis == 1 and t.exp().axis == 1
    assert UOp(Ops.REPLICATED, (t.uop,), (1,)).axis is None and t.uop.copy_to("CPU:0").axis is None
    assert t.uop.copy_to(CPUS[2]).axis == 0
    np.testing.assert_allclose(t.reshape(4, 2, 3).permute(2, 1, 0).numpy(), np.zeros((3, 2, 4)))
    # 3 rows of 8 cannot keep the two shards' boundary: the axis holding it, the shards moved when run
    flat = np.arange(24, dtype=np.float32)
    odd = Tensor(flat).shard(D, 0).reshape(3, 8)
    assert odd.axis == 0
    np.testing.assert_array_equal(odd.numpy(), flat.reshape(3, 8))


def test_to_devices_and_back() -> None:
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    t = Tensor(x, device="CPU:1").to(CPUS[3])  # a tuple: split along axis 0
    assert t.axis == 0 and t.device == CPUS[3]
    back = t.to("CPU:2")
    assert back.device == "CPU:2"
    np.testing.assert_array_equal(back.numpy(), x)
    re = t.shard(CPUS[2], 1)  # reshard straight from one multi-device to another
    assert (re.device, re.axis) == (CPUS[2], 1)
    np.testing.assert_array_equal(re.numpy(), x)


def test_errors() -> None:
    D = CPUS[2]
    with pytest.raises(ShardError, match="takes a 1-d tensor"):
        Tensor(np.zeros((6, 2), np.float32)).scatter_to(D).reduce_scatter()
    with pytest.raises(ShardError, match="sharded along axis 0"):
        Tensor(np.zeros((2, 6), np.float32)).shard(D, 1).reduce_to()
    with pytest.raises(ShardError, match="needs a tensor on several devices"):
        Tensor([1.0]).allgather()
    with pytest.raises(ShardError, match="0-d tensor"):
        Tensor(1.0).scatter_to(D)
    with pytest.raises(UnknownDeviceError, match="two or more distinct"):
        Tensor([1.0]).shard(("CPU:0", "cpu:0"))
    with pytest.raises(UnknownDeviceError, match="CUDA takes no index"):
        devices.canonical("CUDA:1")
    with pytest.raises(UnknownDeviceError, match="index after ':' must be a number"):
        devices.canonical("CPU:x")
    with pytest.raises(UnknownDeviceError, match="CPU:0, CPU:1"):
        devices.get("CPU:0.1")
    with pytest.raises(UnknownDeviceError, match="known devices"):
        devices.canonical("TPU:0")


@needs_cl
def test_unknown_opencl_devices() -> None:
    with pytest.raises(UnknownDeviceError, match="OpenCL devices here: CL:0"):
        devices.get("CL:9")
    with pytest.raises(UnknownDeviceError, match="splits into"):
        devices.get("CL:0.99")


def test_indexed_cpus_are_one_thread_and_tune_as_one() -> None:
    """CPU:i runs kernels on one thread (the shards are the parallelism); a shard kernel's tuning key does not
    depend on which shard's device it is."""
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.search.keys import cache_key
    assert devices.get("CPU:0").target.threads == 1 and devices.get("CPU").target.threads >= 1
    kernels = {}
    for d in ("CPU:0", "CPU:1"):
        x = Tensor(np.ones(9, np.float32), device=d)
        ((ast, _),) = kernels_of(schedule([(x * 3).uop]))
        kernels[d] = ast
    assert kernels["CPU:0"] is not kernels["CPU:1"]
    assert cache_key(kernels["CPU:0"], "CPU:0") == cache_key(kernels["CPU:1"], "CPU:1")
    assert cache_key(kernels["CPU:0"], "CPU:0").device == "CPU:*"


def test_trace_shows_the_shard_pass_with_devices() -> None:
    with uopviz.trace() as tr:
        t = Tensor(np.arange(8, dtype=np.float32)).scatter_to(CPUS[2])
        assert (t * 2).sum().item() == 56.0
    names = [c.name for c in tr.contexts]
    assert names[:2] == ["shard", "schedule"]
    assert [p.name for p in tr.contexts[0].passes] == ["shard"]
    # the UI's text: each node of a graph over several devices names its device, as recorded in its entry
    x = Tensor(np.ones(4, np.float32), device="CPU:0").uop
    g = (x.copy_to("CPU:1") * 2).copy_to("CPU:0") + x
    table = NodeTable()
    table.add(g)
    order = [table.ids[u] for u in g.toposort()]
    on = display.devices(order, table.entry)
    assert {on[table.ids[u]] for u in g.toposort() if u.op is Ops.MUL} == {"CPU:1"} and on[table.ids[g]] == "CPU:0"
    assert display.devices([table.ids[x]], table.entry) == {}  # one device: no labels
    s = Tensor(np.ones(4, np.float32)).shard(CPUS[2], 0).uop
    table.add(s)
    assert table.entry(table.ids[s])["device"] == list(CPUS[2])
    old = {nid: {k: v for k, v in table.entry(nid).items() if k != "device"} for nid in order}
    assert display.devices(order, old.__getitem__) == {}  # a trace saved before devices were stored


def test_devices_run_on_threads_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schedule over two devices runs each device's kernels on a thread of its own."""
    import threading

    from uopviz.compiler import _programs
    seen: set[str] = set()
    x = Tensor(np.arange(6, dtype=np.float32)).scatter_to(CPUS[2]).realize()
    want = (x + 5).numpy()  # compiles the two shard kernels

    def spying(prog):
        def spy(*a, **k):
            seen.add(threading.current_thread().name.rsplit("_", 1)[0])
            return prog(*a, **k)
        return spy
    for key, (kernel, prog) in list(_programs.items()):
        if key[1] in CPUS[2]:
            monkeypatch.setitem(_programs, key, (kernel, spying(prog)))
    np.testing.assert_array_equal((x + 5).numpy(), want)
    assert {"uopviz-CPU:0", "uopviz-CPU:1"} <= seen
