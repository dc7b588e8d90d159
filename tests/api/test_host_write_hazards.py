"""Host writes into memory that queued async work uses (issue 24, item 6).

During MetalSim async work, t.set, buf.set, buf.memset and buf.clear into memory that queued work
reads or writes were accepted while reads of it raised: the compute saw the new values, or the
write was lost under the output. The rule now covers writes: a host write to bytes that queued
work reads or writes raises PendingWorkError naming the work, before anything is written; bytes
nothing queued touches may be written; synchronize() lifts it. The class: every host write call,
against a queued compute's input, output and an untouched tensor, in every buffer type of MetalSim,
and against a queued set_tensor_async / get_tensor_async target.
"""
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


N = 64


def _setup(dev, buft):
    ctx = mb.Context()
    w = ctx.tensor(mb.f32, (N, N), name="w")
    x = ctx.tensor(mb.f32, (N, N), name="x")
    free = ctx.tensor(mb.f32, (N, N), name="free")
    y = mb.ops.mul_mat(w, x)
    y.name = "y"
    buf = mb.alloc_ctx_tensors(ctx, buft)
    rng = np.random.default_rng(0)
    wv, xv = rng.standard_normal((N, N)).astype(np.float32), rng.standard_normal((N, N)).astype(np.float32)
    w.set(wv)
    x.set(xv)
    free.set(np.zeros((N, N), np.float32))
    return dict(w=w, x=x, y=y, free=free, buf=buf, want=xv @ wv.T)


def _writes(t, buf):
    """Every host write into tensor t's bytes (name -> call)."""
    off, n = t.offset, t.nbytes
    return {
        "Tensor.set": lambda: t.set(np.ones(t.shape, np.float32)),
        "Tensor.set(raw)": lambda: t.set(np.ones(t.shape, np.float32).tobytes()),
        "Buffer.set": lambda: buf.set(np.ones(n, np.uint8), off),
        "Buffer.memset": lambda: buf.memset(7, off, n),
        "Buffer.clear": lambda: buf.clear(0),
    }


@pytest.mark.parametrize("role", ["x", "y"])
@pytest.mark.parametrize("kind", ["", "_Private", "_Mapped"])
def test_host_writes_into_queued_memory_raise_until_synchronize(sim, kind, role):
    bufts = {b.name: b for b in sim.buffer_types}
    s = _setup(sim, bufts[sim.name + kind])
    backend = sim.init_backend()
    backend.graph_compute_async(mb.Graph(s["y"]))
    target = s[role]
    for name, write in _writes(target, s["buf"]).items():
        with pytest.raises(mb.PendingWorkError) as info:
            write()
        msg = str(info.value)
        assert "graph_compute_async on MetalSim" in msg, (name, msg)
        if name != "Buffer.clear":  # the whole buffer: the first overlapping access is named
            assert (" reads it" if role == "x" else " writes it") in msg, (name, msg)
        assert "synchronize()" in msg
    backend.synchronize()
    # Nothing was written: the compute saw the old inputs, and the output is whole.
    np.testing.assert_allclose(s["y"].get(), s["want"], rtol=1e-4, atol=1e-4)
    for name, write in _writes(target, s["buf"]).items():
        write()  # allowed again


def test_host_writes_to_untouched_memory_are_allowed(sim):
    s = _setup(sim, sim.buffer_type)
    backend = sim.init_backend()
    backend.graph_compute_async(mb.Graph(s["y"]))
    s["free"].set(np.full((N, N), 3.0, np.float32))
    s["buf"].memset(1, s["free"].offset, s["free"].nbytes)
    s["buf"].set(np.zeros(0, np.uint8), s["y"].offset)  # writes nothing
    backend.synchronize()
    np.testing.assert_allclose(s["y"].get(), s["want"], rtol=1e-4, atol=1e-4)
    assert (s["free"].get_bytes() == b"\x01" * s["free"].nbytes)


def test_host_writes_into_queued_copies_raise(sim):
    s = _setup(sim, sim.buffer_type)
    backend = sim.init_backend()
    backend.set_tensor_async(s["free"], np.full((N, N), 5.0, np.float32))
    with pytest.raises(mb.PendingWorkError, match="set_tensor_async on MetalSim.*writes"):
        s["free"].set(np.zeros((N, N), np.float32))
    out = np.empty((N, N), np.float32)
    backend.get_tensor_async(s["x"], out)
    with pytest.raises(mb.PendingWorkError, match="get_tensor_async on MetalSim.*reads"):
        s["x"].set(np.zeros((N, N), np.float32))
    backend.synchronize()
    assert np.all(s["free"].get() == 5.0)
    np.testing.assert_array_equal(out, s["x"].get())
