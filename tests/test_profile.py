"""Per-node profiles (Backend.profile): every computing node timed once per repeat, in graph order, with
results equal to a normal compute; FLOPs and bytes where known; summary tables; Chrome trace export."""
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
    assert all(n.time_us > 0 for n in prof.nodes)
    starts = [n.start_us for n in prof.nodes]
    assert starts == sorted(starts) and starts[0] >= 0
    assert prof.wall_us >= prof.total_us * 0.99 * 2 - 1e-6  # two repeats; means of them summed
    np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-5)  # computed as a normal compute would
    if device.name != "CPU":
        assert "command buffer per node" in prof.clock
    else:
        assert prof.clock.startswith("host wall time per node")


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
    rows = prof.table().splitlines()[1:]
    times = [float(r.split()[-4]) for r in rows]
    assert len(rows) == 4 and times == sorted(times, reverse=True)
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
    assert trace["otherData"]["clock"] == prof.clock


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


def test_profile_stops_when_aborted():
    dev = mb.device("CPU")
    graph, *_ = _graph(dev)
    backend = dev.init_backend()
    calls = []
    backend.set_abort_callback(lambda: len(calls) > 0 or calls.append(1) or False)
    prof = backend.profile(graph)
    assert 1 <= len(prof.nodes) < 4
