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


# ---------------------------------------------------------------- core's conversions under the cap
# mb.quantize / mb.dequantize (and the CPU kernels' copies and row reads) convert through core's
# types.cpp, whose AVX2 + F16C paths obey the same process-wide cap; "isa_conversions" says which
# path runs. Both paths must give the same bits, NaN payloads included.

_X86_CONVERSIONS = CPU.props.extra["isa_hardware"] in ("avx2", "avx512")


@pytest.fixture
def restore_cap():
    before = int(CPU.props.extra["max_isa"])
    yield before
    CPU.set_prop("max_isa", before)


def test_conversions_report_the_capped_path(restore_cap):
    CPU.set_prop("max_isa", 0)
    assert CPU.props.extra["isa_conversions"] == "portable"
    for cap in (1, 2):
        CPU.set_prop("max_isa", cap)
        assert CPU.props.extra["isa_conversions"] == ("avx2" if _X86_CONVERSIONS else "portable")


def _special_floats(rng) -> np.ndarray:
    """f32 values that probe f16 rounding: ties, subnormals, overflow, infinities, NaNs with payloads."""
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    finite = halves[np.isfinite(halves)]
    ties = (finite[:-1].astype(np.float64) + np.diff(finite.astype(np.float64)) / 2).astype(np.float32)
    bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    extra = np.array([65504.0, 65519.0, 65520.0, 1e-8, -1e-8, 5.96e-8, 2.98e-8, np.inf, -np.inf], np.float32)
    nans = (np.uint32(0x7F800001) + rng.integers(0, 2**22, 64, dtype=np.uint32)).view(np.float32)
    return np.concatenate([finite, ties, bits.view(np.float32), extra, nans, -nans])


def _under_each_cap(fn):
    """fn() as bytes under the portable cap and under the widest cap, with the path each reported."""
    out = {}
    for cap in (0, 2):
        CPU.set_prop("max_isa", cap)
        out[CPU.props.extra["isa_conversions"]] = fn()
    return out


@pytest.mark.skipif(not _X86_CONVERSIONS, reason="core's conversions have no SIMD path on this machine")
def test_f16_conversions_are_bit_identical_under_every_cap(restore_cap):
    x = _special_floats(np.random.default_rng(7))
    x = x[: x.size // 8 * 8]  # whole vectors, then a tail below
    for data in (x, x[:-5]):
        got = _under_each_cap(lambda: mb.quantize(data, mb.f16))
        assert set(got) == {"portable", "avx2"}
        assert got["portable"] == got["avx2"]
    every_half = np.arange(65536, dtype=np.uint32).astype(np.uint16).tobytes()
    for name, shape in (("f16", (65536,)), ("bf16", (65536,)), ("f16", (13,))):
        data = every_half[: 2 * shape[0]]
        got = _under_each_cap(lambda: mb.dequantize(data, getattr(mb, name), shape).view(np.uint32).tobytes())
        assert got["portable"] == got["avx2"], name


@pytest.mark.skipif(not _X86_CONVERSIONS, reason="core's conversions have no SIMD path on this machine")
@pytest.mark.parametrize("name", ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"])
def test_dequantize_is_bit_identical_under_every_cap(name, restore_cap):
    t = getattr(mb, name)
    rng = np.random.default_rng(11)
    blocks = 4096
    raw = rng.integers(0, 256, blocks * t.type_size, dtype=np.uint8)
    # Scales of every kind: random halves (subnormal, infinite, NaN among them) and ordinary ones.
    scales = raw.reshape(blocks, t.type_size)[:, :2].copy().view(np.uint16)
    scales[: blocks // 2] = np.float16(0.01).view(np.uint16) + rng.integers(0, 4000, (blocks // 2, 1), dtype=np.uint16)
    raw.reshape(blocks, t.type_size)[:, :2] = scales.view(np.uint8)
    data = raw.tobytes()
    got = _under_each_cap(lambda: mb.dequantize(data, t, (blocks * t.block_size,)).view(np.uint32).tobytes())
    assert set(got) == {"portable", "avx2"}
    assert got["portable"] == got["avx2"]
    # The quantizers have one path; they too must not depend on the cap.
    x = np.random.default_rng(12).standard_normal(64 * t.block_size).astype(np.float32)
    got = _under_each_cap(lambda: mb.quantize(x, t))
    assert got["portable"] == got["avx2"]
