"""Metal device semantics, on every Metal-family device present (MetalSim everywhere; Metal on Macs):
registry and props, buffer types, command buffers (n_cb), abort between command buffers, async
transfers ordered after compute, schedules, prop narrowing with CPU fallback, split mapped buffers."""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

METAL = [d for d in mb.devices() if d.name in ("Metal", "MetalSim")]
pytestmark = pytest.mark.skipif(not METAL, reason="no Metal-family device built")


@pytest.fixture(params=METAL, ids=[d.name for d in METAL])
def gpu(request):
    return request.param


def _chain(ctx, x, n):
    """A graph of about 3n nodes that every Metal device supports."""
    t = x
    for i in range(n):
        t = mb.ops.add(mb.ops.scale(t, 0.5, float(i % 3)), x)
        t = mb.ops.mul(t, x)
        t = mb.ops.clamp(t, -4.0, 4.0)
    return t


def test_metalsim_registry_and_props():
    names = [r.name for r in mb.registries()]
    assert "MetalSim" in names
    dev = mb.device("MetalSim")
    assert mb.device().name != "MetalSim"  # never the default
    assert dev.type == mb.DeviceType.GPU and dev.description
    reg = next(r for r in mb.registries() if r.name == "MetalSim")
    assert reg.device_count == 1
    with pytest.raises(IndexError):
        reg.device(1)
    caps = dev.props.caps
    assert caps.async_ and caps.buffer_from_host_ptr and not caps.host_buffer and not caps.events
    extra = dev.props.extra
    for key in ("has_simdgroup_reduction", "has_simdgroup_mm", "has_bfloat", "max_buffer_size", "families"):
        assert key in extra
    assert [b.name for b in dev.buffer_types] == ["MetalSim", "MetalSim_Private", "MetalSim_Mapped"]
    for b in dev.buffer_types:
        assert b.alignment == 32 and not b.is_host and b.max_size == int(extra["max_buffer_size"])


def test_families(gpu):
    backend = gpu.init_backend()
    if gpu.name == "MetalSim":
        assert backend.supports_family(7) and not backend.supports_family(10)
    with pytest.raises(TypeError):
        backend.supports_family("7")


def test_capture_only_on_metal():
    backend = mb.device("MetalSim").init_backend()
    with pytest.raises(NotImplementedError):
        backend.capture_next_compute()


def test_backend_options(gpu):
    backend = gpu.init_backend("n_cb=3,fusion=0")
    opts = backend.options.to_dict()
    assert opts["n_cb"] == 3 and opts["fusion"] == 0
    for key in ("concurrency", "graph_optimize", "debug"):
        assert key in opts
    with pytest.raises(mb.InvalidArgumentError):
        backend.options["n_cb"] = 9
    with pytest.raises(mb.InvalidArgumentError):
        backend.options["n_cb"] = 0


def _setup_chain(gpu, n_nodes_third=60, size=256, buft=None):
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, (size,), name="x")
    y = _chain(ctx, x, n_nodes_third)
    mb.alloc_ctx_tensors(ctx, buft or gpu.buffer_type)
    xs = np.random.default_rng(0).uniform(-1, 1, size).astype(np.float32)
    x.set(xs)
    return x, y, xs


def _ref_chain(xs, n):
    t = xs.astype(np.float64)
    for i in range(n):
        t = np.clip((t * 0.5 + (i % 3) + xs) * xs, -4, 4)
    return t


@pytest.mark.parametrize("n_cb", [1, 2, 3, 8])
def test_n_cb_gives_identical_results(gpu, n_cb):
    x, y, xs = _setup_chain(gpu)
    backend = gpu.init_backend(f"n_cb={n_cb}")
    assert len(mb.Graph(y)) > 64 + 8  # the first command buffer plus n_cb more
    assert backend.graph_compute(mb.Graph(y)) == mb.Status.SUCCESS
    assert np.allclose(y.get(), _ref_chain(xs, 60), rtol=1e-5, atol=1e-5)
    base = gpu.init_backend("n_cb=1")
    ref = y.get()
    base.graph_compute(mb.Graph(y))
    assert np.array_equal(y.get(), ref)


def test_abort_stops_between_command_buffers(gpu):
    x, y, xs = _setup_chain(gpu)
    backend = gpu.init_backend("n_cb=4")
    calls = []
    backend.set_abort_callback(lambda: calls.append(1) or len(calls) >= 2)
    y.set(np.zeros(y.shape, np.float32))
    assert backend.graph_compute(mb.Graph(y)) == mb.Status.ABORTED
    assert len(calls) == 2  # asked before each commit; the second said stop
    assert np.all(y.get() == 0)  # the last node was in an uncommitted command buffer
    backend.set_abort_callback(None)
    assert backend.graph_compute(mb.Graph(y)) == mb.Status.SUCCESS
    assert np.allclose(y.get(), _ref_chain(xs, 60), rtol=1e-5, atol=1e-5)


