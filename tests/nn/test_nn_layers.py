"""metal_backend.nn.layers against numpy (float64 references), on every device."""

from __future__ import annotations

import math

import numpy as np
import pytest

import metal_backend as mb
from metal_backend import ops
from metal_backend.nn import Runner, Weights, layers

RNG = np.random.default_rng(7)


def run(device: mb.Device, build, *arrays, types=None):
    """Computes build(*tensors) on device through a Runner; returns the result as float64."""
    runner = Runner(device)
    w = Weights(runner.buffer_type)
    tensors = []
    for i, a in enumerate(arrays):
        t = types[i] if types and types[i] is not None else None
        tensors.append(w.add(f"in{i}", a, type=t))
    w.upload()
    out = build(*tensors)
    runner.compute(mb.Graph(out), "test")
    return out.get().astype(np.float64)


def randn(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def conv1d_ref(x, w, b, stride, padding, dilation):
    n, c, length = x.shape
    oc, _, k = w.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (padding, padding)])
    ol = (length + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    y = np.zeros((n, ol, oc))
    for t in range(ol):
        seg = xp[:, :, t * stride: t * stride + dilation * (k - 1) + 1: dilation]  # (n, c, k)
        y[:, t, :] = np.einsum("nck,ock->no", seg, w.astype(np.float64))
    return y + (0 if b is None else b.astype(np.float64))


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_linear(device):
    x, w, b = randn(5, 7, 32), randn(24, 32), randn(24)
    got = run(device, layers.linear, x, w, b)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64) + b, atol=1e-4)
    got = run(device, lambda x, w: layers.linear(x, w, name="proj"), x, w)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64), atol=1e-4)


def test_linear_f16_weight(device):
    x, w = randn(3, 64), randn(16, 64)
    got = run(device, layers.linear, x, w.astype(np.float16))
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.astype(np.float16).astype(np.float64).T, atol=2e-2)


def test_layer_norm(device):
    x, g, b = randn(6, 48, scale=3.0) + 2.0, randn(48), randn(48)
    got = run(device, lambda x, g, b: layers.layer_norm(x, g, b, 1e-5, "ln"), x, g, b)
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(got, ref, atol=1e-4)


@pytest.mark.parametrize("stride,padding,dilation", [(1, 0, 1), (1, 1, 1), (2, 1, 1), (3, 2, 1), (1, 2, 2)])
def test_conv1d(device, stride, padding, dilation):
    x, w, b = randn(2, 5, 17), randn(6, 5, 3), randn(6)
    got = run(device, lambda x, w, b: layers.conv1d(x, w, b, stride, padding, dilation), x, w, b)
    np.testing.assert_allclose(got, conv1d_ref(x, w, b, stride, padding, dilation), atol=1e-4)


def test_conv1d_of_a_permuted_time_major_input(device):
    """The output of one conv1d (time-major) feeds the next through a permuted view, no copy."""
    x, w1, w2 = randn(3, 4, 12), randn(8, 4, 3), randn(5, 8, 3)
    got = run(device, lambda x, w1, w2: layers.conv1d(ops.permute(layers.conv1d(x, w1, padding=1), [0, 2, 1]), w2,
                                                      stride=2, padding=1), x, w1, w2)
    h = conv1d_ref(x, w1, None, 1, 1, 1).transpose(0, 2, 1)
    np.testing.assert_allclose(got, conv1d_ref(h, w2, None, 2, 1, 1), atol=1e-4)


def q8_0_blocks(a: np.ndarray) -> tuple[bytes, np.ndarray]:
    """mb.quantize's q8_0 bytes of the rows of a, and their values decoded here (f16 scale, 32 int8 codes
    per block of 32 along the row), float64."""
    raw = mb.quantize(np.ascontiguousarray(a, np.float32), mb.q8_0)
    blocks = np.frombuffer(raw, np.uint8).reshape(a.shape[0], a.shape[1] // 32, 34)
    d = blocks[..., :2].copy().view(np.float16).astype(np.float64)  # (rows, blocks, 1)
    codes = blocks[..., 2:].copy().view(np.int8).astype(np.float64)
    return raw, (d * codes).reshape(a.shape)


def im2col_ref(x, k, stride, padding):
    """(n, ol, c k) columns, channel-major with the kernel tap fastest (PyTorch's weight order)."""
    n, c, length = x.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (padding, padding)])
    ol = (length + 2 * padding - k) // stride + 1
    return np.stack([xp[:, :, t * stride: t * stride + k].reshape(n, c * k) for t in range(ol)], axis=1)


