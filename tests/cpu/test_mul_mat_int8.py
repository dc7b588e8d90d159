"""mul_mat(w, x, compute_type="int8") on the CPU: 8-bit activations against quantized weights at
every token count (the many-token "int8 GEMM" included), against a numpy model of the same
quantized arithmetic, under every instruction-set cap.

The reference parses ggml's block layouts itself (q4_0 q4_1 q5_0 q5_1 q8_0), quantizes the
activations as the kernels are documented to (src/cpu/kernels/vec_dot.h: per 32 values d = amax/127,
codes x * (127/amax) rounded to nearest even, clamped to +-127, s = d * sum(codes)), sums each
block's integer products exactly (in the kernels' eight lanes of four) and the float terms in
float64. What remains between the two is float32 rounding of the scaled lane sums, bounded by a few
ulps of the sum of |lane terms|.
"""
from __future__ import annotations

import os
import platform

import numpy as np
import pytest

import metal_backend as mb

CPU = mb.device("CPU")
QUANT = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]
ISA_NAMES = {0: "portable", 1: "avx2", 2: "avx512"}
# Block bytes: (d, m?, qh?, qs) as ggml lays them out.
BLOCK_BYTES = {"q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "q8_0": 34}


def _caps() -> list[int]:
    current = {v: k for k, v in ISA_NAMES.items()}.get(CPU.props.extra["isa_hardware"])
    return [None] if current is None else list(range(min(current, int(CPU.props.extra["max_isa"])) + 1))


CAPS = _caps()


def decode_blocks(raw: bytes, wtype: str, m: int, k: int):
    """ggml blocks -> (codes int64 (m, k) as the value's integer part, d (m, k/32), mo (m, k/32)):
    value = d * code + mo, with mo = m for the _1 types, 0 for the others."""
    nb = k // 32
    b = np.frombuffer(raw, np.uint8).reshape(m, nb, BLOCK_BYTES[wtype])
    d = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float64)
    mo = np.zeros_like(d)
    if wtype == "q8_0":
        codes = b[..., 2:34].copy().view(np.int8).astype(np.int64)
        return codes.reshape(m, k), d, mo
    pos = 2
    if wtype in ("q4_1", "q5_1"):
        mo = b[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float64)
        pos = 4
    qh = None
    if wtype in ("q5_0", "q5_1"):
        qh = b[..., pos:pos + 4].copy().view(np.uint32)[..., 0].astype(np.int64)
        pos += 4
    qs = b[..., pos:pos + 16].astype(np.int64)
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # elements 0..15 low nibbles, 16..31 high
    if qh is not None:
        codes |= ((qh[..., None] >> np.arange(32)) & 1) << 4
    if wtype == "q4_0":
        codes -= 8
    if wtype == "q5_0":
        codes -= 16
    return codes.reshape(m, k), d, mo


def quantize_activations(x: np.ndarray):
    """f32 (n, k) -> codes int64 (n, k), d float32 (n, k/32), s float32 (n, k/32)."""
    n, k = x.shape
    blocks = x.astype(np.float32).reshape(n, k // 32, 32)
    amax = np.abs(blocks).max(axis=2)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, np.float32(127.0) / amax, np.float32(0.0)).astype(np.float32)
    codes = np.clip(np.rint(blocks * inv[..., None]), -127, 127).astype(np.int64)
    s = (d * codes.sum(axis=2).astype(np.float32)).astype(np.float32)
    return codes.reshape(n, k), d, s


def reference(raw: bytes, wtype: str, m: int, k: int, x: np.ndarray):
    """(result float64 (n, m), sum of |lane terms| (n, m)) of the quantized arithmetic."""
    wc, wd, wm = decode_blocks(raw, wtype, m, k)
    ac, ad, as_ = quantize_activations(x)
    n, nb = x.shape[0], k // 32
    # Exact integer sums of each 4-product lane (the kernels' 8 lanes per block).
    lanes = np.einsum("nbli,mbli->nmbl", ac.reshape(n, nb, 8, 4), wc.reshape(m, nb, 8, 4))
    scale = (wd[None, :, :].astype(np.float32) * ad[:, None, :]).astype(np.float64)  # d * D in float32
    terms = lanes * scale[..., None]
    offsets = wm[None, :, :] * as_[:, None, :].astype(np.float64)
    return (terms.sum(axis=(2, 3)) + offsets.sum(axis=2),
            np.abs(terms).sum(axis=(2, 3)) + np.abs(offsets).sum(axis=2))


