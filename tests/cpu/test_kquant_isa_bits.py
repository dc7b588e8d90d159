"""k-quant MUL_MAT on the CPU device: the same bits under every instruction-set cap, and near float64.

With q2_K .. q6_K weights and few tokens, the activations are quantized to q8_K and every 256-value
super-block's code products times its integer sub-block scales are summed exactly in int32 on every
path (portable, AVX2; src/cpu/kernels/vec_dot_k.cpp), then added in one float order with the same
fused multiply-adds. So the results agree bit for bit across max_isa 0 (portable), 1 (avx2) and 2
(avx512, which runs the AVX2 kernels for these types). Results are read as raw bytes.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

CPU = mb.device("CPU")
ISA_NAMES = {0: "portable", 1: "avx2", 2: "avx512"}
K_QUANTS = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs"]


def _caps() -> list[int]:
    current = {v: k for k, v in ISA_NAMES.items()}.get(CPU.props.extra["isa_hardware"])
    return [] if current is None else list(range(min(current, int(CPU.props.extra["max_isa"])) + 1))


CAPS = _caps()


def _mul_mat_bits(wtype: str, raw: bytes, m: int, k: int, x: np.ndarray, threads: int) -> dict[int, np.ndarray]:
    ctx = mb.Context()
    tw = ctx.tensor(getattr(mb, wtype), (m, k))
    tx = ctx.tensor(mb.f32, x.shape)
    out = mb.ops.mul_mat(tw, tx)
    backend = CPU.init_backend(f"n_threads={threads}")
    mb.alloc_ctx_tensors(ctx, backend)
    tw.set(raw)
    tx.set(np.ascontiguousarray(x, dtype=np.float32))
    graph = mb.Graph(out)
    results = {}
    before = int(CPU.props.extra["max_isa"])
    for cap in CAPS or [before]:
        CPU.set_prop("max_isa", cap)
        try:
            backend.graph_compute(graph)
        finally:
            CPU.set_prop("max_isa", before)
        raw_out = out.buffer.get(out.offset, 4 * x.shape[0] * m)
        results[cap] = np.frombuffer(raw_out, dtype=np.uint32).reshape(x.shape[0], m).copy()
    return results


def _weights(rng, wtype: str, m: int, k: int):
    w = (rng.standard_normal((m, k)) * rng.uniform(0.01, 4.0, (m, 1))).astype(np.float32)
    raw = mb.quantize(w, getattr(mb, wtype))
    return raw, mb.dequantize(raw, getattr(mb, wtype), (m, k)).astype(np.float64)


def _check_reference(bits: np.ndarray, x: np.ndarray, w: np.ndarray, label: str):
    """Element e of a 256-block of x with largest magnitude a is off by at most a/254 after q8_K
    quantization, so each result by at most sum |w| times that; plus float32 rounding."""
    got = bits.view(np.float32).astype(np.float64)
    x64 = x.astype(np.float64)
    ref = x64 @ w.T
    n, k = x.shape
    step = np.repeat(np.abs(x64).reshape(n, k // 256, 256).max(axis=2) / 254.0, 256, axis=1)
    rounding = (k / 256 + 8) * 2.0**-22 * (np.abs(x64) + step) @ np.abs(w).T
    bound = step @ np.abs(w).T + rounding + 1e-30
    err = np.abs(got - ref)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert np.all(err <= bound), f"{label}: token {worst[0]} row {worst[1]}: {got[worst]} vs {ref[worst]}"


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("m,k,n", [(1, 256, 1), (7, 512, 2), (13, 1280, 3), (37, 4096, 1), (5, 2304, 23)],
                         ids=lambda v: str(v))
@pytest.mark.parametrize("wtype", K_QUANTS)
def test_k_quant_matvec_bits_equal_across_caps(wtype, m, k, n, threads):
    rng = np.random.default_rng([m, k, n, K_QUANTS.index(wtype)])
    raw, w = _weights(rng, wtype, m, k)
    x = rng.standard_normal((n, k)).astype(np.float32)
    x[:, :256] *= 100.0  # one super-block far larger than the rest
    results = _mul_mat_bits(wtype, raw, m, k, x, threads)
    widest = results[max(results)]
    _check_reference(widest, x, w, wtype)
    for cap, bits in results.items():
        diff = np.argwhere(bits != widest)
        assert diff.size == 0, f"{wtype} {m}x{k}x{n}: {ISA_NAMES[cap]} differs at {len(diff)} results"


@pytest.mark.parametrize("wtype", K_QUANTS)
def test_k_quant_gemm_near_reference(wtype):
    rng = np.random.default_rng(99 + K_QUANTS.index(wtype))
    m, k, n = 35, 1536, 40
    raw, w = _weights(rng, wtype, m, k)
    x = rng.standard_normal((n, k)).astype(np.float32)
    ref = x.astype(np.float64) @ w.T
    bound = (k + 8) * 2.0**-23 * (np.abs(x.astype(np.float64)) @ np.abs(w).T) + 1e-30
    for cap, bits in _mul_mat_bits(wtype, raw, m, k, x, 2).items():
        assert np.all(np.abs(bits.view(np.float32) - ref) <= bound), f"{wtype} {ISA_NAMES.get(cap)} GEMM"


@pytest.mark.parametrize("wtype", K_QUANTS)
def test_k_quant_nan_and_inf_tokens(wtype):
    """A NaN or infinity in a token makes that token's results NaN under every cap; clean tokens keep
    their bits."""
    rng = np.random.default_rng(5)
    m, k = 9, 512
    raw, _ = _weights(rng, wtype, m, k)
    x = rng.standard_normal((4, k)).astype(np.float32)
    x[0, 40] = np.nan
    x[1, 300] = np.inf
    x[2, 7] = -np.inf
    results = _mul_mat_bits(wtype, raw, m, k, x, 2)
    widest = results[max(results)]
    nan = np.isnan(widest.view(np.float32))
    assert nan[:3].all() and not nan[3].any()
    for cap, bits in results.items():  # NaN payloads may differ between paths; positions may not
        assert np.array_equal(np.isnan(bits.view(np.float32)), nan), ISA_NAMES[cap]
        assert np.array_equal(bits[~nan], widest[~nan]), ISA_NAMES[cap]


def _adversarial_tokens(k: int) -> np.ndarray:
    """Tokens whose 256-value blocks stress the q8_K activation quantizer's vector form against the
    scalar one: ties of +max and -max (the first one gives the sign), constant and zero blocks,
    denormals and tiny normals (scale -127/max overflows: the scalar path), codes at exact .5 ties,
    and 1e30 ranges."""
    rng = np.random.default_rng(17)
    rows = []
    for case in range(8):
        x = rng.standard_normal(k).astype(np.float32)
        b = x.reshape(-1, 256)
        if case == 0:
            b[:, 3], b[:, 200] = -5.0, 5.0
        elif case == 1:
            b[:, 3], b[:, 200] = 5.0, -5.0
        elif case == 2:
            b[0], b[-1] = 0.75, 0.0
        elif case == 3:
            b[0] = rng.standard_normal(256).astype(np.float32) * np.float32(1e-42)
            b[-1] = rng.standard_normal(256).astype(np.float32) * np.float32(1e-38)
        elif case == 4:
            b[:] = (np.arange(256) % 255 - 127).astype(np.float32) / 2.0
            b[:, 0] = 127.0 / 2.0 * 2.0
        elif case == 5:
            b *= np.float32(1e30)
        elif case == 6:
            b[:] = np.float32(1.0)
            b[:, 255] = -1.0
        rows.append(x)
    return np.stack(rows)


@pytest.mark.parametrize("wtype", K_QUANTS)
def test_k_quant_adversarial_activations_bits_equal_across_caps(wtype):
    rng = np.random.default_rng(23 + K_QUANTS.index(wtype))
    m, k = 9, 768
    raw, w = _weights(rng, wtype, m, k)
    x = _adversarial_tokens(k)
    results = _mul_mat_bits(wtype, raw, m, k, x, 2)
    widest = results[max(results)]
    assert np.isfinite(widest.view(np.float32)).all()
    for cap, bits in results.items():
        diff = np.argwhere(bits != widest)
        assert diff.size == 0, f"{wtype}: {ISA_NAMES[cap]} differs at tokens {sorted(set(diff[:, 0]))}"


# Byte offsets of each block's half-precision scales (d, and dmin where the type has one), and block sizes.
_SCALE_OFFSETS = {"q2_K": (84, [80, 82]), "q3_K": (110, [108]), "q4_K": (144, [0, 2]), "q5_K": (176, [0, 2]),
                  "q6_K": (210, [208]), "iq4_xs": (136, [0])}


@pytest.mark.parametrize("wtype", K_QUANTS)
def test_k_quant_random_byte_weights_bits_equal_across_caps(wtype):
    """Weights of random bytes (every sub-block scale, minimum, sign and high bit the quantizer rarely
    writes, e.g. q6_K's scale -128 and q3_K's packed extremes), finite half scales of both signs: every
    cap gives the same bits, the 4-row tiles (rows 0..7) and the one-row tail (rows 8..10) alike."""
    rng = np.random.default_rng(41 + K_QUANTS.index(wtype))
    block, offsets = _SCALE_OFFSETS[wtype]
    m, k = 11, 1024
    raw = rng.integers(0, 256, size=m * (k // 256) * block, dtype=np.uint8).reshape(-1, block)
    for off in offsets:
        halves = (rng.uniform(0.001, 0.05, len(raw)) * rng.choice([-1, 1], len(raw))).astype(np.float16)
        raw[:, off:off + 2] = halves.view(np.uint8).reshape(-1, 2)
    raw = raw.tobytes()
    w = mb.dequantize(raw, getattr(mb, wtype), (m, k)).astype(np.float64)
    x = rng.standard_normal((3, k)).astype(np.float32)
    results = _mul_mat_bits(wtype, raw, m, k, x, 2)
    widest = results[max(results)]
    _check_reference(widest, x, w, wtype)
    for cap, bits in results.items():
        diff = np.argwhere(bits != widest)
        assert diff.size == 0, f"{wtype}: {ISA_NAMES[cap]} differs at {diff[:4].tolist()}"
