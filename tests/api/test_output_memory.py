"""A graph's outputs keep their values until the graph is computed again, whoever computes what in
between: sequential computes of other graphs on one Scheduler, the same graph twice, threads
sharing a Scheduler, GraphAllocator calls, schedulers on other backends. Intermediates are scratch:
reading one after its compute raises, naming what to do instead."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import metal_backend as mb


def _cpu():
    return mb.device("CPU").init_backend()


def _chain(ctx, x, scale, depth=3):
    """A graph over x whose intermediates are as large as its output: y = scale^depth * gelu...(x)."""
    t = x
    for _ in range(depth):
        t = mb.ops.scale(mb.ops.gelu(t), scale)
    return t


def _ref(x, scale, depth=3):
    t = x.astype(np.float64)
    for _ in range(depth):
        t = scale * (0.5 * t * (1 + np.tanh(0.7978845608 * (t + 0.044715 * t**3))))
    return t


def _graphs(n, shape=(64, 64), seed=0):
    """n graphs over one input, each with its own scale: (ctx, x, x values, [(graph, output, scale)])."""
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, shape, name="x")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    xv = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    x.set(xv)
    out = []
    for i in range(n):
        y = _chain(ctx, x, 0.5 + 0.25 * i)
        out.append((mb.Graph(y), y, 0.5 + 0.25 * i))
    return ctx, x, xv, out


def test_outputs_survive_later_graphs_on_one_scheduler():
    _, _, xv, graphs = _graphs(4)
    sched = mb.Scheduler([_cpu()])
    for g, _, _ in graphs:
        assert sched.graph_compute(g) == mb.Status.SUCCESS
    for _, y, s in graphs:  # read after every compute: nothing overwrote the earlier outputs
        assert y.is_allocated()
        np.testing.assert_allclose(y.get(), _ref(xv, s), rtol=1e-4, atol=1e-5)
    # Again in another order, interleaved with reads.
    for g, y, s in reversed(graphs):
        sched.graph_compute(g)
        np.testing.assert_allclose(y.get(), _ref(xv, s), rtol=1e-4, atol=1e-5)
    for _, y, s in graphs:
        np.testing.assert_allclose(y.get(), _ref(xv, s), rtol=1e-4, atol=1e-5)


def test_same_graph_twice_gives_the_new_values_and_keeps_the_others():
    _, x, xv, graphs = _graphs(2)
    (g0, y0, s0), (g1, y1, s1) = graphs
    sched = mb.Scheduler([_cpu()])
    sched.graph_compute(g0)
    sched.graph_compute(g1)
    x2 = -xv
    x.set(x2)
    sched.graph_compute(g0)  # the same graph again: its output is the new compute's
    np.testing.assert_allclose(y0.get(), _ref(x2, s0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y1.get(), _ref(xv, s1), rtol=1e-4, atol=1e-5)  # untouched
    # A new Graph object over the same tensors is the same graph.
    sched.graph_compute(mb.Graph(y1))
    np.testing.assert_allclose(y1.get(), _ref(x2, s1), rtol=1e-4, atol=1e-5)


def test_intermediates_go_back_and_raise_when_read():
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, (8, 8), name="x")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    x.set(np.ones((8, 8), np.float32))
    h = mb.ops.gelu(x)
    h.name = "h"
    y = mb.ops.scale(h, 2.0)
    sched = mb.Scheduler([_cpu()])
    sched.graph_compute(mb.Graph(y))
    assert y.is_allocated() and not h.is_allocated()
    with pytest.raises(mb.InvalidArgumentError, match=r"'h'.*intermediate of a Scheduler compute.*is_output"):
        h.get()
    # Marked as output (or listed as one), it keeps its memory too.
    h.is_output = True
    sched.graph_compute(mb.Graph(y))
    np.testing.assert_allclose(h.get(), _ref(np.ones((8, 8)), 1.0, depth=1), rtol=1e-5)
    # alloc_ctx_tensors leaves a scheduler's intermediates alone: new tensors only.
    z = mb.ops.gelu(mb.ops.scale(x, 3.0))
    buf = mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    assert buf is not None and z.is_allocated() and buf.size < 3 * 8 * 8 * 4


def test_threads_sharing_one_scheduler_read_their_own_values():
    _, _, xv, graphs = _graphs(4, shape=(96, 96), seed=1)
    refs = [_ref(xv, s) for _, _, s in graphs]
    sched = mb.Scheduler([_cpu()])
    wrong, errors = [], []

    barrier = threading.Barrier(4)

    def work(k):
        g, y, _ = graphs[k]
        try:
            for i in range(20):
                sched.graph_compute(g)
                if i % 2 == 0:
                    barrier.wait()  # every thread has computed its graph: then all read
                got = y.get()  # outside any lock: other threads compute other graphs meanwhile
                if not np.allclose(got, refs[k], rtol=1e-4, atol=1e-5):
                    wrong.append(k)
                if i % 2 == 0:
                    barrier.wait()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not wrong, (errors, len(wrong))


def test_one_graph_on_two_schedulers_in_threads():
    # Computes of one graph take turns across schedulers: every read-back is one compute's values.
    _, x, xv, graphs = _graphs(1, shape=(96, 96), seed=2)
    g, y, s = graphs[0]
    ref = _ref(xv, s)
    scheds = [mb.Scheduler([_cpu()]) for _ in range(3)]
    bad = []

    def work(sched):
        for _ in range(15):
            if sched.graph_compute(g) != mb.Status.SUCCESS:
                bad.append("status")

    threads = [threading.Thread(target=work, args=(sc,)) for sc in scheds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
    np.testing.assert_allclose(y.get(), ref, rtol=1e-4, atol=1e-5)


def test_graph_runs_on_another_scheduler_after_the_first_is_gone():
    _, _, xv, graphs = _graphs(2)
    (g0, y0, s0), (g1, y1, s1) = graphs
    first = mb.Scheduler([_cpu()])
    first.graph_compute(g0)
    del first  # its scratch memory goes with it
    second = mb.Scheduler([_cpu()])
    second.graph_compute(g1)
    second.graph_compute(g0)
    np.testing.assert_allclose(y0.get(), _ref(xv, s0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y1.get(), _ref(xv, s1), rtol=1e-4, atol=1e-5)


def test_nodes_left_in_a_freed_buffer_are_placed_again():
    # alloc_ctx_tensors places a graph built but never computed (its nodes too); freeing that
    # buffer must not leave the graph over freed memory.
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, (32, 32), name="x")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    xv = np.random.default_rng(5).standard_normal((32, 32)).astype(np.float32)
    x.set(xv)
    y = _chain(ctx, x, 0.75)
    g = mb.Graph(y)
    swept = mb.alloc_ctx_tensors(ctx, mb.device("CPU"))  # the graph's nodes, not computed yet
    assert swept is not None and y.is_allocated()
    swept.free()
    with pytest.raises(mb.InvalidArgumentError, match="freed"):
        _cpu().graph_compute(g)  # a backend's own compute: a clear error
    sched = mb.Scheduler([_cpu()])
    assert sched.graph_compute(g) == mb.Status.SUCCESS  # placed again
    np.testing.assert_allclose(y.get(), _ref(xv, 0.75), rtol=1e-4, atol=1e-5)
    # A freed input is still an error, not recomputed.
    ctx2 = mb.Context()
    a = ctx2.tensor(mb.f32, (4,), name="a")
    mb.alloc_ctx_tensors(ctx2, mb.device("CPU")).free()
    with pytest.raises(mb.InvalidArgumentError, match="freed"):
        sched.graph_compute(mb.Graph(mb.ops.scale(a, 2.0)))


def test_graph_allocator_never_overwrites_an_earlier_graph():
    _, x, xv, graphs = _graphs(3)
    backend = _cpu()
    galloc = mb.GraphAllocator(backend)
    for g, _, _ in graphs:
        assert galloc.alloc_graph(g) > 0
        backend.graph_compute(g)
    for _, y, s in graphs:
        np.testing.assert_allclose(y.get(), _ref(xv, s), rtol=1e-4, atol=1e-5)
    held = [y.buffer for _, y, _ in graphs]  # the same Buffer gives the same Python object
    assert len({id(b) for b in held}) == 3


def test_graph_allocator_reuses_a_buffer_no_tensor_holds():
    backend = _cpu()
    galloc = mb.GraphAllocator(backend)
    peaks = []
    for seed in range(3):
        _, _, xv, graphs = _graphs(1, seed=seed)
        g, y, s = graphs[0]
        peaks.append(galloc.alloc_graph(g))
        backend.graph_compute(g)
        np.testing.assert_allclose(y.get(), _ref(xv, s), rtol=1e-4, atol=1e-5)
        del g, y, graphs  # the graph's tensors go: its memory may serve the next one
    assert len(set(peaks)) == 1


def test_one_scheduler_over_many_short_lived_graphs():
    # New Contexts (whose tensors may reuse freed addresses) with other shapes and wiring each time:
    # every compute plans its own memory, never a remembered plan of a graph that is gone.
    sched = mb.Scheduler([_cpu()])
    rng = np.random.default_rng(7)
    for i in range(40):
        n = int(rng.integers(1, 40))
        depth = 1 + i % 4
        ctx = mb.Context()
        x = ctx.tensor(mb.f32, (n, 3 + i % 5), name="x")
        mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
        xv = rng.standard_normal(x.shape).astype(np.float32)
        x.set(xv)
        y = _chain(ctx, x, 0.9, depth=depth)
        side = mb.ops.scale(x, 2.0) if i % 2 else None
        g = mb.Graph(y, side) if side is not None else mb.Graph(y)
        assert sched.graph_compute(g) == mb.Status.SUCCESS
        assert sched.graph_compute(g) == mb.Status.SUCCESS  # the remembered plan
        np.testing.assert_allclose(y.get(), _ref(xv, 0.9, depth=depth), rtol=1e-4, atol=1e-5)
        if side is not None:
            np.testing.assert_allclose(side.get(), 2.0 * xv, rtol=1e-6)
        del ctx, x, y, g, side