def quantized_conv(device, x, w, b, compute_type):
    c_out = w.shape[0]
    raw, _ = q8_0_blocks(w.reshape(c_out, -1))
    runner = Runner(device)
    ws = Weights(runner.buffer_type)
    tx, tw, tb = ws.add("x", x), ws.add("w", w), ws.add("b", b)
    matrix = ws.add_raw("matrix", mb.q8_0, (c_out, w[0].size), raw)
    ws.upload()
    out = layers.conv1d(tx, tw, tb, stride=2, padding=1, matrix=matrix, compute_type=compute_type)
    runner.compute(mb.Graph(out), "test")
    return out.get().astype(np.float64)


def test_conv1d_q8_0_matrix(device):
    """A q8_0 product matrix, rows kernel[oc].reshape(-1): the order of im2col's columns. 64 output
    positions, so the CPU dequantizes the weights and keeps the activations f32."""
    x, w, b = randn(2, 32, 128), randn(16, 32, 3), randn(16)
    got = quantized_conv(device, x, w, b, "float32")
    _, wq = q8_0_blocks(w.reshape(16, -1))
    ref = conv1d_ref(x, wq.reshape(w.shape), b, 2, 1, 1)
    np.testing.assert_allclose(got, ref, atol=1e-4)
    assert np.abs(ref - conv1d_ref(x, w, b, 2, 1, 1)).max() > 1e-3  # the weights' rounding shows


def test_conv1d_q8_0_matrix_int8_activations():
    """compute_type "int8" on the CPU: im2col's columns quantized too, per 32 values (d = amax/127,
    codes rounded to nearest even), against the same arithmetic in numpy."""
    x, w, b = randn(2, 32, 128), randn(16, 32, 3), randn(16)
    got = quantized_conv(mb.device("CPU"), x, w, b, "int8")
    cols = im2col_ref(x, 3, 2, 1).astype(np.float32)  # (2, 64, 96)
    blocks = cols.reshape(-1, 32)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    codes = np.clip(np.rint(blocks * (np.float32(127) / np.abs(blocks).max(axis=1, keepdims=True))), -127, 127)
    cols_q = (codes * d.astype(np.float64)).reshape(cols.shape)
    _, wq = q8_0_blocks(w.reshape(16, -1))
    ref = cols_q @ wq.T + b
    np.testing.assert_allclose(got, ref, atol=2e-4)
    assert np.abs(ref - conv1d_ref(x, wq.reshape(w.shape), b, 2, 1, 1)).max() > 1e-3


def test_conv1d_rejects_bad_shapes():
    ctx = mb.Context()
    x, w = ctx.tensor(mb.f32, (1, 4, 10)), ctx.tensor(mb.f32, (3, 5, 3))
    with pytest.raises(mb.InvalidArgumentError, match="4 channels, weight expects 5"):
        layers.conv1d(x, w)
    with pytest.raises(mb.InvalidArgumentError, match="stride 0"):
        layers.conv1d(x, ctx.tensor(mb.f32, (3, 4, 3)), stride=0)
    with pytest.raises(mb.InvalidArgumentError, match="shorter than the kernel"):
        layers.conv1d(ctx.tensor(mb.f32, (1, 4, 2)), ctx.tensor(mb.f32, (3, 4, 5)))
    with pytest.raises(mb.InvalidArgumentError, match=r"matrix must be \(3, 12\)"):
        layers.conv1d(x, ctx.tensor(mb.f32, (3, 4, 3)), matrix=ctx.tensor(mb.f32, (3, 4)))


def attention_ref(q, k, v, mask, scale):
    s = np.einsum("bhnd,bhmd->bhnm", q.astype(np.float64), k.astype(np.float64)) * scale
    if mask is not None:
        s = s + mask.astype(np.float64)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhnm,bhmd->bhnd", p, v.astype(np.float64))  # (b, h, n, d)
    b, h, n, d = out.shape
    return out.transpose(0, 2, 1, 3).reshape(b * n, h * d)


