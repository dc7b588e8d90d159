"""MUL_MAT on the CPU device against a float64 numpy reference built from the dequantised weights.

Every weight type, odd sizes, broadcasting over dims 2 and 3, non-contiguous activations, zero-size
cases, several thread counts. Each graph's buffer is filled with sentinel bytes first; afterwards
every byte that no tensor owns must still hold them (nothing written outside dst).
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

CPU = mb.device("CPU")

FLOAT_TYPES = [mb.f32, mb.f16, mb.bf16]
QUANT_TYPES = [mb.q4_0, mb.q4_1, mb.q5_0, mb.q5_1, mb.q8_0]
SIZES = [1, 2, 7, 33, 64, 129]
SENTINEL = 0xA5

# Float weights (f32, f16, bf16 with f32 activations; f16 with f16 activations) are multiplied
# exactly as stored and summed in f32: the error is f32 rounding of partial sums, about
# sqrt(K) * 2^-24 relative to the terms, so a normalised error near 1e-14. 1e-8 is far above that
# (room for other summation orders on other CPUs) and far below what any indexing or conversion bug
# gives (>= 1e-4).
FLOAT_NMSE = 1e-8


def _is_quantized(t: mb.Type) -> bool:
    return t in QUANT_TYPES


@pytest.fixture(scope="module")
def backend():
    return CPU.init_backend()


def _ranges_owned(tensors):
    out = []
    for t in tensors:
        if t.nbytes:
            out.append((t.offset, t.offset + t.nbytes))
    return out


def _check_sentinels(buf, owned):
    raw = np.frombuffer(memoryview(buf), dtype=np.uint8)
    free = np.ones(raw.shape[0], dtype=bool)
    for lo, hi in owned:
        free[lo:hi] = False
    bad = np.nonzero(free & (raw != SENTINEL))[0]
    assert bad.size == 0, f"{bad.size} byte(s) outside every tensor were written, first at {bad[0]}"


def run_mul_mat(backend, w_type, w_vals, x_vals, layout="contiguous", x_type=mb.f32, n_threads=2):
    """Computes mul_mat(w, x) on the CPU; x is laid out as `layout` says. Returns (out, weights as stored)."""
    ctx = mb.Context()
    w = ctx.tensor(w_type, w_vals.shape, name="w")
    if layout == "contiguous":
        x_store = x_vals
        x = ctx.tensor(x_type, x_store.shape, name="x")
        x_in = x
    elif layout == "transposed":
        # Stored with the last two axes swapped; the transpose view has element stride N.
        x_store = np.ascontiguousarray(np.swapaxes(x_vals, -1, -2))
        x = ctx.tensor(x_type, x_store.shape, name="x")
        x_in = mb.ops.transpose(x)
    elif layout == "permuted":
        # Stored as (b3, N, b2, K): rows of one matrix are b2*K elements apart.
        x_store = np.ascontiguousarray(np.transpose(x_vals, (0, 2, 1, 3)))
        x = ctx.tensor(x_type, x_store.shape, name="x")
        x_in = mb.ops.permute(x, (0, 2, 1, 3))
    else:
        raise AssertionError(layout)
    assert tuple(x_in.shape) == x_vals.shape
    y = mb.ops.mul_mat(w, x_in)
    guard = ctx.tensor(mb.f32, (16,), name="guard")  # a neighbour for y in the buffer
    backend.options = {"n_threads": n_threads}
    buf = mb.alloc_ctx_tensors(ctx, backend)
    buf.clear(SENTINEL)
    w.set(w_vals)
    x.set(x_store.astype(np.float16) if x_type == mb.f16 else x_store)
    backend.graph_compute(mb.Graph(y))
    out = y.get()
    _check_sentinels(buf, _ranges_owned([w, x, y, guard]))
    stored_w = mb.dequantize(mb.quantize(w_vals, w_type), w_type, w_vals.shape).astype(np.float64)
    return out, stored_w


def reference(w, x):
    """x @ w.T in float64 with w broadcast over the leading dims as ggml does (index i // ratio)."""
    w = np.asarray(w, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    r3, r2 = x.shape[0] // w.shape[0], x.shape[1] // w.shape[1]
    wb = np.repeat(np.repeat(w, r3, axis=0), r2, axis=1)
    return x @ np.swapaxes(wb, -1, -2), wb


def check(out, w_stored, x, w_type):
    ref, wb = reference(w_stored, x)
    x = np.asarray(x, dtype=np.float64)
    assert out.shape == ref.shape
    assert np.all(np.isfinite(out))
    k = x.shape[-1]
    if k == 0 or out.size == 0:
        assert np.all(out == 0)
        return
    abs_terms = np.abs(x) @ np.swapaxes(np.abs(wb), -1, -2)
    if _is_quantized(w_type):
        # With few tokens the activations are quantized to 8 bits per block of 32 (d = amax/127) for
        # integer dot products, each off by at most d/2. That bounds every output exactly:
        # |out - ref| <= sum_k |w[j,k]| * d(i,k)/2, with 0.2% slack for the rounding of d itself
        # and 1e-5 of sum |w*x| for f32 sums. With many tokens the weights are dequantised to f32
        # instead, which is far more precise and meets the same bound.
        amax = np.abs(x).reshape(x.shape[:-1] + (k // 32, 32)).max(axis=-1)
        half_step = np.repeat(amax / 127.0 * 0.502, 32, axis=-1)
        bound = half_step @ np.swapaxes(np.abs(wb), -1, -2) + 1e-5 * abs_terms
        excess = np.abs(out - ref) - bound
        worst = np.unravel_index(np.argmax(excess), excess.shape)
        assert np.all(excess <= 0), f"out{worst} = {out[worst]}, reference {ref[worst]}, bound {bound[worst]}"
    else:
        # Normalised by the summed squared products rather than the squared results: equal in
        # expectation for random data, but stable when a single dot product cancels to near zero.
        terms = (x * x) @ np.swapaxes(wb * wb, -1, -2)
        nmse = float(np.sum((out - ref) ** 2) / np.sum(terms))
        assert nmse < FLOAT_NMSE, f"normalised error {nmse:.3g}"


def _data(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("m", SIZES)
@pytest.mark.parametrize("w_type", FLOAT_TYPES + QUANT_TYPES, ids=lambda t: t.name)
def test_shapes(backend, w_type, m, n):
    rng = np.random.default_rng(m * 1000 + n)
    # Quantized: an odd number of blocks; float: K not a multiple of 8 or 16.
    k = 32 * 3 if _is_quantized(w_type) else 77
    w = _data(rng, (1, 1, m, k))
    x = _data(rng, (1, 1, n, k))
    out, w_stored = run_mul_mat(backend, w_type, w, x)
    check(out, w_stored, x, w_type)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 11, 12, 23, 24, 200])
@pytest.mark.parametrize("w_type", FLOAT_TYPES + QUANT_TYPES, ids=lambda t: t.name)
def test_long_rows(backend, w_type, n):
    """K over two of the GEMM's k blocks (384 wide), rows not a multiple of the 16-row panels; token
    counts either side of the switch between the few-token and many-token paths."""
    rng = np.random.default_rng(n)
    k = 32 * 23 if _is_quantized(w_type) else 741
    w = _data(rng, (1, 1, 45, k))
    x = _data(rng, (1, 1, n, k))
    out, w_stored = run_mul_mat(backend, w_type, w, x)
    check(out, w_stored, x, w_type)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "permuted"])
@pytest.mark.parametrize("n", [1, 5, 20])
@pytest.mark.parametrize("w_type", FLOAT_TYPES + QUANT_TYPES, ids=lambda t: t.name)
def test_broadcast_and_layout(backend, w_type, n, layout):
    rng = np.random.default_rng(n)
    k = 64
    # w (a3, a2) = (2, 3) serves x (b3, b2) = (4, 6): every weight matrix is used by 2 x 2 of x's.
    w = _data(rng, (2, 3, 19, k))
    x = _data(rng, (4, 6, n, k))
    out, w_stored = run_mul_mat(backend, w_type, w, x, layout=layout)
    check(out, w_stored, x, w_type)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_f16_by_f16(backend, n, layout):
    """conv_1d's pairing: f16 weights times f16 activations (an f16 im2col)."""
    rng = np.random.default_rng(n)
    w = _data(rng, (1, 1, 33, 240))
    x = _data(rng, (1, 1, n, 240)).astype(np.float16).astype(np.float32)
    out, w_stored = run_mul_mat(backend, mb.f16, w, x, layout=layout, x_type=mb.f16)
    check(out, w_stored, x, mb.f16)


@pytest.mark.parametrize("n_threads", [1, 2, 3, 5])
@pytest.mark.parametrize("w_type", [mb.f32, mb.f16, mb.q4_0, mb.q5_1], ids=lambda t: t.name)
@pytest.mark.parametrize("n", [1, 100])
def test_thread_counts(backend, w_type, n, n_threads):
    rng = np.random.default_rng(n_threads)
    w = _data(rng, (1, 1, 70, 128))
    x = _data(rng, (1, 2, n, 128))
    out, w_stored = run_mul_mat(backend, w_type, w, x, n_threads=n_threads)
    check(out, w_stored, x, w_type)


@pytest.mark.parametrize(
    "w_shape, x_shape",
    [
        ((1, 1, 5, 0), (1, 1, 3, 0)),  # K = 0: sums of nothing
        ((1, 1, 5, 0), (1, 1, 40, 0)),
        ((1, 1, 5, 64), (1, 1, 0, 64)),  # no tokens
        ((1, 1, 0, 64), (1, 1, 5, 64)),  # no weight rows
        ((1, 1, 5, 64), (1, 0, 5, 64)),  # no matrices
    ],
)
@pytest.mark.parametrize("w_type", [mb.f32, mb.f16, mb.q4_0], ids=lambda t: t.name)
def test_zero_sizes(backend, w_type, w_shape, x_shape):
    rng = np.random.default_rng(0)
    w = _data(rng, w_shape)
    x = _data(rng, x_shape)
    out, w_stored = run_mul_mat(backend, w_type, w, x)
    check(out, w_stored, x, w_type)


def test_unsupported_pairings_are_refused():
    ctx = mb.Context()
    w = ctx.tensor(mb.f32, (4, 64))
    x = ctx.tensor(mb.f16, (3, 64))
    assert not CPU.supports_op(mb.ops.mul_mat(w, x))
    wq = ctx.tensor(mb.q4_0, (4, 64))
    assert not CPU.supports_op(mb.ops.mul_mat(wq, x))
    assert CPU.supports_op(mb.ops.mul_mat(wq, ctx.tensor(mb.f32, (3, 64))))


def run_transposed_weights(backend, w_type, w_vals, x_vals, n_threads=2):
    """mul_mat(transpose(stored), x) where stored holds w with its last two axes swapped (the CPU's
    transposed-operand path, mul_mat_transposed.h). Returns (out, weights as stored)."""
    ctx = mb.Context()
    stored = ctx.tensor(w_type, w_vals.shape[:-2] + w_vals.shape[-2:][::-1], name="w_t")
    x = ctx.tensor(mb.f32, x_vals.shape, name="x")
    w_in = mb.ops.transpose(stored)
    assert tuple(w_in.shape) == w_vals.shape and w_in.nb[1] == w_type.type_size
    y = mb.ops.mul_mat(w_in, x)
    guard = ctx.tensor(mb.f32, (16,), name="guard")
    backend.options = {"n_threads": n_threads}
    assert mb.device("CPU").supports_op(y)
    buf = mb.alloc_ctx_tensors(ctx, backend)
    buf.clear(SENTINEL)
    stored_vals = np.ascontiguousarray(np.swapaxes(w_vals, -1, -2))
    stored.set(stored_vals.astype(np.float16) if w_type == mb.f16 else stored_vals)
    x.set(x_vals)
    backend.graph_compute(mb.Graph(y))
    out = y.get()
    _check_sentinels(buf, _ranges_owned([stored, x, y, guard]))
    return out, mb.dequantize(mb.quantize(w_vals, w_type), w_type, w_vals.shape).astype(np.float64)


@pytest.mark.parametrize("m, k", [(1500, 64), (64, 1500), (7, 5), (77, 33), (16, 1), (200, 129)])
@pytest.mark.parametrize("n", [1, 2, 5, 7, 13])
@pytest.mark.parametrize("w_type", FLOAT_TYPES, ids=lambda t: t.name)
def test_transposed_weights(backend, w_type, n, m, k, isa_cap):
    """Weights read through a transposed view (attention values kept as V rows, read as V^T): column
    counts off the 16/8-wide vectors, token counts off the 6/3/4-token tiles, every ISA path."""
    rng = np.random.default_rng(n * 7 + m + k)
    w = _data(rng, (1, 2, m, k))
    x = _data(rng, (1, 2, n, k))
    out, w_stored = run_transposed_weights(backend, w_type, w, x)
    check(out, w_stored, x, w_type)


@pytest.mark.parametrize("n_threads", [1, 2, 3, 5])
@pytest.mark.parametrize("n", [1, 5, 20])
def test_transposed_weights_broadcast(backend, n, n_threads):
    """One stored matrix per (a3, a2) shared by 3 x 2 b matrices: the shared matrix's tokens are
    every b matrix's (as a decoder's beams over one window's values), in tiles across matrices."""
    rng = np.random.default_rng(n + 10 * n_threads)
    w = _data(rng, (2, 3, 70, 150))
    x = _data(rng, (6, 6, n, 150))
    out, w_stored = run_transposed_weights(backend, mb.f16, w, x, n_threads=n_threads)
    check(out, w_stored, x, mb.f16)


def test_transposed_weights_on_metalsim_fall_back():
    """The GPU devices do not take a transposed first operand (as ggml's Metal backend): supports_op
    says so, and the scheduler runs such a product on the CPU."""
    ctx = mb.Context()
    stored = ctx.tensor(mb.f16, (1, 2, 40, 64), name="v")
    y = mb.ops.mul_mat(mb.ops.transpose(stored), ctx.tensor(mb.f32, (1, 2, 5, 40), name="p"))
    assert mb.device("CPU").supports_op(y)
    sim = [d for d in mb.devices() if d.name == "MetalSim"]
    if sim:
        assert not sim[0].supports_op(y)
