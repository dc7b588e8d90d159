"""MetalSim: flash attention (both kernel paths and the vector path's scratch area), ROPE, and the
layout ops (CONCAT, REPEAT, PAD), each against an independent numpy reference in float64."""
from __future__ import annotations

import math

import numpy as np
import pytest

import metal_backend as mb

pytestmark = pytest.mark.skipif(
    "MetalSim" not in [d.name for d in mb.devices()], reason="built without the MetalSim device"
)

VEC_MAX_ROWS = 20  # n_q below this takes the vector path (METAL-SPEC)
VEC_WORKGROUPS = 32


@pytest.fixture(scope="module")
def sim():
    return mb.device("MetalSim")


@pytest.fixture(params=[0, 1], ids=["lockstep", "run-ahead"])
def backend(sim, request):
    be = sim.init_backend()
    be.options["schedule"] = request.param
    return be


# ---------------------------------------------------------------- flash attention


def alibi_slopes(max_bias: float, n_head: int) -> np.ndarray:
    if max_bias <= 0:
        return np.ones(n_head)
    n_log2 = 1 << int(math.floor(math.log2(n_head)))
    m0 = 2.0 ** (-max_bias / n_log2)
    m1 = 2.0 ** (-(max_bias / 2.0) / n_log2)
    return np.array([m0 ** (h + 1) if h < n_log2 else m1 ** (2 * (h - n_log2) + 1) for h in range(n_head)])


