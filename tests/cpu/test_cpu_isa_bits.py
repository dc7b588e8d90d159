"""The CPU device's quantized-weight MUL_MAT gives the same bits under every instruction-set cap.

With q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl and mxfp4 weights and few tokens, the activations are
quantized to 8 bits and each 32-element block's products are summed in integers, which every path
(portable, AVX2, AVX2 with AVX512-VNNI or AVX-VNNI byte dot products, one-row and four-row kernels) does exactly; the
floats are then combined in one order (src/cpu/kernels/int8_dot_x86.h). So the results must agree bit
for bit across max_isa 0 (portable), 1 (avx2; AVX-VNNI where the CPU has it) and 2 (avx512;
AVX512-VNNI where the CPU has it), for one token, two, and any count up to the GEMM switch, for odd
row counts and K up to 4096. Many tokens take the f32 GEMM on dequantized weights: its AVX2 and
AVX-512 tiles both add k in order with fused multiply-adds and agree bit for bit; the portable tile
multiplies and adds apart (a fused one is a library call per product at baseline x86-64), so it is
checked against the float64 reference only.

Self-contained (numpy, pytest, metal_backend) so that it can run from any directory on a host with
other SIMD sets: `python3 -m pytest -q path/to/tests/test_cpu_isa_bits.py`. Results are read as raw
bytes from the buffer, never formatted.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import metal_backend as mb

CPU = mb.device("CPU")
ISA_NAMES = {0: "portable", 1: "avx2", 2: "avx512"}
QUANT = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl", "mxfp4"]
# At this many tokens (and above) quantized weights take the GEMM path (mul_mat.cpp,
# kGemmMinTokensConverted).
GEMM_TOKENS = 24


def _caps() -> list[int]:
    """Every cap up to what the kernels use without one (none where NEON is not capped)."""
    current = {v: k for k, v in ISA_NAMES.items()}.get(CPU.props.extra["isa_hardware"])
    return [] if current is None else list(range(min(current, int(CPU.props.extra["max_isa"])) + 1))


CAPS = _caps()
pytestmark = pytest.mark.skipif(len(CAPS) < 2, reason="only one CPU kernel set to compare on this machine")


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


class MulMat:
    """mul_mat(w, x) of one quantized weight matrix on the CPU backend, computed under any cap."""

    def __init__(self, wtype: str, w_raw: bytes, m: int, k: int, x: np.ndarray, threads: int):
        self.ctx = mb.Context()
        self.tw = self.ctx.tensor(getattr(mb, wtype), (m, k))
        self.tx = self.ctx.tensor(mb.f32, x.shape)
        self.out = mb.ops.mul_mat(self.tw, self.tx)
        self.backend = CPU.init_backend(f"n_threads={threads}")
        self.buffer = mb.alloc_ctx_tensors(self.ctx, self.backend)
        self.tw.set(w_raw)
        self.tx.set(np.ascontiguousarray(x, dtype=np.float32))
        self.graph = mb.Graph(self.out)
        self.shape = (x.shape[0], m)

    def bits(self, cap: int) -> np.ndarray:
        """The result's float32 bit patterns (tokens x rows) under max_isa = cap."""
        before = int(CPU.props.extra["max_isa"])
        CPU.set_prop("max_isa", cap)
        try:
            assert CPU.props.extra["isa"] == ISA_NAMES[cap]
            self.backend.graph_compute(self.graph)
        finally:
            CPU.set_prop("max_isa", before)
        # Through the buffer: Tensor.get_bytes formats the tensor's description, which crashed on a
        # host whose static libstdc++ breaks number formatting.
        raw = self.out.buffer.get(self.out.offset, 4 * self.shape[0] * self.shape[1])
        return np.frombuffer(raw, dtype=np.uint32).reshape(self.shape).copy()


def _weights(rng, wtype: str, m: int, k: int):
    """Random weights with a spread of block scales, their bytes, and their dequantized values."""
    w = (rng.standard_normal((m, k)) * rng.uniform(0.01, 4.0, (m, 1))).astype(np.float32)
    raw = mb.quantize(w, getattr(mb, wtype))
    return raw, mb.dequantize(raw, getattr(mb, wtype), (m, k)).astype(np.float64)


def _activations(rng, n: int, k: int) -> np.ndarray:
    x = rng.standard_normal((n, k)).astype(np.float32)
    x[:, : min(k, 32)] *= 100.0  # one block far larger than the rest
    return x


