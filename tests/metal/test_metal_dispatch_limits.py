"""The dispatch checks above the runtime wall (src/metal/checked_runtime.cpp), reached from Python.

MetalSim's limits are lowered through the device props "max_threadgroup_memory" and
"max_threads_per_threadgroup" (they emulate a smaller GPU: every pipeline then reports at most that
many threads). The tiled MUL_MAT kernel has a fixed shape (MB_MM_THREADS = 128 threads and 12288
bytes of threadgroup memory for f32), so under a lower limit its dispatch is refused: the command
buffer fails, the backend raises mb.DeviceError naming the kernel and both numbers, and stays
usable. At the limit exactly the same graph runs. Encoders that size threadgroups from the
pipeline's maximum (rows: SOFT_MAX, RMS_NORM) run correctly under the lowest thread limit.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

pytestmark = pytest.mark.skipif("MetalSim" not in [r.name for r in mb.registries()], reason="MetalSim not built")

MM_THREADS = 128  # MB_MM_THREADS in shaders/kargs.h
MM_SHMEM_F32 = (64 + 32) * 32 * 4  # staged f32 tiles of a (64 rows) and b (32 columns), 32 deep


@pytest.fixture
def sim():
    """MetalSim with its limits restored after the test (the device is shared by the whole run)."""
    dev = mb.device("MetalSim")
    before = {k: int(dev.props.extra[k]) for k in ("max_threadgroup_memory", "max_threads_per_threadgroup")}
    yield dev
    for key, value in before.items():
        dev.set_prop(key, value)


def _tiled_mul_mat(dev):
    """A MUL_MAT that takes the tiled kernel (more than 8 columns of b, K >= 64), and its reference."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((64, 128)).astype(np.float32)
    x = rng.standard_normal((40, 128)).astype(np.float32)
    ctx = mb.Context()
    tw, tx = ctx.tensor(mb.f32, w.shape), ctx.tensor(mb.f32, x.shape)
    out = mb.ops.mul_mat(tw, tx)
    mb.alloc_ctx_tensors(ctx, dev.buffer_type)
    tw.set(w)
    tx.set(x)
    return mb.Graph(out), out, x.astype(np.float64) @ w.T.astype(np.float64)


def _runs(backend, graph, out, ref):
    assert backend.graph_compute(graph) == mb.Status.SUCCESS
    np.testing.assert_allclose(out.get(), ref, rtol=1e-4, atol=1e-4)


def test_threadgroup_memory_over_the_device_limit_is_refused(sim):
    graph, out, ref = _tiled_mul_mat(sim)
    backend = sim.init_backend()
    _runs(backend, graph, out, ref)
    sim.set_prop("max_threadgroup_memory", MM_SHMEM_F32)  # exactly what the kernel binds: still fits
    assert sim.props.extra["max_threadgroup_memory"] == str(MM_SHMEM_F32)
    _runs(backend, graph, out, ref)
    sim.set_prop("max_threadgroup_memory", 8192)
    with pytest.raises(mb.DeviceError,
                       match=rf"kernel_mul_mm_f32_f32: threadgroup memory of {MM_SHMEM_F32} bytes exceeds 8192"):
        backend.graph_compute(graph)
    sim.set_prop("max_threadgroup_memory", 32768)
    _runs(backend, graph, out, ref)  # the failed command buffer left the backend usable


def test_threads_over_the_pipeline_limit_are_refused(sim):
    graph, out, ref = _tiled_mul_mat(sim)
    backend = sim.init_backend()
    sim.set_prop("max_threads_per_threadgroup", MM_THREADS)
    _runs(backend, graph, out, ref)
    sim.set_prop("max_threads_per_threadgroup", 64)
    assert sim.props.extra["max_threads_per_threadgroup"] == "64"
    with pytest.raises(mb.DeviceError,
                       match=rf"kernel_mul_mm_f32_f32: {MM_THREADS} threads per threadgroup "
                             rf"\({MM_THREADS}x1x1\), at most 64"):
        backend.graph_compute(graph)
    sim.set_prop("max_threads_per_threadgroup", 1024)
    _runs(backend, graph, out, ref)


@pytest.mark.parametrize("limit", [32, 96, 1024])
def test_row_encoders_size_threadgroups_from_the_pipeline_limit(sim, limit):
    """Rows longer than the limit: each threadgroup loops over its row with the threads it may have."""
    rng = np.random.default_rng(limit)
    xs = rng.standard_normal((3, 2000)).astype(np.float32)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, xs.shape)
    sm = mb.ops.soft_max(a)
    rn = mb.ops.rms_norm(a, 1e-6)
    mb.alloc_ctx_tensors(ctx, sim.buffer_type)
    a.set(xs)
    sim.set_prop("max_threads_per_threadgroup", limit)
    backend = sim.init_backend()
    assert backend.graph_compute(mb.Graph(sm, rn)) == mb.Status.SUCCESS
    z = xs.astype(np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(sm.get(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(rn.get(), z / np.sqrt((z * z).mean(-1, keepdims=True) + 1e-6), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("key,bad", [
    ("max_threadgroup_memory", 0),
    ("max_threadgroup_memory", 1000),
    ("max_threadgroup_memory", 4104),  # not a multiple of 16
    ("max_threadgroup_memory", 1 << 20),  # above what the device has
    ("max_threads_per_threadgroup", 0),
    ("max_threads_per_threadgroup", 48),  # not whole simdgroups
    ("max_threads_per_threadgroup", 2048),
])
def test_limits_reject_bad_values(sim, key, bad):
    before = sim.props.extra[key]
    with pytest.raises(mb.InvalidArgumentError, match=rf"{key} must be .*got {bad}"):
        sim.set_prop(key, bad)
    assert sim.props.extra[key] == before
