"""Malformed arguments named in their errors: __dlpack__'s max_version and dl_device (not pybind11's
bare "Unable to cast"), and an MB_CPU_MAX_ISA value native code does not know (a warning naming it,
not silence)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import metal_backend as mb


def _tensor():
    ctx = mb.Context()
    t = ctx.tensor(mb.f32, (2, 3), name="t")
    mb.alloc_ctx_tensors(ctx, mb.device("CPU"))
    t.set(np.arange(6, dtype=np.float32).reshape(2, 3))
    return t


@pytest.mark.parametrize("bad", [("a", "b"), (1.0, 0), (True, 0), [1, 0], "1.0", (1, None)])
def test_malformed_max_version_is_named(bad):
    with pytest.raises(TypeError, match=r"Tensor.__dlpack__\] max_version"):
        _tensor().__dlpack__(max_version=bad)


@pytest.mark.parametrize("bad", [(1,), (1, 0, 0), (2**70, 0)])
def test_max_version_of_wrong_length_or_size(bad):
    with pytest.raises(mb.InvalidArgumentError, match="max_version"):
        _tensor().__dlpack__(max_version=bad)


@pytest.mark.parametrize("bad", [("cpu", 0), "cpu", (1.0, 0), [1, 0], (1, "0")])
def test_malformed_dl_device_is_named(bad):
    with pytest.raises(TypeError, match=r"Tensor.__dlpack__\] dl_device"):
        _tensor().__dlpack__(dl_device=bad)
    with pytest.raises(mb.InvalidArgumentError, match="dl_device"):
        _tensor().__dlpack__(dl_device=(1,))


def test_well_formed_arguments_still_work():
    t = _tensor()
    assert np.array_equal(np.from_dlpack(t), np.arange(6, dtype=np.float32).reshape(2, 3))
    t.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
    with pytest.raises(mb.DLPackError, match="dl_device"):
        t.__dlpack__(dl_device=(2, 0))


def _import_with(value):
    env = dict(os.environ, MB_CPU_MAX_ISA=value)
    return subprocess.run([sys.executable, "-c", "import metal_backend"], capture_output=True, text=True, env=env,
                          timeout=120)


def test_unknown_cpu_isa_value_warns():
    proc = _import_with("avx3")
    assert proc.returncode == 0
    assert "RuntimeWarning" in proc.stderr and "MB_CPU_MAX_ISA='avx3'" in proc.stderr
    for good in ("", "portable", "avx2", "avx512"):
        proc = _import_with(good)
        assert proc.returncode == 0 and "MB_CPU_MAX_ISA" not in proc.stderr, (good, proc.stderr)


def test_imports_into_one_context_meet_in_one_op():
    u = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.full((2, 3), 0.5, np.float32)
    cpu = mb.device("CPU")
    apart = [mb.from_dlpack(x, cpu) for x in (u, v)]
    with pytest.raises(mb.InvalidArgumentError):
        mb.ops.add(*apart)  # two Contexts, as before
    ctx = mb.Context()
    w = ctx.tensor(mb.f32, (2, 3), name="w")
    mb.alloc_ctx_tensors(ctx, cpu)
    w.set(np.ones((2, 3), np.float32))
    a, b = (mb.from_dlpack(x, cpu, ctx=ctx) for x in (u, v))
    y = mb.ops.add(mb.ops.mul(a, b), w)
    assert mb.Scheduler([cpu.init_backend()]).graph_compute(mb.Graph(y)) == mb.Status.SUCCESS
    np.testing.assert_array_equal(y.get(), u * v + 1)
    strided = mb.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2], cpu, ctx=ctx)
    np.testing.assert_array_equal(strided.get(), np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2])
    with pytest.raises(TypeError, match="ctx"):
        mb.from_dlpack(u, cpu, ctx="not a context")
