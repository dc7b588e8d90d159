"""MetalSim's backend option racecheck (src/metal/sim/racecheck.h): listed with default 0, bad values refused
with typed errors naming them, and a graph of kernels that use threadgroup memory, simd reductions and
concurrent dispatch computes the same bytes under racecheck as without (the racecheck build is the same
kernels, instrumented). The planted races themselves are tests/native/test_racecheck.cpp's."""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

SIM = [d for d in mb.devices() if d.name == "MetalSim"]
pytestmark = pytest.mark.skipif(not SIM, reason="MetalSim not built")


def test_option_is_listed_and_checked():
    backend = SIM[0].init_backend()
    assert backend.options["racecheck"] == 0
    backend.options["racecheck"] = 1
    assert backend.options["racecheck"] == 1
    with pytest.raises(mb.InvalidArgumentError, match=r"'racecheck' must be in \[0, 1\], got 2"):
        backend.options["racecheck"] = 2
    with pytest.raises(mb.InvalidArgumentError, match=r"'racecheck' is not an integer: 'on'"):
        SIM[0].init_backend("racecheck=on")


def _compute(params: str) -> list[bytes]:
    backend = SIM[0].init_backend(params)
    rng = np.random.default_rng(7)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (96, 256), name="a")
    w = ctx.tensor(mb.f16, (64, 256), name="w")
    h = mb.ops.mul_mat(w, a)                      # (96, 64): threadgroup tiles
    n = mb.ops.norm(h, 1e-5)                      # simd reductions over rows
    s = mb.ops.soft_max(mb.ops.scale(n, 0.5))     # threadgroup reductions
    r = mb.ops.sum_rows(mb.ops.gelu(h))           # independent of s: a concurrent pass
    graph = mb.Graph([s, r])
    mb.alloc_ctx_tensors(ctx, backend)
    a.set(rng.standard_normal((96, 256)).astype(np.float32))
    w.set(rng.standard_normal((64, 256)).astype(np.float32))
    backend.graph_compute(graph)
    return [s.get_bytes(), r.get_bytes()]


def test_results_equal_with_and_without_racecheck():
    assert _compute("racecheck=1") == _compute("")
