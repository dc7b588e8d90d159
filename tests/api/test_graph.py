"""Graphs, the graph allocator, backend compute semantics and the scheduler."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import metal_backend as mb


def _cpu():
    return mb.device("CPU").init_backend()


def _mlp(ctx, n=64, d=32):
    x = ctx.tensor(mb.f32, (n, d), name="x")
    w1 = ctx.tensor(mb.f32, (4 * d, d), name="w1")
    w2 = ctx.tensor(mb.f32, (d, 4 * d), name="w2")
    h = mb.ops.gelu(mb.ops.mul_mat(w1, x))
    y = mb.ops.add(mb.ops.mul_mat(w2, h), x)
    return x, w1, w2, y


def _ref_mlp(x, w1, w2):
    h = x.astype(np.float64) @ w1.T.astype(np.float64)
    h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))
    return h @ w2.T.astype(np.float64) + x


def test_graph_is_topological_and_shares_nodes():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4,))
    s = mb.ops.sqr(a)
    y = mb.ops.add(s, s)
    z = mb.ops.mul(y, s)
    g = mb.Graph(z, y)
    ops = [n.op for n in g.nodes]
    assert ops == ["SQR", "ADD", "MUL"]
    assert len(g) == 3 and len(g.leafs) == 1
    assert len(ctx.build_graph(z)) == 3


def test_graph_needs_outputs():
    with pytest.raises(mb.InvalidArgumentError):
        mb.Graph()


def test_graph_allocator_reuses_memory_and_keeps_inputs_outputs():
    ctx = mb.Context()
    x, w1, w2, y = _mlp(ctx)
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))  # everything placed: nothing for the allocator
    ctx2 = mb.Context()
    a = ctx2.tensor(mb.f32, (256, 256), name="a")
    t = a
    for _ in range(6):
        t = mb.ops.scale(mb.ops.gelu(t), 0.5)
    g = mb.Graph(t)
    galloc = mb.GraphAllocator(_cpu())
    peak = galloc.alloc_graph(g)
    one = 256 * 256 * 4
    assert peak == galloc.peak_bytes
    assert peak <= 3 * one < galloc.unshared_bytes  # a chain needs about input + 2 live buffers
    x_in = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    a.set(x_in)
    _cpu().graph_compute(g)
    assert np.array_equal(a.get(), x_in)  # the input was not overwritten
    ref = x_in.astype(np.float64)
    for _ in range(6):
        ref = 0.5 * (0.5 * ref * (1 + np.tanh(0.7978845608 * (ref + 0.044715 * ref**3))))
    assert np.allclose(t.get(), ref, atol=1e-5)


def test_compute_mlp_matches_numpy():
    ctx = mb.Context()
    x, w1, w2, y = _mlp(ctx)
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    rng = np.random.default_rng(3)
    xs, w1s, w2s = (rng.standard_normal(t.shape).astype(np.float32) * 0.2 for t in (x, w1, w2))
    x.set(xs)
    w1.set(w1s)
    w2.set(w2s)
    assert _cpu().graph_compute(mb.Graph(y)) == mb.Status.SUCCESS
    assert np.allclose(y.get(), _ref_mlp(xs, w1s, w2s), rtol=1e-4, atol=1e-4)


def test_compute_unallocated_raises():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4,))
    y = mb.ops.exp(a)
    with pytest.raises(mb.InvalidArgumentError) as info:
        _cpu().graph_compute(mb.Graph(y))
    assert "not allocated" in str(info.value)


def test_compute_after_buffer_freed_raises():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4,))
    y = mb.ops.exp(a)
    buf = mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    buf.free()
    with pytest.raises(mb.InvalidArgumentError) as info:
        _cpu().graph_compute(mb.Graph(y))
    assert "freed" in str(info.value)


def test_unsupported_op_raises_and_scheduler_reports():
    ctx = mb.Context()
    a = ctx.tensor(mb.i32, (4, 8))
    y = mb.ops.gelu(a)  # no device computes GELU on integers
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    assert not mb.device("CPU").supports_op(y)
    with pytest.raises(mb.UnsupportedOpError) as info:
        _cpu().graph_compute(mb.Graph(y))
    assert "GELU" in str(info.value) and "i32" in str(info.value)
    with pytest.raises(NotImplementedError):
        mb.Scheduler([_cpu()]).plan(mb.Graph(y))


def test_abort_callback_stops_between_nodes():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (64,))
    t = a
    for _ in range(10):
        t = mb.ops.sqr(t)
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    a.set(np.ones(64))
    backend = _cpu()
    calls = []
    backend.set_abort_callback(lambda: calls.append(1) or len(calls) > 3)
    assert backend.graph_compute(mb.Graph(t)) == mb.Status.ABORTED
    assert len(calls) == 4
    backend.set_abort_callback(None)
    assert backend.graph_compute(mb.Graph(t)) == mb.Status.SUCCESS


def test_abort_callback_exception_propagates():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (8,))
    y = mb.ops.exp(a)
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    backend = _cpu()

    def boom():
        raise KeyError("from the callback")

    backend.set_abort_callback(boom)
    with pytest.raises(KeyError):
        backend.graph_compute(mb.Graph(y))
    with pytest.raises(TypeError):
        backend.set_abort_callback(5)


def test_async_set_get_and_synchronize():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (16,))
    y = mb.ops.scale(a, 2.0, 1.0)
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    backend = _cpu()
    backend.set_tensor_async(a, np.arange(16, dtype=np.float32))
    backend.graph_compute_async(mb.Graph(y))
    out = np.empty(16, dtype=np.float32)
    backend.get_tensor_async(y, out)
    backend.synchronize()
    assert out.tolist() == [2 * i + 1 for i in range(16)]
    with pytest.raises(mb.InvalidArgumentError):
        backend.get_tensor_async(y, np.empty(15, dtype=np.float32))


def test_cpu_backend_has_no_gpu_features():
    backend = _cpu()
    with pytest.raises(NotImplementedError):
        backend.supports_family(7)
    with pytest.raises(NotImplementedError):
        backend.capture_next_compute()
    backend.graph_optimize(mb.Graph(mb.ops.exp(mb.Context().tensor(mb.f32, (2,)))))


def test_threads_give_identical_results():
    ctx = mb.Context()
    x, w1, w2, y = _mlp(ctx, n=37, d=48)
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    rng = np.random.default_rng(5)
    for t in (x, w1, w2):
        t.set(rng.standard_normal(t.shape).astype(np.float32))
    results = []
    for n in (1, 2, 3, 8):
        b = mb.device("CPU").init_backend(f"n_threads={n}")
        b.graph_compute(mb.Graph(y))
        results.append(y.get())
    for r in results[1:]:
        assert np.allclose(r, results[0], rtol=1e-5, atol=1e-5)


def test_concurrent_computes_on_separate_backends():
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (1000,))
    outs = [mb.ops.scale(a, float(i)) for i in range(4)]
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    a.set(np.ones(1000))
    errors = []

    def work(i):
        try:
            for _ in range(20):
                mb.device("CPU").init_backend("n_threads=1").graph_compute(mb.Graph(outs[i]))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, o in enumerate(outs):
        assert np.all(o.get() == float(i))


def test_scheduler_plan_and_compute():
    ctx = mb.Context()
    x, w1, w2, y = _mlp(ctx)
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    rng = np.random.default_rng(9)
    vals = {}
    for t in (x, w1, w2):
        vals[t.name] = rng.standard_normal(t.shape).astype(np.float32) * 0.1
        t.set(vals[t.name])
    sched = mb.Scheduler([_cpu()])
    plan = sched.plan(mb.Graph(y))
    assert [p.node.op for p in plan] == [n.op for n in mb.Graph(y).nodes]
    assert all(p.backend.name == "CPU" and p.reason for p in plan)
    assert sched.graph_compute(mb.Graph(y)) == mb.Status.SUCCESS
    assert np.allclose(y.get(), _ref_mlp(vals["x"], vals["w1"], vals["w2"]), rtol=1e-4, atol=1e-4)


def test_scheduler_allocates_intermediates():
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, (64, 32), name="x")
    w1 = ctx.tensor(mb.f32, (128, 32), name="w1")
    w2 = ctx.tensor(mb.f32, (32, 128), name="w2")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))  # only the leafs exist yet
    h = mb.ops.gelu(mb.ops.mul_mat(w1, x))
    y = mb.ops.add(mb.ops.mul_mat(w2, h), x)
    assert not y.is_allocated() and not h.is_allocated()
    rng = np.random.default_rng(2)
    vals = [rng.standard_normal(t.shape).astype(np.float32) * 0.1 for t in (x, w1, w2)]
    for t, v in zip((x, w1, w2), vals):
        t.set(v)
    sched = mb.Scheduler([_cpu()])
    assert sched.graph_compute(mb.Graph(y)) == mb.Status.SUCCESS
    assert y.is_allocated() and sched.n_splits == 1 and sched.n_copies == 0
    assert np.allclose(y.get(), _ref_mlp(*vals), rtol=1e-4, atol=1e-4)


def test_scheduler_rejects_bad_backend_lists():
    b = _cpu()
    with pytest.raises(mb.InvalidArgumentError):
        mb.Scheduler([])
    with pytest.raises(mb.InvalidArgumentError):
        mb.Scheduler([b, b])