class Product:
    def __init__(self, wtype: str, raw: bytes, m: int, k: int, x: np.ndarray, threads: int, compute_type: str):
        self.ctx = mb.Context()
        self.w = self.ctx.tensor(getattr(mb, wtype), (m, k))
        self.x = self.ctx.tensor(mb.f32, x.shape)
        self.out = mb.ops.mul_mat(self.w, self.x, compute_type=compute_type)
        self.backend = CPU.init_backend(f"n_threads={threads}")
        self.buffer = mb.alloc_ctx_tensors(self.ctx, self.backend)
        self.w.set(raw)
        self.x.set(np.ascontiguousarray(x, dtype=np.float32))
        self.graph = mb.Graph(self.out)

    def bits(self, cap) -> np.ndarray:
        before = int(CPU.props.extra["max_isa"])
        if cap is not None:
            CPU.set_prop("max_isa", cap)
        try:
            self.backend.graph_compute(self.graph)
        finally:
            CPU.set_prop("max_isa", before)
        return self.out.get().view(np.uint32).copy()


def _data(rng, wtype: str, m: int, k: int, n: int):
    w = (rng.standard_normal((m, k)) * rng.uniform(0.01, 4.0, (m, 1))).astype(np.float32)
    raw = bytes(mb.quantize(w, getattr(mb, wtype)))
    x = rng.standard_normal((n, k)).astype(np.float32)
    x[:, :32] *= 50.0  # one block far larger than the rest
    if k > 32:
        x[0, 32:64] = 0.0  # an all-zero block (d = 0)
    return raw, x


# (rows, K, tokens): past the f32 GEMM switch (24), past one token block (64) with a partial one,
# odd row counts (four-row tiles and one-row leftovers), K of one block to 1568.
SHAPES = [(7, 64, 24), (21, 1568, 30), (37, 384, 130), (3, 32, 65), (64, 128, 200)]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("m,k,n", SHAPES, ids=str)
@pytest.mark.parametrize("wtype", QUANT)
def test_int8_matches_quantized_reference_on_every_cap(wtype, m, k, n, threads):
    rng = np.random.default_rng([m, k, n, QUANT.index(wtype)])
    raw, x = _data(rng, wtype, m, k, n)
    product = Product(wtype, raw, m, k, x, threads, "int8")
    ref, magnitude = reference(raw, wtype, m, k, x)
    bound = (k / 32 + 8) * 2.0**-23 * magnitude + 1e-30
    first = None
    for cap in CAPS:
        bits = product.bits(cap)
        got = bits.view(np.float32).astype(np.float64)
        err = np.abs(got - ref)
        worst = np.unravel_index(np.argmax(err / bound), err.shape)
        assert np.all(err <= bound), (f"cap {cap}: token {worst[0]} row {worst[1]}: {got[worst]} vs {ref[worst]} "
                                      f"(bound {bound[worst]:.3g})")
        # The kernels sum the floats in one documented order (int8_dot_x86.h): every cap, bit for bit.
        if first is None:
            first = bits
        else:
            assert np.array_equal(bits, first), f"cap {cap} differs from cap {CAPS[0]}"


# The int8 GEMM for q8_0 weights (src/cpu/kernels/gemm_q8_0.h) is built for x86; elsewhere q8_0 takes
# the matrix-vector route like the other types.
INT8_GEMM = platform.machine().lower() in ("x86_64", "amd64")
# 5 where the CPU has AVX512-VNNI (the few-token kernel), else 6; 0 where the GEMM is not built.
INT8_GEMM_MIN_TOKENS = int(CPU.props.extra["int8_gemm_min_tokens"]) or 6


def test_int8_gemm_min_tokens_prop():
    few = os.environ.get("MB_INT8_FEW_TOKENS") != "0"  # the kernel's off switch (benchmarks)
    vnni512 = CPU.props.extra["isa_hardware"] == "avx512" and _has_avx512_vnni()
    want = 0 if not INT8_GEMM else 5 if few and vnni512 else 6
    assert int(CPU.props.extra["int8_gemm_min_tokens"]) == want


def _has_avx512_vnni() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return CPU.props.extra["q8_dot"] == "avx512vnni"
    return " avx512_vnni" in flags and " avx512vl" in flags