def _check_reference(got_bits: np.ndarray, x: np.ndarray, w: np.ndarray, label: str):
    """Against float64 with the error the 8-bit activations allow: element e of a block with largest
    magnitude a is off by at most a/254 (x * 127/a rounded to nearest), so a result by at most the sum
    of |w| times that; plus float32 rounding, a few ulps per block of terms that the split of a value
    into d*c and m (q4_1, q5_1) can make up to three times the block's largest |w| each."""
    got = got_bits.view(np.float32).astype(np.float64)
    x64 = x.astype(np.float64)
    ref = x64 @ w.T
    n, k = x.shape
    amax = np.abs(x64).reshape(n, k // 32, 32).max(axis=2)
    step = np.repeat(amax / 254.0, 32, axis=1)
    wmax = np.repeat(np.abs(w).reshape(w.shape[0], k // 32, 32).max(axis=2), 32, axis=1)
    rounding = (k / 32 + 8) * 2.0**-23 * ((np.abs(x64) + step) @ (3.0 * wmax).T)
    bound = step @ np.abs(w).T + rounding + 1e-30
    err = np.abs(got - ref)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert np.all(err <= bound), f"{label}: token {worst[0]} row {worst[1]}: {got[worst]} vs {ref[worst]}"


# (rows, K, tokens): odd row counts (four-row tiles plus one-row leftovers), one and two tokens (the two
# tiles), three and five (a pair plus a single), up to the GEMM switch; K from one block to 4096, odd
# block counts too (416 = 13 blocks and 160 = 5: the table tiles' groups of eight, four and the rest; 384 = 12:
# whisper tiny's width, eight and four).
MATVEC_SHAPES = [
    (1, 32, 1), (3, 64, 1), (7, 96, 2), (13, 416, 1), (13, 416, 2), (9, 384, 2), (5, 1024, 3), (67, 160, 5),
    (37, 4096, 1), (9, 4096, 2), (21, 1568, GEMM_TOKENS - 1),
]
GEMM_SHAPES = [(19, 320, GEMM_TOKENS), (35, 1056, 40)]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("m,k,n", MATVEC_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("wtype", QUANT)
def test_matvec_bits_equal_across_caps(wtype, m, k, n, threads):
    rng = np.random.default_rng([m, k, n, QUANT.index(wtype)])
    raw, w = _weights(rng, wtype, m, k)
    x = _activations(rng, n, k)
    mm = MulMat(wtype, raw, m, k, x, threads)
    results = {cap: mm.bits(cap) for cap in CAPS}
    widest = results[CAPS[-1]]
    _check_reference(widest, x, w, f"{wtype} {ISA_NAMES[CAPS[-1]]}")
    for cap in CAPS[:-1]:
        diff = np.argwhere(results[cap] != widest)
        assert diff.size == 0, (f"{wtype} {m}x{k}x{n}: {ISA_NAMES[cap]} differs from {ISA_NAMES[CAPS[-1]]} at "
                                f"{len(diff)} of {widest.size} results, first (token, row) {tuple(diff[0])}")


@pytest.mark.parametrize("m,k,n", GEMM_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("wtype", QUANT)
def test_many_tokens_bits_equal_across_simd_caps(wtype, m, k, n):
    rng = np.random.default_rng([m, k, n, 7, QUANT.index(wtype)])
    raw, w = _weights(rng, wtype, m, k)
    x = rng.standard_normal((n, k)).astype(np.float32)
    mm = MulMat(wtype, raw, m, k, x, 3)
    results = {cap: mm.bits(cap) for cap in CAPS}
    ref = x.astype(np.float64) @ w.T
    bound = (k + 8) * 2.0**-23 * (np.abs(x.astype(np.float64)) @ np.abs(w).T) + 1e-30
    for cap, bits in results.items():
        got = bits.view(np.float32).astype(np.float64)
        assert np.all(np.abs(got - ref) <= bound), f"{wtype} {ISA_NAMES[cap]} off the reference"
    simd = [cap for cap in CAPS if cap >= 1]
    for cap in simd[:-1]:
        assert np.array_equal(results[cap], results[simd[-1]]), (
            f"{wtype} {m}x{k}x{n}: {ISA_NAMES[cap]} GEMM differs from {ISA_NAMES[simd[-1]]}")


@pytest.mark.parametrize("wtype", QUANT)
def test_equal_rows_and_tokens_give_equal_bits(wtype):
    """One weight row repeated 7 times and one token 3 times: rows 0-3 go through the four-row kernel,
    4-6 through the one-row kernel, tokens 0-1 through the two-token tile, token 2 through the one-token
    tile, and all 21 results must be the same float under each cap."""
    rng = np.random.default_rng(11 + QUANT.index(wtype))
    k = 1312
    raw_row, _ = _weights(rng, wtype, 1, k)
    x = np.repeat(_activations(rng, 1, k), 3, axis=0)
    mm = MulMat(wtype, raw_row * 7, 7, k, x, 2)
    for cap in CAPS:
        bits = mm.bits(cap)
        assert np.all(bits == bits[0, 0]), f"{wtype} under {ISA_NAMES[cap]}: {np.unique(bits).size} distinct results"


@pytest.mark.parametrize("wtype", QUANT)
def test_nan_and_inf_blocks_agree_across_caps(wtype):
    """A NaN in a token reaches its results; NaN and infinite tokens give NaN in the same places under
    every cap, and the clean token's results keep their bits."""
    rng = np.random.default_rng(5)
    m, k = 9, 256
    raw, _ = _weights(rng, wtype, m, k)
    x = _activations(rng, 4, k)
    x[0, 40] = np.nan
    x[1, 200] = np.inf
    x[2, 7] = -np.inf
    mm = MulMat(wtype, raw, m, k, x, 2)
    results = {cap: mm.bits(cap) for cap in CAPS}
    widest = results[CAPS[-1]]
    nan = np.isnan(widest.view(np.float32))
    assert nan[0].all() and not nan[3].any()
    for cap in CAPS[:-1]:
        got = results[cap]
        assert np.array_equal(np.isnan(got.view(np.float32)), nan), ISA_NAMES[cap]
        assert np.array_equal(got[~nan], widest[~nan]), ISA_NAMES[cap]


def test_q8_dot_prop_follows_the_cap():
    """extra["q8_dot"] names the byte dot product in use: AVX512-VNNI only at the avx512 level on a CPU
    with AVX512-VNNI and AVX512VL; else AVX-VNNI (VEX) at the avx2 level and above on a CPU with it."""
    flags = _cpu_flags()
    before = int(CPU.props.extra["max_isa"])
    try:
        for cap in CAPS:
            CPU.set_prop("max_isa", cap)
            want = ISA_NAMES[min(cap, 1)]
            if cap == 2 and flags and {"avx512_vnni", "avx512vl"} <= flags:
                want = "avx512vnni"
            elif cap >= 1 and "avx_vnni" in flags:
                want = "avxvnni"
            assert CPU.props.extra["q8_dot"] == want, (cap, CPU.props.extra["q8_dot"])
    finally:
        CPU.set_prop("max_isa", before)


def _gelu_erf_bits(x: np.ndarray, threads: int, cap: int) -> np.ndarray:
    """GELU_ERF of x (contiguous f32) on the CPU backend under max_isa = cap, as float32 bit patterns."""
    ctx = mb.Context()
    tx = ctx.tensor(mb.f32, x.shape)
    out = mb.ops.gelu_erf(tx)
    backend = CPU.init_backend(f"n_threads={threads}")
    buf = mb.alloc_ctx_tensors(ctx, backend)
    tx.set(np.ascontiguousarray(x, dtype=np.float32))
    before = int(CPU.props.extra["max_isa"])
    CPU.set_prop("max_isa", cap)
    try:
        assert CPU.props.extra["isa"] == ISA_NAMES[cap]
        backend.graph_compute(mb.Graph(out))
    finally:
        CPU.set_prop("max_isa", before)
    raw = out.buffer.get(out.offset, 4 * x.size)
    del buf
    return np.frombuffer(raw, dtype=np.uint32).reshape(x.shape).copy()


@pytest.mark.skipif(max(CAPS, default=0) < 2, reason="no AVX-512 kernels on this machine")
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 31, 33, 1536 * 7 + 5])
def test_gelu_erf_avx512_bits_equal_avx2(n, threads):
    """GELU_ERF's 16-lane body (AVX-512) runs gelu_erf8's operations in wider registers: the same bits
    as the AVX2 path for every element, tails of any length (masked lanes) included, and within the
    polynomial's error of float64 erf."""
    rng = np.random.default_rng(n * 10 + threads)
    x = (rng.standard_normal(n) * rng.choice([0.01, 1.0, 4.0, 30.0], n)).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 88.0, -88.0, 1e30, -1e30,
                        -5.5, 5.5, -12.0], np.float32)
    x[: min(n, special.size)] = special[: min(n, special.size)]
    wide = _gelu_erf_bits(x, threads, 2)
    avx2 = _gelu_erf_bits(x, threads, 1)
    assert np.array_equal(wide, avx2)
    got = wide.view(np.float32).astype(np.float64)
    xd = x.astype(np.float64)
    # erfc, not 1 + erf: the far negative tail would cancel to nothing in float64 too.
    ref = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) if np.isfinite(v) else np.nan for v in xd])
    fin = np.isfinite(xd)
    assert np.isnan(got[np.isnan(xd)]).all()
    # Relative error grows in the far negative tail with the float32 rounding of z * z (about 7e-6 at x = -10).
    assert np.allclose(got[fin], ref[fin], rtol=1e-5, atol=1e-30)
