"""NaN through quantization (issue 11, item 8).

ggml's reference quantizers convert NaN * (1/d) to an integer code, which C leaves undefined (x86
yields code 0): a NaN silently became 0 (q8_0) or the block's offset value (q4_0 read it back as the
row's other values). Here a block holding a NaN stores the f16 quiet NaN 0x7E00 as its scale, so all
32 of its values read back as NaN and the NaN reaches every result computed from the block; other
blocks, and every block of finite values, keep ggml's exact bytes (test_quantize.py checks those
against the gguf package). Covered: mb.quantize, Tensor.set, CPY f32 -> q* and SET_ROWS on every
device (the CPU quantizer and the Metal kernels' quantize32), and MUL_MAT's own quantization of the
activations (the CPU's 8-bit activation blocks for quantized weights).
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

QUANTS = [mb.q4_0, mb.q4_1, mb.q5_0, mb.q5_1, mb.q8_0]
QNAMES = {mb.q4_0: "q4_0", mb.q4_1: "q4_1", mb.q5_0: "q5_0", mb.q5_1: "q5_1", mb.q8_0: "q8_0"}
NAN_SCALE = b"\x00\x7e"  # f16 quiet NaN, little-endian


def ones_with_nan(shape=(2, 64), where=((0, 5),)):
    x = np.ones(shape, np.float32)
    for idx in where:
        x[idx] = np.nan
    return x


@pytest.mark.parametrize("t", QUANTS, ids=QNAMES.get)
@pytest.mark.parametrize("pos", [0, 5, 31], ids=["first", "middle", "last"])
def test_quantize_nan_makes_its_block_nan(t, pos):
    x = ones_with_nan(where=((0, pos),))
    data = mb.quantize(x, t)
    bs = t.type_size
    assert data[:2] == NAN_SCALE, "the block with the NaN must store a NaN scale"
    # The other blocks are exactly what the same values without the NaN give.
    clean = mb.quantize(np.ones((2, 64), np.float32), t)
    assert data[bs:] == clean[bs:]
    back = mb.dequantize(data, t, x.shape)
    assert np.isnan(back[0, :32]).all()
    assert not np.isnan(back[0, 32:]).any() and not np.isnan(back[1]).any()


@pytest.mark.parametrize("t", [mb.q4_0, mb.q8_0], ids=QNAMES.get)
def test_finite_blocks_unchanged_by_nan_check(t):
    # Random finite data, including large and tiny values: bytes equal a block-by-block quantize.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 256)) * np.exp(rng.uniform(-20, 20, (8, 1)))).astype(np.float32)
    whole = mb.quantize(x, t)
    parts = b"".join(mb.quantize(x[:, i:i + 32].copy(), t) for i in range(0, 256, 32))
    per_block = np.frombuffer(parts, np.uint8).reshape(8, 8, t.type_size).transpose(1, 0, 2).reshape(-1)
    assert whole == per_block.tobytes()
    assert NAN_SCALE not in [whole[i:i + 2] for i in range(0, len(whole), t.type_size)]


@pytest.mark.parametrize("t", QUANTS, ids=QNAMES.get)
def test_set_cpy_and_set_rows_propagate_nan(t, target):
    device, params = target
    backend = device.init_backend(params)
    x = ones_with_nan((3, 64), ((0, 5), (2, 40)))
    want = mb.quantize(x, t)
    ctx = mb.Context()
    src = ctx.tensor(mb.f32, x.shape, name="src")
    direct = ctx.tensor(t, x.shape, name="direct")
    dst = ctx.tensor(t, x.shape, name="dst")
    rows_dst = ctx.tensor(t, x.shape, name="rows_dst")
    idx = ctx.tensor(mb.i32, (3,), name="idx")
    copied = mb.ops.cpy(src, dst)
    scattered = mb.ops.set_rows(rows_dst, src, idx)
    graph = mb.Graph([copied, scattered])
    mb.alloc_ctx_tensors(ctx, backend)
    src.set(x)
    direct.set(x)
    rows_dst.set(np.zeros(x.shape, np.float32))
    idx.set(np.array([2, 0, 1], np.int32))
    assert direct.get_bytes() == want
    assert backend.graph_compute(graph) == mb.Status.SUCCESS
    assert copied.get_bytes() == want, "CPY f32 -> quantized"
    row = t.type_size * 2
    got = scattered.get_bytes()
    for i, r in enumerate([2, 0, 1]):
        assert got[r * row:(r + 1) * row] == want[i * row:(i + 1) * row], f"SET_ROWS row {i} -> {r}"
    back = copied.get()
    assert np.isnan(back[0, :32]).all() and np.isnan(back[2, 32:]).all()
    assert np.array_equal(np.isnan(back).sum(axis=1), [32, 0, 32])


@pytest.mark.parametrize("t", [mb.q4_0, mb.q8_0, mb.q5_1, mb.f16], ids=lambda t: str(t))
@pytest.mark.parametrize("n_tokens", [1, 3, 40])
def test_mul_mat_propagates_nan_of_weights_and_activations(t, n_tokens, device):
    backend = device.init_backend()
    rng = np.random.default_rng(9)
    ctx = mb.Context()
    w = ctx.tensor(t, (8, 64), name="w")
    x = ctx.tensor(mb.f32, (n_tokens, 64), name="x")
    y = mb.ops.mul_mat(w, x)
    mb.alloc_ctx_tensors(ctx, backend)
    W = rng.standard_normal((8, 64)).astype(np.float32)
    X = rng.standard_normal((n_tokens, 64)).astype(np.float32)
    W[3, 40] = np.nan
    X[0, 7] = np.nan
    w.set(W)
    x.set(X)
    assert backend.graph_compute(mb.Graph(y)) == mb.Status.SUCCESS
    got = y.get()
    with np.errstate(invalid="ignore"):
        want = X.astype(np.float64) @ W.T.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