def gemm_q8_0_order(raw: bytes, m: int, k: int, x: np.ndarray) -> np.ndarray:
    """The int8 GEMM's documented arithmetic, float32 (n, m): per row and token acc = 0, then per block
    acc = fma(float(dot), float32(d * D), acc), dot the block's exact integer sum. The fused multiply-add
    is emulated in long double (64-bit significand on x86): dot * scale is exact there (at most 20 + 24
    bits) and so is the sum but for operands 2^40 apart, whose double rounding could only matter on
    an exact float32 tie."""
    assert np.finfo(np.longdouble).nmant >= 63
    wc, wd, _ = decode_blocks(raw, "q8_0", m, k)
    ac, ad, _ = quantize_activations(x)
    n, nb = x.shape[0], k // 32
    dots = np.einsum("nbi,mbi->nmb", ac.reshape(n, nb, 32), wc.reshape(m, nb, 32))
    scale = wd.astype(np.float32)[None, :, :] * ad[:, None, :]
    acc = np.zeros((n, m), np.float32)
    for i in range(nb):
        fused = dots[..., i].astype(np.longdouble) * scale[..., i].astype(np.longdouble) + acc.astype(np.longdouble)
        acc = fused.astype(np.float32)
    return acc


@pytest.mark.parametrize("wtype", QUANT)
def test_int8_gemm_equals_each_tokens_matrix_vector_product(wtype):
    # The many-token int8 path is the matrix-vector arithmetic over blocks of tokens: each token's
    # row equals, bit for bit, what that token alone gets (one token always quantizes activations).
    # q8_0 on x86 has its own GEMM and order instead: each token's row is that order, bit for bit.
    rng = np.random.default_rng(QUANT.index(wtype))
    m, k, n = 45, 256, 70
    raw, x = _data(rng, wtype, m, k, n)
    many = Product(wtype, raw, m, k, x, 2, "int8").bits(None)
    if wtype == "q8_0" and INT8_GEMM:
        want = gemm_q8_0_order(raw, m, k, x).view(np.uint32)
        for cap in CAPS:
            assert np.array_equal(Product(wtype, raw, m, k, x, 2, "int8").bits(cap), want), f"cap {cap}"
        return
    for t in (0, 1, 33, 64, 69):
        one = Product(wtype, raw, m, k, x[t:t + 1], 2, "float32").bits(None)
        assert np.array_equal(many[t], one[0]), f"token {t}"


# Token counts on both sides of every switch between kernels (the matrix-vector ones, the few-token
# kernel at 5-8 and 17-48 but 32 where the CPU has AVX512-VNNI, tokens in the lanes otherwise), rows
# on both sides of the 4-row tiles and the few-token kernel's 16-row panels.
@pytest.mark.parametrize("n", [4, 5, 6, 8, 9, 16, 17, 20, 31, 32, 33, 48, 49])
@pytest.mark.parametrize("m", [1, 4, 6, 8, 13, 16, 17, 21, 35])
@pytest.mark.parametrize("k", [32, 96])
def test_int8_gemm_token_and_row_leftovers(m, n, k):
    # Tiles are 4 rows x 16 tokens (two groups of 8), and 8 rows x one group when every token fits
    # one group (AVX2); with AVX512-VNNI 4 rows x up to 3 vectors of 16 tokens, or panels of 16 rows
    # against tiles of up to 8 tokens: single rows, tiles and panels with leftovers, partial groups,
    # on both sides of the GEMM's token threshold, against the reference on every cap.
    rng = np.random.default_rng([m, n, k])
    raw, x = _data(rng, "q8_0", m, k, n)
    # Code -128 (ggml's quantizer never writes it, a file may hold it): |code| is 128 as an unsigned
    # byte, the kernels' sign trick must stay exact. First row's first code, last row's last code.
    raw = bytearray(raw)
    raw[2] = 0x80
    raw[-1] = 0x80
    raw = bytes(raw)
    product = Product("q8_0", raw, m, k, x, 1, "int8")
    ref, magnitude = reference(raw, "q8_0", m, k, x)
    bound = (k / 32 + 8) * 2.0**-23 * magnitude + 1e-30
    first = product.bits(CAPS[0])
    for cap in CAPS:
        bits = product.bits(cap)
        assert np.array_equal(bits, first), f"cap {cap}"
        assert np.all(np.abs(bits.view(np.float32) - ref) <= bound), f"cap {cap}"
    if n >= INT8_GEMM_MIN_TOKENS and INT8_GEMM:
        assert np.array_equal(first, gemm_q8_0_order(raw, m, k, x).view(np.uint32))


def test_int8_infinite_activations_keep_their_sign_on_every_cap():
    # A block holding -inf has amax = inf: its inverse scale is 0, -inf * 0 is NaN, and the quantizer
    # codes NaN as -127 (the AVX2 form once wrote -128, which the sign trick cannot negate: -inf times
    # a negative weight came out -inf). With D = inf the GEMM's one integer per block gives the float
    # sign: -inf * w for w < 0 is +inf, +inf * w is -inf ... as long as the other codes are 0.
    m, k, n = 4, 64, 16
    w = np.full((m, k), 0.5, np.float32)
    w[:, 0] = -1.0
    raw = bytes(mb.quantize(w, mb.q8_0))
    x = np.ones((n, k), np.float32)
    x[:, 0] = -np.inf
    x[:, 1:32] = 0.0
    x[1, 0] = np.nan  # a NaN block: NaN out
    product = Product("q8_0", raw, m, k, x, 2, "int8")
    first = product.bits(CAPS[0])
    for cap in CAPS:
        assert np.array_equal(product.bits(cap), first), f"cap {cap}"
    got = first.view(np.float32)
    assert np.isnan(got[1]).all()
    if INT8_GEMM:
        rows = [t for t in range(n) if t != 1]
        assert np.all(got[rows] == np.inf), got[rows]