def test_attention_matmul_with_mask(device):
    b, h, n, m, d = 2, 3, 5, 7, 16
    q, k, v = randn(b, h, n, d), randn(b, h, m, d), randn(b, h, m, d)
    mask = np.where(RNG.random((n, m)) < 0.3, -np.inf, 0).astype(np.float32)
    mask[:, 0] = 0
    scale = 1 / math.sqrt(d)
    got = run(device, lambda q, k, v_t, mask: layers.attention_matmul(q, k, v_t, mask, scale),
              q, k, np.ascontiguousarray(v.transpose(0, 1, 3, 2)), mask)
    np.testing.assert_allclose(got, attention_ref(q, k, v, mask, scale), atol=1e-4)


def test_attention_flash(device):
    b, h, n, m, d = 1, 2, 4, 32, 64
    q, k, v = randn(b, h, n, d), randn(b, h, m, d), randn(b, h, m, d)
    scale = 1 / math.sqrt(d)
    got = run(device, lambda q, k, v: layers.attention_flash(q, k, v, None, scale), q,
              k.astype(np.float16), v.astype(np.float16))
    ref = attention_ref(q, k.astype(np.float16), v.astype(np.float16), None, scale)
    np.testing.assert_allclose(got, ref, atol=5e-3)


def test_head_view_and_merge_heads(device):
    x = randn(6, 3 * 32)  # rows of q | k | v, 4 heads of 8
    got = run(device, lambda x: layers.merge_heads(ops.cont(layers.head_view(x, 4, 8, 6, 96, 32))), x)
    np.testing.assert_array_equal(got, x[:, 32:64])
    with pytest.raises(mb.InvalidArgumentError, match="do not fit"):
        layers.head_view(mb.Context().tensor(mb.f32, (6, 96)), 4, 8, 6, 96, 80)


def test_mlp(device):
    x, w1, b1, w2, b2 = randn(4, 16), randn(32, 16), randn(32), randn(16, 32), randn(16)
    got = run(device, lambda *a: layers.mlp(*a, activation=ops.relu, name="mlp"), x, w1, b1, w2, b2)
    h = np.maximum(x.astype(np.float64) @ w1.T + b1, 0)
    np.testing.assert_allclose(got, h @ w2.T.astype(np.float64) + b2, atol=1e-4)


def lstm_ref(x, h, c, w_ih, w_hh, b):
    g = x @ w_ih.T + h @ w_hh.T + b
    i, f, gg, o = np.split(g.astype(np.float64), 4, axis=-1)
    c2 = sigmoid(f) * c + sigmoid(i) * np.tanh(gg)
    return sigmoid(o) * np.tanh(c2), c2


def test_lstm_cell_steps(device):
    hidden, steps = 16, 5
    xs, w_ih, w_hh, b = randn(steps, 8), randn(4 * hidden, 8), randn(4 * hidden, hidden, scale=0.5), randn(4 * hidden)
    h0, c0 = randn(1, hidden), randn(1, hidden)

    def build(xs, w_ih, w_hh, b, h, c):
        gates = layers.lstm_input_gates(xs, w_ih, b)  # (steps, 4H)
        outs = []
        for t in range(steps):
            h, c = layers.lstm_cell(ops.view(gates, (1, 4 * hidden), offset=t * 4 * hidden * 4), h, c, w_hh)
            outs.append(h)
        return ops.concat(ops.concat(outs[-1], c, 0), outs[0], 0)

    got = run(device, build, xs, w_ih, w_hh, b, h0, c0)
    h, c = h0.astype(np.float64), c0.astype(np.float64)
    first = None
    for t in range(steps):
        h, c = lstm_ref(xs[t:t + 1].astype(np.float64), h, c, w_ih, w_hh, b)
        first = h if first is None else first
    np.testing.assert_allclose(got, np.concatenate([h, c, first]), atol=1e-5)


def test_lstm_cell_rejects_mismatched_sizes():
    ctx = mb.Context()
    with pytest.raises(mb.InvalidArgumentError, match="hidden size of 16"):
        layers.lstm_cell(ctx.tensor(mb.f32, (1, 64)), ctx.tensor(mb.f32, (1, 16)), ctx.tensor(mb.f32, (1, 16)),
                         ctx.tensor(mb.f32, (64, 8)))
