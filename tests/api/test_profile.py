"""Per-node profiles (Backend.profile): every computing node timed once per repeat, in graph order, with
results equal to a normal compute; on the device's clock where the backend has one (MetalSim: the
executor's time per dispatch), else the host's; FLOPs and bytes where known; summary tables; Chrome
trace export."""
from __future__ import annotations

import json

import numpy as np
import pytest

import metal_backend as mb


def _graph(dev):
    ctx = mb.Context()
    w = ctx.tensor(mb.f32, (48, 64), name="w")
    x = ctx.tensor(mb.f32, (16, 64), name="x")
    h = mb.ops.mul_mat(w, x)  # (16, 48)
    h.name = "h"
    g = mb.ops.gelu(h)
    g.name = "g"
    t = mb.ops.cont(mb.ops.transpose(g))  # a view node (not timed) and a copy
    t.name = "t"
    y = mb.ops.soft_max(t)
    y.name = "y"
    mb.alloc_ctx_tensors(ctx, dev)
    rng = np.random.default_rng(0)
    wv, xv = rng.standard_normal((48, 64)).astype(np.float32), rng.standard_normal((16, 64)).astype(np.float32)
    w.set(wv)
    x.set(xv)
    hv = xv @ wv.T
    gv = 0.5 * hv * (1 + np.tanh(np.sqrt(2 / np.pi) * (hv + 0.044715 * hv**3)))
    tv = gv.T
    e = np.exp(tv - tv.max(axis=1, keepdims=True))
    return mb.Graph(y), y, w, x, h, e / e.sum(axis=1, keepdims=True)


def test_profile_times_every_computing_node(device):
    graph, y, w, x, h, want = _graph(device)
    prof = device.init_backend().profile(graph, repeat=2)
    assert isinstance(prof, mb.Profile) and prof.backend == device.name and prof.repeat == 2
    computing = [n for n in graph.nodes if n.op not in ("NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE")]
    assert [n.op for n in prof.nodes] == [n.op for n in computing] == ["MUL_MAT", "GELU", "CONT", "SOFT_MAX"]
    assert [n.name for n in prof.nodes] == ["h", "g", "t", "y"]
    assert [n.index for n in prof.nodes] == [0, 1, 2, 3]
    assert all(n.time_us > 0 and n.host_us > 0 for n in prof.nodes)
    starts = [n.start_us for n in prof.nodes]
    assert starts == sorted(starts) and starts[0] >= 0
    assert prof.wall_us >= prof.host_total_us * 0.99 * 2 - 1e-6  # two repeats; means of them summed
    np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-5)  # computed as a normal compute would
    if device.name == "MetalSim":
        # The executor's time of the node's one dispatch, inside the host's time of its whole compute.
        assert prof.clock == "MetalSim executor time per dispatch" and prof.device_timed
        assert all(0 < n.time_us <= n.host_us for n in prof.nodes)
    elif device.name == "Metal":
        assert prof.clock in ("Metal GPU time per dispatch (counter samples)", "Metal GPU time per command buffer")
        assert all(0 < n.time_us <= n.host_us for n in prof.nodes)
    else:
        assert prof.clock == "host wall time" and not prof.device_timed
        assert all(n.time_us == n.host_us for n in prof.nodes)


def test_profile_flops_and_bytes(device):
    graph, y, w, x, h, want = _graph(device)
    prof = device.init_backend().profile(graph)
    mm, gelu, cont, soft = prof.nodes
    assert mm.flops == 2 * 16 * 48 * 64
    assert mm.bytes == w.nbytes + x.nbytes + h.nbytes
    assert gelu.flops == 16 * 48 and gelu.bytes == 2 * 16 * 48 * 4
    assert cont.flops == 0 and soft.flops == 0  # not known: shown as '-'
    assert mm.gflops is not None and mm.gflops > 0 and cont.gflops is None
    assert mm.shape == (16, 48) and mm.type == "f32"


def test_profile_tables(device):
    graph, *_ = _graph(device)
    prof = device.init_backend().profile(graph)
    ops = prof.by_op()
    assert sorted(op for op, _, _ in ops) == ["CONT", "GELU", "MUL_MAT", "SOFT_MAX"]
    assert [t for _, _, t in ops] == sorted((t for _, _, t in ops), reverse=True)
    assert sum(t for _, _, t in ops) == pytest.approx(prof.total_us)
    header, *rows = prof.table().splitlines()
    columns = header.replace("time ms", "time_ms").replace("host ms", "host_ms").split()
    assert ("host_ms" in columns) == prof.device_timed
    col = {c: i - len(columns) for i, c in enumerate(columns)}  # from the right: shapes hold spaces
    times = [float(r.split()[col["time_ms"]]) for r in rows]
    assert len(rows) == 4 and times == sorted(times, reverse=True)
    if prof.device_timed:
        hosts = [float(r.split()[col["host_ms"]]) for r in rows]
        assert all(t <= h + 1e-3 for t, h in zip(times, hosts))
    assert len(prof.table(top=2).splitlines()) == 3
    text = str(prof)
    assert device.name in text and "MUL_MAT" in text and prof.clock in text