@pytest.mark.parametrize("wtype", ["q4_K", "q6_K", "iq4_nl", "iq4_xs", "mxfp4"])
def test_int8_other_quantized_types_equal_their_matrix_vector_products(wtype):
    # The k-quants (q8_K activations) and the other types take the same route: every token's row of
    # the many-token product is, bit for bit, that token's own matrix-vector product.
    rng = np.random.default_rng(11)
    m, k, n = 13, 512, 70
    w = rng.standard_normal((m, k)).astype(np.float32)
    raw = bytes(mb.quantize(w, getattr(mb, wtype)))
    x = rng.standard_normal((n, k)).astype(np.float32)
    many = Product(wtype, raw, m, k, x, 2, "int8").bits(None)
    for t in (0, 63, 64, 69):
        one = Product(wtype, raw, m, k, x[t:t + 1], 2, "float32").bits(None)
        assert np.array_equal(many[t], one[0]), f"token {t}"


def test_int8_broadcast_batches():
    # Weights shared by several activation matrices (ggml's broadcast over dims 2 and 3).
    rng = np.random.default_rng(7)
    m, k, n = 9, 96, 40
    w = rng.standard_normal((2, m, k)).astype(np.float32)
    raws = [bytes(mb.quantize(w[i], mb.q8_0)) for i in range(2)]
    x = rng.standard_normal((4, n, k)).astype(np.float32)
    ctx = mb.Context()
    tw = ctx.tensor(mb.q8_0, (2, m, k))
    tx = ctx.tensor(mb.f32, (4, n, k))
    out = mb.ops.mul_mat(tw, tx, compute_type="int8")
    backend = CPU.init_backend("n_threads=2")
    _buf = mb.alloc_ctx_tensors(ctx, backend)
    tw.set(raws[0] + raws[1])
    tx.set(x)
    backend.graph_compute(mb.Graph(out))
    got = out.get().astype(np.float64)
    for b in range(4):
        ref, magnitude = reference(raws[b // 2], "q8_0", m, k, x[b])
        assert np.all(np.abs(got[b] - ref) <= (k / 32 + 8) * 2.0**-23 * magnitude + 1e-30), f"batch {b}"


def test_int8_is_more_than_float32_error_but_bounded():
    # The int8 path differs from the float32 path (which keeps activations exact): the difference
    # is the activations' rounding, at most amax/254 per element.
    rng = np.random.default_rng(3)
    m, k, n = 16, 128, 48
    raw, x = _data(rng, "q8_0", m, k, n)
    f32 = Product("q8_0", raw, m, k, x, 2, "float32").bits(None).view(np.float32).astype(np.float64)
    i8 = Product("q8_0", raw, m, k, x, 2, "int8").bits(None).view(np.float32).astype(np.float64)
    w = mb.dequantize(raw, mb.q8_0, (m, k)).astype(np.float64)
    step = np.repeat(np.abs(x).reshape(n, k // 32, 32).max(axis=2) / 254.0, 32, axis=1)
    bound = step @ np.abs(w).T * 1.001 + 1e-4 * (np.abs(x) @ np.abs(w).T)
    assert not np.array_equal(f32, i8)
    assert np.all(np.abs(f32 - i8) <= bound)


def test_int8_needs_quantized_weights_and_a_known_compute_type():
    ctx = mb.Context()
    w = ctx.tensor(mb.f16, (8, 64))
    x = ctx.tensor(mb.f32, (30, 64))
    with pytest.raises(mb.InvalidArgumentError, match="int8 activations need quantized weights"):
        mb.ops.mul_mat(w, x, compute_type="int8")
    q = ctx.tensor(mb.q8_0, (8, 64))
    with pytest.raises(mb.InvalidArgumentError, match='compute_type must be "float32" or "int8", got "int4"'):
        mb.ops.mul_mat(q, x, compute_type="int4")
    assert mb.ops.mul_mat(q, x, compute_type="int8").op_params[1] == 1
    assert mb.ops.mul_mat(q, x).op_params[1] == 0
