"""Host views of memory that queued async work uses: a view or host read of bytes that queued work
writes raises PendingWorkError naming the work (never stale bytes); bytes that queued work only reads
come back read-only; synchronize() lifts both. MetalSim's async is real (command buffers run on the
executor's thread), so that is where it is tested; the CPU backend's async runs at once."""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb


@pytest.fixture
def sim():
    try:
        return mb.device("MetalSim")
    except mb.InvalidArgumentError:
        pytest.skip("MetalSim not built")


def _matmul_graph(dev, n=64, buft=None):
    ctx = mb.Context()
    w = ctx.tensor(mb.f32, (n, n), name="w")
    x = ctx.tensor(mb.f32, (n, n), name="x")
    y = mb.ops.mul_mat(w, x)
    y.name = "y"
    buf = mb.alloc_ctx_tensors(ctx, buft or dev.buffer_type)
    rng = np.random.default_rng(0)
    wv, xv = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    w.set(wv)
    x.set(xv)
    return ctx, w, x, y, buf, xv @ wv.T


def test_pending_compute_output_raises_until_synchronize(sim):
    _, w, x, y, buf, want = _matmul_graph(sim)
    backend = sim.init_backend()
    backend.graph_compute_async(mb.Graph(y))
    for access in (y.numpy, y.get, y.get_bytes, buf.numpy, lambda: np.from_dlpack(y), lambda: buf.get()):
        with pytest.raises(mb.PendingWorkError) as info:
            access()
        msg = str(info.value)
        assert "graph_compute_async on MetalSim" in msg and "synchronize()" in msg
    with pytest.raises(mb.PendingWorkError, match=r"node 'y' \(MUL_MAT\)"):
        y.numpy()
    with pytest.raises(BufferError) as info:  # Python turns a failed buffer export into BufferError
        memoryview(buf)
    assert isinstance(info.value.__cause__, mb.PendingWorkError)
    assert isinstance(mb.PendingWorkError("x"), mb.MetalBackendError)
    backend.synchronize()
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.from_dlpack(y), want, rtol=1e-4, atol=1e-4)
    assert y.numpy().flags.writeable and buf.numpy().flags.writeable


def test_pending_compute_inputs_are_read_only_views(sim):
    _, w, x, y, buf, want = _matmul_graph(sim)
    backend = sim.init_backend()
    backend.graph_compute_async(mb.Graph(y))
    xv = x.numpy()  # read by the queued compute: viewable, not writable
    assert not xv.flags.writeable
    with pytest.raises(ValueError):
        xv[0, 0] = 1
    assert not np.from_dlpack(x).flags.writeable
    with pytest.raises(mb.DLPackError, match="queued async work reads it"):
        x.__dlpack__()  # legacy capsules cannot say read-only
    x.get()  # a copy of bytes that are only read is fine
    backend.synchronize()
    assert x.numpy().flags.writeable
    np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-4)


def test_set_tensor_async_pending_then_visible(sim):
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (256,), name="a")
    b = ctx.tensor(mb.f32, (256,), name="b")
    mb.alloc_ctx_tensors(ctx, sim.buffer_type)
    a.set(np.zeros(256))
    b.set(np.ones(256))
    backend = sim.init_backend()
    backend.set_tensor_async(a, np.arange(256, dtype=np.float32))
    with pytest.raises(mb.PendingWorkError, match="set_tensor_async on MetalSim of 'a'"):
        a.numpy()
    np.testing.assert_array_equal(b.numpy(), np.ones(256))  # other bytes of the same buffer: untouched
    assert b.numpy().flags.writeable
    backend.synchronize()
    np.testing.assert_array_equal(a.numpy(), np.arange(256))


def test_get_tensor_async_source_is_read_only_until_synchronize(sim):
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (64,), name="a")
    buf = mb.alloc_ctx_tensors(ctx, sim.buffer_type)
    a.set(np.arange(64))
    backend = sim.init_backend()
    out = np.empty(64, np.float32)
    backend.get_tensor_async(a, out)
    assert not a.numpy().flags.writeable
    assert not buf.numpy().flags.writeable
    assert memoryview(buf).readonly
    backend.synchronize()
    assert a.numpy().flags.writeable
    np.testing.assert_array_equal(out, np.arange(64))


def test_private_memory_reads_are_ordered_not_refused(sim):
    private = [b for b in sim.buffer_types if b.name.endswith("_Private")]
    if not private:
        pytest.skip("no private buffer type")
    _, w, x, y, buf, want = _matmul_graph(sim, buft=private[0])
    backend = sim.init_backend()
    backend.graph_compute_async(mb.Graph(y))
    # private memory is read through a copy queued after the compute: the bytes are the new ones
    np.testing.assert_allclose(y.get(), want, rtol=1e-4, atol=1e-4)
    backend.synchronize()


def test_marks_belong_to_their_backend(sim):
    _, w, x, y, buf, want = _matmul_graph(sim)
    busy, other = sim.init_backend(), sim.init_backend()
    busy.graph_compute_async(mb.Graph(y))
    other.synchronize()  # another backend's synchronize does not vouch for this work
    with pytest.raises(mb.PendingWorkError):
        y.numpy()
    busy.synchronize()
    y.numpy()


def test_dropping_the_backend_finishes_its_work(sim):
    _, w, x, y, buf, want = _matmul_graph(sim)
    backend = sim.init_backend()
    backend.graph_compute_async(mb.Graph(y))
    del backend  # waits for the work, then lifts its marks
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)


def test_aborted_compute_keeps_marks_until_synchronize(sim):
    _, w, x, y, buf, want = _matmul_graph(sim)
    backend = sim.init_backend()
    backend.set_abort_callback(lambda: True)
    assert backend.graph_compute_async(mb.Graph(y)) == mb.Status.ABORTED
    with pytest.raises(mb.PendingWorkError):
        y.numpy()
    backend.synchronize()
    y.numpy()


def test_cpu_async_has_nothing_pending():
    cpu = mb.device("CPU")
    _, w, x, y, buf, want = _matmul_graph(cpu)
    backend = cpu.init_backend()
    backend.graph_compute_async(mb.Graph(y))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)  # the CPU computed it in the call
