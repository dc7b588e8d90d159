"""A command buffer that fails on the GPU never ends the process and never poisons later work silently.

MetalSim's `fault_kernels` prop makes every dispatch of the named kernels fault as a kernel's invalid
memory access does on a GPU: its command buffer ends in error. The error is raised as mb.DeviceError
at the next synchronize (or the next graph_compute, which synchronizes), naming the command buffer's
label (which nodes it held) and the kernel; reads queued behind it are not delivered; and the backend
computes right again afterwards.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")


@pytest.fixture
def sim():
    dev = SIM[0]
    dev.set_prop("fault_kernels", "")
    yield dev
    dev.set_prop("fault_kernels", "")


def softmax_graph(dev):
    ctx = mb.Context()
    x = ctx.tensor(mb.f32, (8, 64), name="x")
    y = mb.ops.soft_max(mb.ops.scale(x, 2.0))
    y.name = "probs"
    mb.alloc_ctx_tensors(ctx, dev.buffer_type)
    xs = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    x.set(xs)
    ref = np.exp(2.0 * xs.astype(np.float64) - (2.0 * xs).max(-1, keepdims=True))
    return x, y, mb.Graph(y), ref / ref.sum(-1, keepdims=True)


def test_a_faulting_kernel_is_raised_at_synchronize_and_the_backend_recovers(sim):
    backend = sim.init_backend()
    x, y, graph, ref = softmax_graph(sim)
    sim.set_prop("fault_kernels", "kernel_soft_max_f32_4")
    assert sim.props.extra["fault_kernels"] == "kernel_soft_max_f32_4"
    assert backend.graph_compute_async(graph) == mb.Status.SUCCESS
    out = np.zeros((8, 64), np.float32)
    backend.get_tensor_async(y, out)
    with pytest.raises(mb.DeviceError) as info:
        backend.synchronize()
    msg = str(info.value)
    assert "kernel_soft_max_f32_4" in msg and "GPU fault" in msg, msg
    assert "graph_compute_async on MetalSim: nodes 0-1 of 2" in msg and "'probs' SOFT_MAX" in msg, msg
    assert not out.any(), "a read queued behind the failed work must not be delivered"
    # Nothing is left over: the next synchronize is clean, and the next compute is right.
    backend.synchronize()
    sim.set_prop("fault_kernels", "")
    backend.graph_compute(graph)
    np.testing.assert_allclose(y.get(), ref, rtol=1e-5, atol=1e-7)


def test_an_async_fault_is_raised_by_the_next_compute(sim):
    backend = sim.init_backend()
    x, y, graph, ref = softmax_graph(sim)
    sim.set_prop("fault_kernels", "kernel_unary_f32_4,kernel_unary_f32")
    backend.graph_compute_async(graph)
    with pytest.raises(mb.DeviceError,
                       match=r"command buffer 0 \(graph_compute_async.*kernel_unary_f32(_4)?: .*GPU fault"):
        backend.graph_compute(graph)
    sim.set_prop("fault_kernels", "")
    backend.graph_compute(graph)
    np.testing.assert_allclose(y.get(), ref, rtol=1e-5, atol=1e-7)


def test_a_fault_on_one_backend_does_not_touch_another(sim):
    faulty, clean = sim.init_backend(), sim.init_backend()
    _, _, g1, _ = softmax_graph(sim)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4, 32))
    b = mb.ops.neg(a)
    mb.alloc_ctx_tensors(ctx, sim.buffer_type)
    a.set(np.full((4, 32), 2.0, np.float32))
    sim.set_prop("fault_kernels", "kernel_soft_max_f32_4")
    faulty.graph_compute_async(g1)
    clean.graph_compute(mb.Graph(b))  # runs on the same queue, after the faulting work
    np.testing.assert_array_equal(b.get(), np.full((4, 32), -2.0, np.float32))
    with pytest.raises(mb.DeviceError, match="kernel_soft_max_f32_4"):
        faulty.synchronize()


def test_fault_kernels_is_metalsims(sim):
    with pytest.raises(mb.InvalidArgumentError, match="no settable text prop 'fault_kernels'"):
        mb.device("CPU").set_prop("fault_kernels", "kernel_soft_max_f32")