def test_async_transfers_are_ordered_after_compute(gpu):
    for buft in gpu.buffer_types:
        ctx = mb.Context()
        a = ctx.tensor(mb.f32, (1000,))
        y = mb.ops.scale(a, 3.0, 1.0)
        mb.alloc_ctx_tensors(ctx, buft)
        backend = gpu.init_backend()
        first = np.arange(1000, dtype=np.float32)
        backend.set_tensor_async(a, first)
        backend.graph_compute_async(mb.Graph(y))
        out = np.empty(1000, np.float32)
        backend.get_tensor_async(y, out)
        backend.set_tensor_async(a, np.zeros(1000, np.float32))  # after the graph: must not affect `out`
        backend.synchronize()
        assert np.array_equal(out, first * 3 + 1), buft.name
        assert np.all(a.get() == 0), buft.name


def test_private_buffers_refuse_host_views(gpu):
    priv = next(b for b in gpu.buffer_types if b.name.endswith("_Private"))
    with priv.alloc(64) as buf:
        with pytest.raises(mb.InvalidArgumentError):
            buf.numpy()
        with pytest.raises(BufferError) as info:  # the buffer protocol's own error, caused by ours
            memoryview(buf)
        assert isinstance(info.value.__cause__, mb.InvalidArgumentError)
        assert "not visible to the host" in str(info.value.__cause__)
        buf.set(bytes(range(64)))
        assert buf.get() == bytes(range(64))
        buf.memset(7, offset=60, size=4)
        assert buf.get(56) == bytes([56, 57, 58, 59, 7, 7, 7, 7])


def test_schedules_agree():
    x, y, xs = _setup_chain(mb.device("MetalSim"), n_nodes_third=10, size=1000)
    results = []
    for schedule in (0, 1):
        backend = mb.device("MetalSim").init_backend(f"schedule={schedule}")
        backend.graph_compute(mb.Graph(y))
        results.append(y.get())
    assert np.array_equal(results[0], results[1])


def test_narrowed_props_fall_back_to_cpu():
    dev = mb.device("MetalSim")
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4, 40))
    mb.alloc_ctx_tensors(ctx, dev.buffer_type)
    y = mb.ops.soft_max(mb.ops.scale(a, 2.0))
    xs = np.random.default_rng(1).standard_normal((4, 40)).astype(np.float32)
    a.set(xs)
    assert dev.supports_op(y)
    dev.set_prop("has_simdgroup_reduction", False)
    try:
        assert not dev.supports_op(y)
        sched = mb.Scheduler([dev.init_backend(), mb.device("CPU").init_backend()])
        plan = sched.plan(mb.Graph(y))
        assert [(p.node.op, p.backend.name) for p in plan] == [("SCALE", "MetalSim"), ("SOFT_MAX", "CPU")]
        assert "fallback" in plan[1].reason
        assert sched.graph_compute(mb.Graph(y)) == mb.Status.SUCCESS
        z = xs.astype(np.float64) * 2
        ref = np.exp(z - z.max(-1, keepdims=True))
        assert np.allclose(y.get(), ref / ref.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
        assert sched.n_copies >= 1
        with pytest.raises(mb.InvalidArgumentError):
            dev.set_prop("has_simdgroup_reduction", 2)
        with pytest.raises(mb.InvalidArgumentError):
            dev.set_prop("no_such_prop", 1)
    finally:
        dev.set_prop("has_simdgroup_reduction", True)
    assert dev.supports_op(y)


def test_scheduler_offloads_large_batches():
    dev = mb.device("MetalSim")
    ctx = mb.Context()
    w = ctx.tensor(mb.f32, (16, 64))
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))  # weights in host memory
    x_small = ctx.tensor(mb.f32, (4, 64))
    x_big = ctx.tensor(mb.f32, (64, 64))
    mb.alloc_ctx_tensors(ctx, dev.buffer_type)
    small, big = mb.ops.mul_mat(w, x_small), mb.ops.mul_mat(w, x_big)
    assert not dev.offload_op(small) and dev.offload_op(big)
    sched = mb.Scheduler([dev.init_backend(), mb.device("CPU").init_backend()])
    where = {id(p.node): (p.backend.name, p.reason) for p in sched.plan(mb.Graph(small, big))}
    assert where[id(big)][0] == "MetalSim" and "offload" in where[id(big)][1]
    assert where[id(small)][0] == "CPU" and "weights" in where[id(small)][1]