def attention_ref(q, k, v, mask, scale, max_bias, softcap):
    """q (B,H,n_q,D), k/v (B_kv,H_kv,n_kv,D), mask (B_m,H_m,>=n_q,n_kv) -> (B,n_q,H,D), float64."""
    B, H, n_q, _ = q.shape
    rb, rh = B // k.shape[0], H // k.shape[1]
    k = np.repeat(np.repeat(k.astype(np.float64), rb, axis=0), rh, axis=1)
    v = np.repeat(np.repeat(v.astype(np.float64), rb, axis=0), rh, axis=1)
    s = (q.astype(np.float64) @ k.transpose(0, 1, 3, 2)) * scale
    if softcap > 0:
        s = softcap * np.tanh(s / softcap)
    if mask is not None:
        m = mask.astype(np.float64)[:, :, :n_q, :]
        m = np.tile(m, (B // m.shape[0], H // m.shape[1], 1, 1))
        with np.errstate(invalid="ignore"):
            s = s + alibi_slopes(max_bias, H)[None, :, None, None] * m
    mx = s.max(axis=-1, keepdims=True)
    finite = np.isfinite(mx)
    p = np.where(finite, np.exp(s - np.where(finite, mx, 0.0)), 0.0)
    den = p.sum(axis=-1, keepdims=True)
    out = (p @ v) / np.where(den == 0, 1.0, den)
    return out.transpose(0, 2, 1, 3)


def make_inputs(rng, D, n_q, n_kv, H, H_kv, B, kv_type, mask_heads, mask_type=np.float16, masked_frac=0.2):
    q = rng.standard_normal((B, H, n_q, D)).astype(np.float32)
    dt = np.float16 if kv_type == "f16" else np.float32
    k = rng.standard_normal((B, H_kv, n_kv, D)).astype(dt)
    v = rng.standard_normal((B, H_kv, n_kv, D)).astype(dt)
    mask = None
    if mask_heads:
        n_q_pad = (n_q + 7) // 8 * 8
        mask = rng.uniform(-1.0, 1.0, (1, mask_heads, n_q_pad, n_kv))
        mask[rng.uniform(size=mask.shape) < masked_frac] = -np.inf
        mask = mask.astype(mask_type)
    return q, k, v, mask


KV_TYPES = {"f16": mb.f16, "f32": mb.f32, "q4_0": mb.q4_0, "q4_1": mb.q4_1, "q5_0": mb.q5_0, "q5_1": mb.q5_1,
            "q8_0": mb.q8_0}


def build_fa(q, k, v, mask, kv_type, scale, max_bias, softcap, mask_type="f16"):
    ctx = mb.Context()
    tq = ctx.tensor(mb.f32, q.shape, name="q")
    t = KV_TYPES[kv_type]
    tk = ctx.tensor(t, k.shape, name="k")
    tv = ctx.tensor(t, v.shape, name="v")
    tm = None
    if mask is not None:
        tm = ctx.tensor(mb.f16 if mask_type == "f16" else mb.f32, mask.shape, name="mask")
    out = mb.ops.flash_attn_ext(tq, tk, tv, tm, scale, max_bias, softcap)
    return ctx, (tq, tk, tv, tm), out


def set_inputs(tensors, arrays):
    for t, a in zip(tensors, arrays):
        if t is not None:
            t.set(a)


def run_fa(backend, q, k, v, mask, kv_type, scale=0.125, max_bias=0.0, softcap=0.0, mask_type="f16"):
    """The result and the k, v values as stored (quantized types lose precision when set)."""
    ctx, ins, out = build_fa(q, k, v, mask, kv_type, scale, max_bias, softcap, mask_type)
    mb.alloc_ctx_tensors(ctx, backend)
    set_inputs(ins, (q, k, v, mask))
    assert backend.device.supports_op(out)
    backend.graph_compute(mb.Graph(out))
    return out.get(), ins[1].get(), ins[2].get()


FA_CASES = [
    # D, n_q, n_kv, H, H_kv, B, kv type, mask heads (0: none), max_bias, softcap
    pytest.param(64, 1, 100, 6, 6, 1, "f16", 0, 0.0, 0.0, id="vec-decode-d64"),
    pytest.param(64, 5, 77, 4, 2, 1, "f16", 1, 8.0, 0.0, id="vec-gqa-mask-alibi"),
    pytest.param(40, 7, 33, 3, 1, 1, "f32", 3, 0.0, 30.0, id="vec-d40-f32-headmask-softcap"),
    pytest.param(256, 19, 40, 2, 1, 2, "f16", 1, 0.0, 0.0, id="vec-d256-batch"),
    pytest.param(64, 37, 77, 4, 2, 1, "f16", 1, 0.0, 0.0, id="tiled-gqa-mask"),
    pytest.param(64, 20, 1, 2, 2, 2, "f16", 0, 0.0, 0.0, id="tiled-one-key"),
    pytest.param(80, 33, 3, 2, 2, 1, "f32", 0, 0.0, 0.0, id="tiled-d80-f32"),
    pytest.param(96, 64, 50, 5, 5, 1, "f16", 5, 2.0, 0.0, id="tiled-d96-headmask-alibi"),
    pytest.param(128, 40, 70, 4, 2, 1, "f16", 1, 4.0, 20.0, id="tiled-d128-gqa-alibi-softcap"),
    pytest.param(256, 24, 40, 2, 1, 1, "f32", 1, 0.0, 0.0, id="tiled-d256-f32"),
    pytest.param(64, 3, 45, 4, 2, 1, "q8_0", 1, 0.0, 0.0, id="vec-q8_0"),
    pytest.param(128, 2, 45, 2, 1, 1, "q4_0", 0, 0.0, 0.0, id="vec-q4_0"),
    pytest.param(96, 1, 50, 2, 2, 1, "q5_1", 2, 0.0, 0.0, id="vec-q5_1"),
    pytest.param(64, 27, 45, 4, 2, 1, "q8_0", 1, 0.0, 0.0, id="tiled-q8_0"),
    pytest.param(128, 30, 45, 2, 1, 1, "q4_0", 1, 0.0, 10.0, id="tiled-q4_0-softcap"),
    pytest.param(64, 21, 33, 2, 2, 1, "q4_1", 0, 0.0, 0.0, id="tiled-q4_1"),
    pytest.param(192, 22, 33, 2, 2, 1, "q5_0", 1, 1.0, 0.0, id="tiled-d192-q5_0-alibi"),
]


@pytest.mark.parametrize("D,n_q,n_kv,H,H_kv,B,kv_type,mask_heads,max_bias,softcap", FA_CASES)
def test_flash_attn_matches_numpy(backend, D, n_q, n_kv, H, H_kv, B, kv_type, mask_heads, max_bias, softcap):
    rng = np.random.default_rng(D * 1000 + n_q)
    q, k, v, mask = make_inputs(rng, D, n_q, n_kv, H, H_kv, B, kv_type, mask_heads)
    scale = 1.0 / math.sqrt(D)
    got, k_stored, v_stored = run_fa(backend, q, k, v, mask, kv_type, scale, max_bias, softcap)
    want = attention_ref(q, k_stored, v_stored, mask, scale, max_bias, softcap)
    assert got.shape == (B, n_q, H, D)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)


@pytest.mark.parametrize("n_q", [3, 29], ids=["vec", "tiled"])
def test_flash_attn_f32_mask_and_fully_masked_rows(backend, n_q):
    rng = np.random.default_rng(n_q)
    q, k, v, mask = make_inputs(rng, 64, n_q, 45, 2, 2, 1, "f16", 1, mask_type=np.float32)
    mask[:, :, 1, :] = -np.inf  # a row with nothing to attend to gives zeros
    got = run_fa(backend, q, k, v, mask, "f16", 0.125, mask_type="f32")[0]
    want = attention_ref(q, k, v, mask, 0.125, 0.0, 0.0)
    assert np.all(got[:, 1] == 0.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)


def test_flash_attn_whisper_encoder_size(sim):
    """Whisper's encoder self-attention: 1500 x 1500 keys, D = 64, 6 heads, no mask (tiled path)."""
    rng = np.random.default_rng(1500)
    q, k, v, _ = make_inputs(rng, 64, 1500, 1500, 6, 6, 1, "f16", 0)
    got = run_fa(sim.init_backend(), q, k, v, None, "f16", 0.125)[0]
    want = attention_ref(q, k, v, None, 0.125, 0.0, 0.0)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5)


