"""The CPU device's SIMD paths, each on the same machine: the conformance table (op_cases.CASES) runs
on the CPU once more under every instruction-set cap narrower than what the machine uses (dev.set_prop
"max_isa": on an AVX2 machine the portable kernels, on an AVX-512 one the AVX2 and the portable ones),
so every path that users on other CPUs get is checked against the same float64 references. Also the
prop itself: what it reports, what it accepts, and that it applies from the next compute.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

from op_cases import CASES
from test_conformance import run_case

ISA_NAMES = {0: "portable", 1: "avx2", 2: "avx512"}
CPU = mb.device("CPU")


def _in_use() -> str:
    return CPU.props.extra["isa"]


def _narrower_caps() -> list[int]:
    """Caps below what the kernels use now (none on arm64, where NEON is not capped)."""
    current = {v: k for k, v in ISA_NAMES.items()}.get(_in_use())
    return [] if current is None else list(range(current))


@pytest.fixture
def isa_cap(request):
    """Sets max_isa for one test and restores the previous cap afterwards."""
    before = int(CPU.props.extra["max_isa"])
    CPU.set_prop("max_isa", request.param)
    yield request.param
    CPU.set_prop("max_isa", before)


_CAPS = _narrower_caps()


@pytest.mark.skipif(not _CAPS, reason="the CPU kernels use no capped SIMD set here (portable build or arm64)")
@pytest.mark.parametrize("isa_cap", _CAPS or [0], ids=lambda c: ISA_NAMES[c], indirect=True)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_under_isa_cap(case, isa_cap):
    assert _in_use() == ISA_NAMES[isa_cap]
    _, refused, _ = run_case(case, CPU)
    assert not refused, f"the CPU device must support every case; it refuses {refused} under {ISA_NAMES[isa_cap]}"


def test_props_report_isa():
    extra = CPU.props.extra
    assert extra["isa"] in ("avx512", "avx2", "portable", "neon")
    assert extra["isa_hardware"] in ("avx512", "avx2", "portable", "neon")
    assert int(extra["max_isa"]) in ISA_NAMES


@pytest.mark.parametrize("bad", [-1, 3, 99])
def test_max_isa_rejects_bad_values(bad):
    before = CPU.props.extra["max_isa"]
    with pytest.raises(mb.InvalidArgumentError, match=f"max_isa.*{bad}"):
        CPU.set_prop("max_isa", bad)
    assert CPU.props.extra["max_isa"] == before


def test_unknown_prop_is_rejected():
    with pytest.raises(mb.InvalidArgumentError, match="no_such_prop"):
        CPU.set_prop("no_such_prop", 1)


@pytest.mark.skipif(CPU.props.extra["isa_hardware"] == "neon", reason="NEON paths are not capped (arm64)")
def test_cap_applies_to_the_next_compute_of_an_existing_backend():
    """One backend, one graph: computed under the portable cap and again without it, both agree with
    numpy (the f32 GEMM path: 40 tokens), and the device reports the switch each time."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((70, 300)).astype(np.float32)
    x = rng.standard_normal((40, 300)).astype(np.float32)
    ctx = mb.Context()
    tw, tx = ctx.tensor(mb.f32, w.shape), ctx.tensor(mb.f32, x.shape)
    out = mb.ops.mul_mat(tw, tx)
    backend = CPU.init_backend("n_threads=2")
    mb.alloc_ctx_tensors(ctx, backend)
    tw.set(w)
    tx.set(x)
    graph = mb.Graph(out)
    ref = x.astype(np.float64) @ w.T.astype(np.float64)
    before = int(CPU.props.extra["max_isa"])
    try:
        results = {}
        for cap in (0, before):
            CPU.set_prop("max_isa", cap)
            backend.graph_compute(graph)
            results[_in_use()] = out.get()
        assert "portable" in results
        for name, got in results.items():
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3, err_msg=name)
    finally:
        CPU.set_prop("max_isa", before)