def test_mapped_buffer_split_into_overlapping_views():
    dev = mb.device("MetalSim")
    page = 4096
    hw_max = int(dev.props.extra["max_buffer_size"])
    dev.set_prop("max_buffer_size", 16 * page)
    try:
        host = np.random.default_rng(2).standard_normal(64 * page // 4).astype(np.float32)  # 256 KiB
        buf = dev.buffer_from_host_ptr(host, max_tensor_size=2 * page)
        ctx = mb.Context()
        n = 2 * page // 4
        xs = [ctx.tensor(mb.f32, (n,)) for _ in range(6)]
        outs = [mb.ops.scale(x, 2.0) for x in xs]
        offsets = [0, 13 * page, 14 * page + 512, 30 * page, 47 * page + 32, 62 * page]
        for x, off in zip(xs, offsets):
            x.place(buf, off)
        mb.alloc_ctx_tensors(ctx, dev.buffer_type)
        dev.init_backend().graph_compute(mb.Graph(*outs))
        for o, off in zip(outs, offsets):
            assert np.array_equal(o.get(), host[off // 4: off // 4 + n] * 2)
        # a tensor larger than max_tensor_size may straddle two views: refused with a clear error
        big = mb.Context()
        t = big.tensor(mb.f32, (8 * page // 4,))
        t.place(buf, 10 * page)
        y = mb.ops.scale(t, 1.0)
        mb.alloc_ctx_tensors(big, dev.buffer_type)
        with pytest.raises(mb.OutOfRangeError) as info:
            dev.init_backend().graph_compute(mb.Graph(y))
        assert "max_tensor_size" in str(info.value)
    finally:
        dev.set_prop("max_buffer_size", hw_max)


def test_place_tensor_checks():
    dev = mb.device("MetalSim")
    buf = dev.buffer_type.alloc(1024)
    ctx = mb.Context()
    t = ctx.tensor(mb.f32, (64,))
    with pytest.raises(mb.InvalidArgumentError):
        t.place(buf, 3)  # misaligned
    with pytest.raises(mb.OutOfRangeError):
        t.place(buf, 1024 - 128)
    t.place(buf, 0)
    with pytest.raises(mb.InvalidArgumentError):
        t.place(buf, 256)  # already placed
    with pytest.raises(mb.InvalidArgumentError):
        t.reshape(8, 8).place(buf, 0)


def test_memory_accounting(gpu):
    free0, total = gpu.memory
    buf = gpu.buffer_type.alloc(8 << 20)
    free1, _ = gpu.memory
    assert free1 <= free0 - (8 << 20) + (1 << 20) and total > 0
    buf.free()


def test_graph_optimize_keeps_results(gpu):
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, (8, 32))
    w = ctx.tensor(mb.f32, (32,))
    b = ctx.tensor(mb.f32, (32,))
    branches = [mb.ops.add(mb.ops.mul(mb.ops.norm(mb.ops.scale(x, float(i + 1)), 1e-5), w), b) for i in range(4)]
    total = branches[0]
    for br in branches[1:]:
        total = mb.ops.add(total, br)
    mb.alloc_ctx_tensors(ctx, gpu.buffer_type)
    rng = np.random.default_rng(4)
    for t in (x, w, b):
        t.set(rng.standard_normal(t.shape).astype(np.float32))
    backend = gpu.init_backend()
    g = mb.Graph(total)
    backend.graph_compute(g)
    expect = total.get()
    before = [n.op for n in g.nodes]
    backend.graph_optimize(g)
    assert sorted(before) == sorted(n.op for n in g.nodes)
    backend.graph_compute(g)
    assert np.allclose(total.get(), expect, rtol=1e-5, atol=1e-5)


def test_fusion_keeps_graph_outputs(gpu):
    ctx = mb.Context()
    x, a, b = (ctx.tensor(mb.f32, (64,)) for _ in range(3))
    t1 = mb.ops.add(x, a)
    t2 = mb.ops.add(t1, b)  # an ADD chain the encoder may fuse
    mb.alloc_ctx_tensors(ctx, gpu.buffer_type)
    vals = [np.full(64, v, np.float32) for v in (1.0, 2.0, 4.0)]
    for t, v in zip((x, a, b), vals):
        t.set(v)
    t1.set(np.zeros(64, np.float32))
    backend = gpu.init_backend("fusion=1")
    backend.graph_compute(mb.Graph(t2, t1))  # t1 is an output too: it must be written
    assert np.all(t1.get() == 3.0) and np.all(t2.get() == 7.0)


def test_scheduler_splits_keep_what_later_splits_read():
    dev = mb.device("MetalSim")
    ctx = mb.Context()
    x, a, b = (ctx.tensor(mb.f32, (4, 32)) for _ in range(3))
    mb.alloc_ctx_tensors(ctx, dev.buffer_type)
    t1 = mb.ops.add(x, a)
    t2 = mb.ops.add(t1, b)                       # fusable with t1 on MetalSim...
    s = mb.ops.soft_max(t2)                      # ...but the CPU computes this (narrowed device)
    out = mb.ops.add(mb.ops.add(s, t1), t2)      # and MetalSim reads t1 and t2 again
    rng = np.random.default_rng(7)
    vals = [rng.standard_normal((4, 32)).astype(np.float32) for _ in range(3)]
    for t, v in zip((x, a, b), vals):
        t.set(v)
    dev.set_prop("has_simdgroup_reduction", False)
    try:
        sched = mb.Scheduler([dev.init_backend("fusion=1"), mb.device("CPU").init_backend()])
        assert sched.graph_compute(mb.Graph(out)) == mb.Status.SUCCESS
        assert sched.n_splits == 3
    finally:
        dev.set_prop("has_simdgroup_reduction", True)
    t1r = vals[0].astype(np.float64) + vals[1]
    t2r = t1r + vals[2]
    e = np.exp(t2r - t2r.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True) + t1r + t2r
    assert np.allclose(out.get(), ref, rtol=1e-5, atol=1e-5)