@pytest.mark.parametrize("n_q", [1, 19, 20, 45], ids=["vec-1", "vec-19", "tiled-20", "tiled-45"])
def test_flash_attn_scratch_area(sim, n_q):
    """The vector path's partials live right behind dst: alloc_size counts them, and the kernels
    write nothing past alloc_size."""
    D, n_kv, H, B = 64, 70, 3, 2
    rng = np.random.default_rng(7)
    q, k, v, mask = make_inputs(rng, D, n_q, n_kv, H, H, B, "f16", 1)
    ctx, ins, out = build_fa(q, k, v, mask, "f16", 0.125, 0.0, 0.0)
    backend = sim.init_backend()
    buft = sim.buffer_type
    extra = 4 * n_q * H * B * VEC_WORKGROUPS * (D + 2) if n_q < VEC_MAX_ROWS else 0
    size = buft.alloc_size(out)
    assert size == out.nbytes + extra

    guard = 4096
    dst_buf = buft.alloc(size + guard)
    dst_buf.clear(0xA5)
    out.place(dst_buf, 0)
    mb.alloc_ctx_tensors(ctx, backend)  # the inputs: every tensor not placed yet
    set_inputs(ins, (q, k, v, mask))
    backend.graph_compute(mb.Graph(out))

    tail = np.frombuffer(dst_buf.get(size, guard), dtype=np.uint8)
    assert np.all(tail == 0xA5), "written past alloc_size"
    np.testing.assert_allclose(out.get(), attention_ref(q, k, v, mask, 0.125, 0.0, 0.0), rtol=0, atol=2e-5)


def test_flash_attn_supports(sim):
    ctx = mb.Context()
    for D, ok in [(64, True), (40, True), (256, True), (72, False), (32, False)]:
        q = ctx.tensor(mb.f32, (1, 2, 8, D))
        k = ctx.tensor(mb.f16, (1, 2, 16, D))
        v = ctx.tensor(mb.f16, (1, 2, 16, D))
        assert sim.supports_op(mb.ops.flash_attn_ext(q, k, v, None, 1.0)) == ok, D
    q = ctx.tensor(mb.f32, (1, 2, 8, 64))
    kq = ctx.tensor(mb.q8_0, (1, 2, 16, 64))
    vq = ctx.tensor(mb.q8_0, (1, 2, 16, 64))
    assert sim.supports_op(mb.ops.flash_attn_ext(q, kq, vq, None, 1.0))
    ki = ctx.tensor(mb.i32, (1, 2, 16, 64))
    vi = ctx.tensor(mb.i32, (1, 2, 16, 64))
    assert not sim.supports_op(mb.ops.flash_attn_ext(q, ki, vi, None, 1.0))


# ---------------------------------------------------------------- rope


