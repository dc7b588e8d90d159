"""metal_backend.nn.Runner and Weights: devices, backends, options, uploads, errors."""

from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb
from metal_backend import ops
from metal_backend.nn import ComputeError, Runner, Weights, resolve_device


def test_backends_put_the_cpu_last_as_fallback(device):
    runner = Runner(device)
    assert runner.device is device or runner.device.name == device.name
    names = [b.name for b in runner.backends]
    if device.type == mb.DeviceType.CPU:
        assert len(names) == 1
    else:
        assert len(names) == 2 and runner.backends[-1].device.type == mb.DeviceType.CPU


def test_threads_and_spin_reach_the_cpu_backend():
    runner = Runner("CPU", threads=1, spin_us=123)
    assert runner.backend.options["n_threads"] == 1
    assert runner.backend.options["spin_us"] == 123


@pytest.mark.parametrize("kw, match", [(dict(threads=0), "threads"), (dict(threads=1.5), "threads"),
                                       (dict(spin_us=-1), "spin_us"), (dict(threads=True), "threads")])
def test_bad_options_raise(kw, match):
    with pytest.raises(mb.InvalidArgumentError, match=match):
        Runner("CPU", **kw)


def test_resolve_device():
    assert resolve_device("CPU").name == "CPU"
    assert resolve_device(None).name in ("CPU", "Metal")
    with pytest.raises(ValueError, match="Nope"):
        resolve_device("Nope")
    with pytest.raises(TypeError):
        resolve_device(42)


def test_compute_raises_when_a_graph_does_not_complete():
    runner = Runner("CPU")
    w = Weights(runner.buffer_type)
    a = w.add("a", np.ones((4, 4), np.float32))
    w.upload()
    graph = mb.Graph(ops.relu(a))
    runner.backend.set_abort_callback(lambda: True)
    with pytest.raises(ComputeError, match=r"\[my model\].*ABORTED"):
        runner.compute(graph, "my model")
    runner.backend.set_abort_callback(None)
    runner.compute(graph, "my model")


def test_weights_upload_types_and_names(device):
    runner = Runner(device)
    w = Weights(runner.buffer_type)
    f32 = w.add("f32", np.arange(12, dtype=np.float64).reshape(3, 4))
    f16 = w.add("f16", np.arange(8, dtype=np.float16))
    q = w.add("q", np.linspace(-1, 1, 2 * 64, dtype=np.float32).reshape(2, 64), quantize=mb.q8_0)
    odd = w.add("odd", np.ones((2, 10), np.float32), quantize=mb.q8_0)  # 10 is no whole q8_0 block
    raw = w.add_raw("raw", mb.f32, (2,), np.array([1.5, 2.5], np.float32).tobytes())
    assert (f32.type, f16.type, q.type, odd.type) == (mb.f32, mb.f16, mb.q8_0, mb.f32)
    assert len(w) == 5 and "q" in w and list(w) == ["f32", "f16", "q", "odd", "raw"]
    buffer = w.upload()
    assert buffer.size >= w.nbytes
    np.testing.assert_array_equal(f32.get(), np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(raw.get(), [1.5, 2.5])
    np.testing.assert_allclose(q.get(), np.linspace(-1, 1, 128).reshape(2, 64), atol=1e-2)
    assert w["f16"] is f16


def test_weights_errors():
    w = Weights(mb.device("CPU").buffer_type)
    w.add("a", np.zeros(4, np.float32))
    with pytest.raises(mb.InvalidArgumentError, match="'a' exists"):
        w.add("a", np.zeros(4, np.float32))
    with pytest.raises(mb.InvalidArgumentError, match="dtype int32"):
        w.add("i", np.zeros(4, np.int32))
    with pytest.raises(mb.InvalidArgumentError, match="non-finite"):
        w.add("nan", np.array([np.nan], np.float32), check_finite=True)
    with pytest.raises(KeyError, match="nope"):
        w["nope"]
    w.upload()
    with pytest.raises(mb.InvalidArgumentError, match="already uploaded"):
        w.add("b", np.zeros(4, np.float32))