def test_chrome_trace(tmp_path):
    dev = mb.device("CPU")
    graph, *_ = _graph(dev)
    prof = dev.init_backend().profile(graph)
    path = tmp_path / "trace.json"
    trace = prof.to_chrome_trace(str(path))
    assert json.loads(path.read_text()) == json.loads(json.dumps(trace))
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["name"] for e in spans] == ["MUL_MAT h", "GELU g", "CONT t", "SOFT_MAX y"]
    for e, n in zip(spans, prof.nodes):
        assert e["ts"] == n.start_us and e["dur"] == n.time_us and e["args"]["flops"] == n.flops
        assert e["args"]["host_us"] == n.host_us
    assert trace["otherData"]["clock"] == prof.clock


def test_device_clock_under_every_schedule(target):
    """On MetalSim (under both schedules) a node's time is the executor's, within the host's time of its
    compute, and the outputs equal a normal compute's; the CPU stays on the host clock."""
    dev, params = target
    graph, y, w, x, h, want = _graph(dev)
    backend = dev.init_backend(params)
    if dev.name != "MetalSim":
        prof = backend.profile(graph)
        assert prof.clock.startswith("Metal GPU time per") if dev.name == "Metal" else prof.clock == "host wall time"
        np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-5)
        return
    prof = backend.profile(graph, repeat=3)
    assert prof.clock == "MetalSim executor time per dispatch"
    assert all(0 < n.time_us <= n.host_us for n in prof.nodes)
    assert prof.total_us <= prof.host_total_us <= prof.wall_us
    np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-5)
    # A profile leaves nothing behind: a normal compute afterwards gives the same result.
    y.set(np.zeros((48, 16), np.float32))
    backend.graph_compute(graph)
    np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-5)


def test_profile_bad_input():
    dev = mb.device("CPU")
    graph, *_ = _graph(dev)
    backend = dev.init_backend()
    with pytest.raises(mb.InvalidArgumentError, match="repeat"):
        backend.profile(graph, repeat=0)
    with pytest.raises(TypeError, match="repeat"):
        backend.profile(graph, repeat="2")
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4,), name="a")
    with pytest.raises(mb.InvalidArgumentError, match="not allocated"):
        backend.profile(mb.Graph(mb.ops.exp(a)))


def test_profile_bad_input_on_device_clock():
    """The device-timed path (MetalSim) raises the same typed errors and stays usable after them."""
    if "MetalSim" not in [d.name for d in mb.devices()]:
        pytest.skip("MetalSim not built")
    dev = mb.device("MetalSim")
    graph, y, w, x, h, want = _graph(dev)
    backend = dev.init_backend()
    with pytest.raises(mb.InvalidArgumentError, match="repeat"):
        backend.profile(graph, repeat=-1)
    with pytest.raises(TypeError, match="repeat"):
        backend.profile(graph, repeat=1.5)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4,), name="a")
    with pytest.raises(mb.InvalidArgumentError, match="not allocated"):
        backend.profile(mb.Graph(mb.ops.exp(a)))
    cpu_graph, *_ = _graph(mb.device("CPU"))
    with pytest.raises(mb.InvalidArgumentError, match="cannot compute on"):
        backend.profile(cpu_graph)
    prof = backend.profile(graph)
    assert prof.clock == "MetalSim executor time per dispatch" and len(prof.nodes) == 4


def test_profile_stops_when_aborted(device):
    graph, *_ = _graph(device)
    backend = device.init_backend()
    calls = []
    backend.set_abort_callback(lambda: len(calls) > 0 or calls.append(1) or False)
    prof = backend.profile(graph)
    assert 1 <= len(prof.nodes) < 4
    # The nodes timed before the stop keep the device's clock; the aborted one ran nothing.
    assert prof.nodes[0].time_us > 0
    want = {"CPU": "host wall time", "MetalSim": "MetalSim executor time per dispatch"}
    assert prof.clock == want[device.name] if device.name in want else prof.clock.startswith("Metal GPU time per")