def rope_ref(x, pos, n_dims, mode, n_ctx_orig=0, freq_base=10000.0, freq_scale=1.0, ext_factor=0.0,
             attn_factor=1.0, beta_fast=32.0, beta_slow=1.0):
    """x (B,T,H,D), pos (T,): ggml's rope (normal: pairs (2i, 2i+1); neox: (i, i + n_dims/2))."""
    x = x.astype(np.float64)
    half = n_dims // 2
    i = np.arange(half, dtype=np.float64)
    extrap = pos.astype(np.float64)[:, None] * freq_base ** (-2.0 * i / n_dims)  # (T, half)
    interp = freq_scale * extrap
    theta = interp
    mscale = attn_factor
    if ext_factor != 0.0:
        def corr_dim(n_rot):
            return n_dims * math.log(n_ctx_orig / (n_rot * 2 * math.pi)) / (2 * math.log(freq_base))
        lo = max(0.0, math.floor(corr_dim(beta_fast)))
        hi = min(n_dims - 1.0, math.ceil(corr_dim(beta_slow)))
        ramp = 1.0 - np.clip((i - lo) / max(0.001, hi - lo), 0.0, 1.0)
        mix = ramp * ext_factor
        theta = interp * (1 - mix) + extrap * mix
        mscale *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
    c = (np.cos(theta) * mscale)[None, :, None, :]
    s = (np.sin(theta) * mscale)[None, :, None, :]
    out = x.copy()
    if mode == 2:
        x0, x1 = x[..., :half], x[..., half:n_dims]
        out[..., :half] = x0 * c - x1 * s
        out[..., half:n_dims] = x0 * s + x1 * c
    else:
        x0, x1 = x[..., 0:n_dims:2], x[..., 1:n_dims:2]
        out[..., 0:n_dims:2] = x0 * c - x1 * s
        out[..., 1:n_dims:2] = x0 * s + x1 * c
    return out


ROPE_CASES = [
    pytest.param(dict(mode=0, n_dims=64), "f32", id="norm"),
    pytest.param(dict(mode=2, n_dims=64), "f32", id="neox"),
    pytest.param(dict(mode=0, n_dims=32, freq_base=500.0, freq_scale=0.5), "f32", id="norm-partial-scaled"),
    pytest.param(dict(mode=2, n_dims=48, n_ctx_orig=4096, freq_scale=0.25, ext_factor=1.0, attn_factor=0.9),
                 "f32", id="neox-yarn"),
    pytest.param(dict(mode=0, n_dims=64, n_ctx_orig=2048, freq_scale=0.5, ext_factor=0.5), "f32", id="norm-yarn"),
    pytest.param(dict(mode=2, n_dims=64), "f16", id="neox-f16"),
]


@pytest.mark.parametrize("params,dtype", ROPE_CASES)
def test_rope_matches_numpy(backend, params, dtype):
    rng = np.random.default_rng(11)
    B, T, H, D = 2, 9, 3, 64
    x = rng.uniform(-1.0, 1.0, (B, T, H, D)).astype(np.float32)
    pos = rng.integers(0, 3000, T).astype(np.int32)
    ctx = mb.Context()
    ta = ctx.tensor(mb.f32 if dtype == "f32" else mb.f16, x.shape)
    tp = ctx.tensor(mb.i32, (T,))
    y = mb.ops.rope(ta, tp, **params)
    mb.alloc_ctx_tensors(ctx, backend)
    ta.set(x)
    tp.set(pos)
    assert backend.device.supports_op(y)
    backend.graph_compute(mb.Graph(y))
    xin = x if dtype == "f32" else x.astype(np.float16)
    want = rope_ref(xin, pos, **params)
    # Angles reach thousands of radians, where f32 angles (as ggml computes them) are off by a few
    # 1e-4 radians.
    atol = 1e-3 if dtype == "f32" else 3e-3
    np.testing.assert_allclose(y.get(), want, rtol=0, atol=atol)


def test_rope_strided_input(backend):
    rng = np.random.default_rng(12)
    x = rng.uniform(-1.0, 1.0, (5, 2, 32)).astype(np.float32)  # (H, T, D) stored; roped as (T, H, D)
    pos = np.array([3, 700], dtype=np.int32)
    ctx = mb.Context()
    ta = ctx.tensor(mb.f32, x.shape)
    tp = ctx.tensor(mb.i32, (2,))
    y = mb.ops.rope(ta.permute(1, 0, 2), tp, 32, 2)
    mb.alloc_ctx_tensors(ctx, backend)
    ta.set(x)
    tp.set(pos)
    backend.graph_compute(mb.Graph(y))
    want = rope_ref(x.transpose(1, 0, 2)[None], pos, 32, 2)[0]
    np.testing.assert_allclose(y.get(), want, rtol=0, atol=1e-3)


