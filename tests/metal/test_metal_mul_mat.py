"""MetalSim: the matrix and data-movement kernels (shaders/mul_mat.metal, rows.metal, cpy.metal,
im2col.metal) beyond the shared conformance suite, each against an independent numpy reference.

- MUL_MAT: every path of src/metal/ops/mul_mat.cpp, hit by shape: mat-vec (1 column), small-batch
  mat-vec (2..8 columns, and groups of 8 when tiles do not apply), simdgroup-matrix tiles (more than
  8 columns, K >= 64); every weight type, f16 x f16, broadcast over dims 2 and 3, permuted b.
- Quantizing copies (CPY f32 -> q*, SET_ROWS into q*) give exactly mb.quantize's bytes.
- Dequantizing kernels (CPY q* -> f32/f16, GET_ROWS) against a numpy decoder of the raw blocks.
- IM2COL 1-D and 2-D in f32 and f16.

Every test runs under both executor schedules (lockstep and run-ahead, which exposes a missing
threadgroup barrier).
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

pytestmark = pytest.mark.skipif(
    "MetalSim" not in [d.name for d in mb.devices()], reason="built without the MetalSim device"
)

QUANT_TYPES = [mb.q4_0, mb.q4_1, mb.q5_0, mb.q5_1, mb.q8_0]
WEIGHT_TYPES = [mb.f32, mb.f16, mb.bf16] + QUANT_TYPES
SENTINEL = 0xA5
U = 2.0**-24  # unit roundoff of f32

# Shapes (m weight rows, n columns of b) that select each path (src/metal/ops/mul_mat.cpp): 1 column ->
# mat-vec; 2..8 -> small-batch; > 8 with K >= 64 -> tiles (m and n not multiples of the 64 x 32
# tile, so edge tiles go through threadgroup memory, plus one exact multiple for the direct store).
PATH_SHAPES = {
    "mat_vec": [(1, 1), (33, 1), (70, 1)],
    "small_batch": [(9, 2), (70, 5), (17, 8)],
    "tiles": [(70, 9), (129, 40), (64, 32)],
}


@pytest.fixture(scope="module")
def sim():
    return mb.device("MetalSim")


@pytest.fixture(params=[0, 1], ids=["lockstep", "run-ahead"])
def backend(sim, request):
    be = sim.init_backend()
    be.options["schedule"] = request.param
    return be


def _check_sentinels(buf, tensors):
    raw = np.frombuffer(memoryview(buf), dtype=np.uint8)
    free = np.ones(raw.shape[0], dtype=bool)
    for t in tensors:
        if t.nbytes:
            free[t.offset : t.offset + t.nbytes] = False
    bad = np.nonzero(free & (raw != SENTINEL))[0]
    assert bad.size == 0, f"{bad.size} byte(s) outside every tensor were written, first at {bad[0]}"


# ---------------------------------------------------------------- numpy decoders of the raw blocks

_BLOCK_DTYPES = {
    "q4_0": np.dtype([("d", "<f2"), ("qs", "u1", 16)]),
    "q4_1": np.dtype([("d", "<f2"), ("m", "<f2"), ("qs", "u1", 16)]),
    "q5_0": np.dtype([("d", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)]),
    "q5_1": np.dtype([("d", "<f2"), ("m", "<f2"), ("qh", "<u4"), ("qs", "u1", 16)]),
    "q8_0": np.dtype([("d", "<f2"), ("qs", "i1", 32)]),
}


def decode(raw: bytes, t: mb.Type, shape) -> np.ndarray:
    """Values of ggml blocks in float64: element j < 16 is the low nibble of qs[j], j + 16 the high one;
    bit j of qh is the fifth bit of element j."""
    blocks = np.frombuffer(raw, dtype=_BLOCK_DTYPES[t.name])
    d = blocks["d"].astype(np.float64)[:, None]
    if t.name == "q8_0":
        vals = blocks["qs"].astype(np.float64) * d
    else:
        qs = blocks["qs"].astype(np.int64)
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1)
        if t.name in ("q5_0", "q5_1"):
            qh = blocks["qh"].astype(np.int64)[:, None]
            q = q | (((qh >> np.arange(32)) & 1) << 4)
        if t.name in ("q4_1", "q5_1"):
            vals = q * d + blocks["m"].astype(np.float64)[:, None]
        else:
            vals = (q - (8 if t.name == "q4_0" else 16)) * d
    return vals.reshape(shape)


def stored(values: np.ndarray, t: mb.Type) -> np.ndarray:
    """values as a tensor of type t holds them, in float64."""
    if t == mb.f32:
        return values.astype(np.float64)
    if t == mb.f16:
        return values.astype(np.float16).astype(np.float64)
    if t == mb.bf16:
        return mb.dequantize(mb.quantize(values, t), t, values.shape).astype(np.float64)
    return decode(mb.quantize(values, t), t, values.shape)


# ---------------------------------------------------------------- MUL_MAT


def run_mul_mat(backend, w_type, w, x, x_type=mb.f32, permuted=False):
    ctx = mb.Context()
    wt = ctx.tensor(w_type, w.shape, name="w")
    if permuted:
        # b stored as (b3, n, b2, K): rows of one matrix are b2*K elements apart.
        x_store = np.ascontiguousarray(np.transpose(x, (0, 2, 1, 3)))
        xt = ctx.tensor(x_type, x_store.shape, name="x")
        x_in = mb.ops.permute(xt, (0, 2, 1, 3))
    else:
        x_store = x
        xt = ctx.tensor(x_type, x_store.shape, name="x")
        x_in = xt
    y = mb.ops.mul_mat(wt, x_in)
    guard = ctx.tensor(mb.f32, (16,), name="guard")
    buf = mb.alloc_ctx_tensors(ctx, backend)
    buf.clear(SENTINEL)
    wt.set(w)
    xt.set(x_store.astype(np.float16) if x_type == mb.f16 else x_store)
    assert backend.device.supports_op(y)
    backend.graph_compute(mb.Graph(y))
    _check_sentinels(buf, [wt, xt, y, guard])
    return y.get()


def check_mul_mat(out, w64, x64):
    """Every output against the float64 product of the values as stored. The kernels multiply the
    exact stored values and sum K products in f32, so each output is within gamma_K * sum|w*x| of the
    exact sum (gamma_K = K u / (1 - K u), the classic bound for any summation order), plus u per term
    for the rounding of a dequantised q*d + m."""
    r3, r2 = x64.shape[0] // w64.shape[0], x64.shape[1] // w64.shape[1]
    wb = np.repeat(np.repeat(w64, r3, axis=0), r2, axis=1)
    ref = x64 @ np.swapaxes(wb, -1, -2)
    assert out.shape == ref.shape
    k = x64.shape[-1]
    abs_terms = np.abs(x64) @ np.swapaxes(np.abs(wb), -1, -2)
    bound = ((k + 2) * U / (1 - (k + 2) * U)) * abs_terms
    excess = np.abs(out - ref) - bound
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert np.all(excess <= 0), f"out{worst} = {out[worst]}, reference {ref[worst]}, bound {bound[worst]}"


def _k_for(w_type, tiled):
    # Float types: K not a multiple of 16 or 32 (masked tails); quantized: an odd number of blocks.
    if w_type in QUANT_TYPES:
        return 96 if tiled else 160
    return 77 if tiled else 45


@pytest.mark.parametrize("path", list(PATH_SHAPES))
@pytest.mark.parametrize("w_type", WEIGHT_TYPES, ids=lambda t: t.name)
def test_mul_mat_paths(backend, w_type, path):
    rng = np.random.default_rng(7)
    k = _k_for(w_type, path == "tiles")
    for m, n in PATH_SHAPES[path]:
        w = rng.standard_normal((1, 1, m, k)).astype(np.float32)
        x = rng.standard_normal((1, 1, n, k)).astype(np.float32)
        out = run_mul_mat(backend, w_type, w, x)
        check_mul_mat(out, stored(w, w_type), x.astype(np.float64))


@pytest.mark.parametrize("path", list(PATH_SHAPES))
def test_mul_mat_f16_by_f16(backend, path):
    rng = np.random.default_rng(8)
    k = 77
    for m, n in PATH_SHAPES[path]:
        w = rng.standard_normal((1, 1, m, k)).astype(np.float32)
        x = rng.standard_normal((1, 1, n, k)).astype(np.float16)
        out = run_mul_mat(backend, mb.f16, w, x.astype(np.float32), x_type=mb.f16)
        check_mul_mat(out, stored(w, mb.f16), x.astype(np.float64))


@pytest.mark.parametrize("n", [1, 4, 20])
@pytest.mark.parametrize("w_type", [mb.f32, mb.f16, mb.q4_1, mb.q8_0], ids=lambda t: t.name)
def test_mul_mat_broadcast_permuted(backend, w_type, n):
    """a (2, 3) matrices serve b (4, 6): each a matrix is used by 2 x 2 of b's (index i // ratio);
    b permuted so that its rows are not adjacent."""
    rng = np.random.default_rng(n)
    k = 64
    w = rng.standard_normal((2, 3, 19, k)).astype(np.float32)
    x = rng.standard_normal((4, 6, n, k)).astype(np.float32)
    out = run_mul_mat(backend, w_type, w, x, permuted=True)
    check_mul_mat(out, stored(w, w_type), x.astype(np.float64))


@pytest.mark.parametrize("w_type", [mb.f32, mb.q5_0], ids=lambda t: t.name)
def test_mul_mat_small_batch_groups(sim, backend, w_type):
    """More than 8 columns where tiles do not apply go to the small-batch kernel in groups of 8:
    K below 64, or a device without simdgroup matrices."""
    rng = np.random.default_rng(9)
    k = 32
    w = rng.standard_normal((1, 1, 21, k)).astype(np.float32)
    x = rng.standard_normal((1, 1, 19, k)).astype(np.float32)
    check_mul_mat(run_mul_mat(backend, w_type, w, x), stored(w, w_type), x.astype(np.float64))

    k = 96
    w = rng.standard_normal((1, 1, 21, k)).astype(np.float32)
    x = rng.standard_normal((1, 1, 19, k)).astype(np.float32)
    sim.set_prop("has_simdgroup_mm", False)
    try:
        out = run_mul_mat(backend, w_type, w, x)
    finally:
        sim.set_prop("has_simdgroup_mm", True)
    check_mul_mat(out, stored(w, w_type), x.astype(np.float64))


def test_mul_mat_k_zero(backend):
    w = np.zeros((1, 1, 5, 0), dtype=np.float32)
    for n in (1, 3, 20):
        x = np.zeros((1, 1, n, 0), dtype=np.float32)
        assert np.all(run_mul_mat(backend, mb.f32, w, x) == 0)


# ---------------------------------------------------------------- quantizing: byte-exact


def hard_blocks(rng, n_blocks):
    """Rows of 32 values that stress the quantizers: zeros, constants, ties of the largest magnitude
    with both signs, one huge value, tiny and subnormal values, exact codes and midpoints."""
    blocks = [
        np.zeros(32),
        np.full(32, 3.25),
        np.full(32, -1.5),
        np.where(np.arange(32) % 2 == 0, 2.0, -2.0),
        np.where(np.arange(32) % 2 == 0, -2.0, 2.0),
        np.concatenate([[1e30], rng.standard_normal(31)]),
        rng.standard_normal(32) * 1e-39,
        np.arange(32) - 16.0,
        (np.arange(32) - 16.0) + 0.5,
        np.linspace(-8.0, 7.0, 32),
    ]
    while len(blocks) < n_blocks:
        blocks.append(rng.standard_normal(32) * rng.choice([1e-3, 1.0, 100.0]))
    return np.concatenate(blocks[:n_blocks]).astype(np.float32)


@pytest.mark.parametrize("q_type", QUANT_TYPES, ids=lambda t: t.name)
def test_cpy_quantize_bytes(backend, q_type):
    rng = np.random.default_rng(11)
    rows, k = 6, 128
    vals = hard_blocks(rng, rows * k // 32).reshape(rows, k)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (rows, k), name="a")
    b = ctx.tensor(q_type, (rows, k), name="b")
    y = mb.ops.cpy(a, b)
    buf = mb.alloc_ctx_tensors(ctx, backend)
    buf.clear(SENTINEL)
    a.set(vals)
    backend.graph_compute(mb.Graph(y))
    assert b.get_bytes() == mb.quantize(vals, q_type)
    _check_sentinels(buf, [a, b])


@pytest.mark.parametrize("q_type", [mb.q4_0, mb.q5_1, mb.q8_0], ids=lambda t: t.name)
def test_cpy_quantize_strided_source(backend, q_type):
    """Rows gathered from a transposed f32 view (element stride 4 * rows)."""
    rng = np.random.default_rng(12)
    k, rows = 64, 5
    vals = rng.standard_normal((k, rows)).astype(np.float32)
    ctx = mb.Context()
    a = ctx.tensor(mb.f32, (k, rows), name="a")
    b = ctx.tensor(q_type, (rows, k), name="b")
    y = mb.ops.cpy(mb.ops.transpose(a), b)
    mb.alloc_ctx_tensors(ctx, backend)
    a.set(vals)
    backend.graph_compute(mb.Graph(y))
    assert b.get_bytes() == mb.quantize(np.ascontiguousarray(vals.T), q_type)


@pytest.mark.parametrize("d_type", QUANT_TYPES + [mb.f16, mb.bf16, mb.f32], ids=lambda t: t.name)
def test_set_rows(backend, d_type):
    rng = np.random.default_rng(13)
    n_dst, k, n_src = 7, 64, 3
    src = hard_blocks(rng, n_src * k // 32).reshape(n_src, k)
    idx = np.array([5, 0, 3], dtype=np.int32)
    ctx = mb.Context()
    dst = ctx.tensor(d_type, (n_dst, k), name="dst")
    s = ctx.tensor(mb.f32, (n_src, k), name="src")
    it = ctx.tensor(mb.i32, (n_src,), name="idx")
    y = mb.ops.set_rows(dst, s, it)
    mb.alloc_ctx_tensors(ctx, backend)
    dst.set(rng.standard_normal((n_dst, k)).astype(np.float32))
    before = dst.get_bytes()
    s.set(src)
    it.set(idx)
    backend.graph_compute(mb.Graph(y))
    row = len(before) // n_dst
    expect = [before[r * row : (r + 1) * row] for r in range(n_dst)]
    for j, r in enumerate(idx):
        expect[r] = mb.quantize(src[j], d_type)
    assert dst.get_bytes() == b"".join(expect)


# ---------------------------------------------------------------- dequantizing


@pytest.mark.parametrize("d_type", [mb.f32, mb.f16], ids=lambda t: t.name)
@pytest.mark.parametrize("q_type", QUANT_TYPES, ids=lambda t: t.name)
def test_cpy_dequantize(backend, q_type, d_type):
    rng = np.random.default_rng(14)
    rows, k = 3, 96
    vals = rng.standard_normal((rows, k)).astype(np.float32)
    ctx = mb.Context()
    a = ctx.tensor(q_type, (rows, k), name="a")
    b = ctx.tensor(d_type, (rows, k), name="b")
    y = mb.ops.cpy(a, b)
    mb.alloc_ctx_tensors(ctx, backend)
    a.set(vals)
    backend.graph_compute(mb.Graph(y))
    ref = decode(a.get_bytes(), q_type, (rows, k))
    # q*d is exact in f32; q*d + m is rounded once; f16 output rounds once more.
    want = ref.astype(np.float32).astype(np.float16) if d_type == mb.f16 else ref.astype(np.float32)
    got = b.get()
    ulp = np.spacing(np.abs(want).astype(got.dtype))
    assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= ulp)


@pytest.mark.parametrize("a_type", WEIGHT_TYPES + [mb.i32], ids=lambda t: t.name)
def test_get_rows(backend, a_type):
    rng = np.random.default_rng(15)
    n_rows, k = 9, 64
    vals = rng.standard_normal((2, n_rows, k)).astype(np.float32)
    if a_type == mb.i32:
        vals = np.round(vals * 1000)
    idx = np.array([[8, 0, 3, 3], [1, 7, 2, 0]], dtype=np.int32)
    ctx = mb.Context()
    a = ctx.tensor(a_type, vals.shape, name="a")
    it = ctx.tensor(mb.i32, idx.shape, name="idx")
    y = mb.ops.get_rows(a, it)
    mb.alloc_ctx_tensors(ctx, backend)
    a.set(vals.astype(np.int32) if a_type == mb.i32 else vals)
    it.set(idx)
    backend.graph_compute(mb.Graph(y))
    if a_type in QUANT_TYPES:
        src = decode(a.get_bytes(), a_type, vals.shape)
    elif a_type == mb.i32:
        src = vals.astype(np.float64)
    else:
        src = stored(vals, a_type)
    want = np.stack([src[j][idx[j]] for j in range(2)])
    got = y.get()
    assert got.shape == want.shape
    # Quantized rows: q*d + m rounds once in f32 (exact otherwise).
    assert np.all(np.abs(got - want) <= np.spacing(np.abs(want).astype(np.float32)))


# ---------------------------------------------------------------- IM2COL


def im2col_ref(data, kh, kw, s0, s1, p0, p1, d0, d1):
    """data (N, IC, H, W) -> (N, OH, OW, IC*KH*KW)."""
    n, ic, h, w = data.shape
    oh = (h + 2 * p1 - d1 * (kh - 1) - 1) // s1 + 1
    ow = (w + 2 * p0 - d0 * (kw - 1) - 1) // s0 + 1
    padded = np.zeros((n, ic, h + 2 * p1, w + 2 * p0))
    padded[:, :, p1 : p1 + h, p0 : p0 + w] = data
    out = np.zeros((n, oh, ow, ic, kh, kw))
    for ky in range(kh):
        for kx in range(kw):
            ys = ky * d1 + s1 * np.arange(oh)
            xs = kx * d0 + s0 * np.arange(ow)
            out[:, :, :, :, ky, kx] = padded[:, :, ys][:, :, :, xs].transpose(0, 2, 3, 1)
    return out.reshape(n, oh, ow, ic * kh * kw)


@pytest.mark.parametrize("d_type", [mb.f32, mb.f16], ids=lambda t: t.name)
@pytest.mark.parametrize("is_2d", [False, True], ids=["1d", "2d"])
def test_im2col(backend, d_type, is_2d):
    rng = np.random.default_rng(16)
    if is_2d:
        data = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
        kshape, (s0, s1, p0, p1, d0, d1) = (4, 3, 2, 3), (2, 1, 1, 2, 1, 2)
    else:
        data = rng.standard_normal((2, 5, 11)).astype(np.float32)
        kshape, (s0, s1, p0, p1, d0, d1) = (6, 5, 3), (2, 1, 1, 0, 2, 1)
    ctx = mb.Context()
    kern = ctx.tensor(mb.f16, kshape, name="kernel")
    dt = ctx.tensor(mb.f32, data.shape, name="data")
    y = mb.ops.im2col(kern, dt, s0, s1, p0, p1, d0, d1, is_2d, d_type)
    mb.alloc_ctx_tensors(ctx, backend)
    dt.set(data)
    backend.graph_compute(mb.Graph(y))
    if is_2d:
        want = im2col_ref(data, kshape[2], kshape[3], s0, s1, p0, p1, d0, d1)
    else:
        want = im2col_ref(data[:, :, None, :], 1, kshape[2], s0, 1, p0, 0, d0, 1)[:, 0]
    if d_type == mb.f16:
        want = want.astype(np.float16)
    np.testing.assert_array_equal(y.get(), want.astype(np.float32) if d_type == mb.f32 else want)