def test_rope_supports(sim):
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (4, 3, 64))
    p = ctx.tensor(mb.i32, (4,))
    assert sim.supports_op(mb.ops.rope(a, p, 64, 0))
    # YaRN needs the original context length.
    assert not sim.supports_op(mb.ops.rope(a, p, 64, 0, n_ctx_orig=0, ext_factor=1.0))


# ---------------------------------------------------------------- layout


LAYOUT_TYPES = [(mb.f32, np.float32), (mb.f16, np.float16), (mb.i32, np.int32)]


def compute(backend, ctx, out, inputs):
    mb.alloc_ctx_tensors(ctx, backend)
    for t, a in inputs:
        t.set(a)
    assert backend.device.supports_op(out)
    backend.graph_compute(mb.Graph(out))
    return out.get()


def random_of(rng, shape, dtype):
    if dtype == np.int32:
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("mbt,npt", LAYOUT_TYPES, ids=["f32", "f16", "i32"])
@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_concat(backend, mbt, npt, axis):
    rng = np.random.default_rng(axis)
    sa = [2, 3, 4, 5]
    sb = list(sa)
    sb[axis] = 3
    a, b = random_of(rng, sa, npt), random_of(rng, sb, npt)
    ctx = mb.Context()
    ta, tb = ctx.tensor(mbt, a.shape), ctx.tensor(mbt, b.shape)
    got = compute(backend, ctx, mb.ops.concat(ta, tb, axis), [(ta, a), (tb, b)])
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=axis))


def test_concat_strided_inputs(backend):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 7)).astype(np.float32)
    b = rng.standard_normal((4, 7)).astype(np.float32)
    ctx = mb.Context()
    ta, tb = ctx.tensor(mb.f32, a.shape), ctx.tensor(mb.f32, b.shape)
    out = mb.ops.concat(ta.transpose(), tb.transpose(), 1)  # (7, 6) and (7, 4) -> (7, 10)
    got = compute(backend, ctx, out, [(ta, a), (tb, b)])
    np.testing.assert_array_equal(got, np.concatenate([a.T, b.T], axis=1))


@pytest.mark.parametrize("mbt,npt", LAYOUT_TYPES, ids=["f32", "f16", "i32"])
def test_repeat(backend, mbt, npt):
    rng = np.random.default_rng(3)
    a = random_of(rng, (1, 3, 1, 5), npt)
    ctx = mb.Context()
    ta = ctx.tensor(mbt, a.shape)
    tb = ctx.tensor(mbt, (2, 6, 4, 10))
    got = compute(backend, ctx, mb.ops.repeat(ta, tb), [(ta, a)])
    np.testing.assert_array_equal(got, np.tile(a, (2, 2, 4, 2)))


@pytest.mark.parametrize("mbt,npt", LAYOUT_TYPES, ids=["f32", "f16", "i32"])
def test_pad(backend, mbt, npt):
    rng = np.random.default_rng(4)
    a = random_of(rng, (2, 3, 4, 5), npt)
    pads = [1, 0, 2, 3]
    ctx = mb.Context()
    ta = ctx.tensor(mbt, a.shape)
    got = compute(backend, ctx, mb.ops.pad(ta, pads), [(ta, a)])
    np.testing.assert_array_equal(got, np.pad(a, [(0, p) for p in pads]))


def test_pad_strided_input(backend):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    ctx = mb.Context()
    ta = ctx.tensor(mb.f32, a.shape)
    got = compute(backend, ctx, mb.ops.pad(ta.transpose(), [2, 1]), [(ta, a)])
    np.testing.assert_array_equal(got, np.pad(a.T, [(0, 2), (0, 1)]))


def test_layout_bf16(backend):
    """bf16 moves as raw 16-bit values: concat, then pad, then repeat."""
    rng = np.random.default_rng(8)
    ctx = mb.Context()
    a, b = ctx.tensor(mb.bf16, (3, 5)), ctx.tensor(mb.bf16, (3, 2))
    out = mb.ops.repeat(mb.ops.pad(mb.ops.concat(a, b, 1), [1, 1]), ctx.tensor(mb.bf16, (8, 16)))
    if not backend.device.supports_op(out):
        pytest.skip("no bf16 on this device")
    got = compute(backend, ctx, out, [(a, rng.standard_normal((3, 5))), (b, rng.standard_normal((3, 2)))])
    want = np.tile(np.pad(np.concatenate([a.get(), b.get()], 1), [(0, 1), (0, 1)]), (2, 2))
    np.testing.assert_array_equal(got, want)
