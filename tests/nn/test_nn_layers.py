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


def test_conv1d_rejects_bad_shapes():
    ctx = mb.Context()
    x, w = ctx.tensor(mb.f32, (1, 4, 10)), ctx.tensor(mb.f32, (3, 5, 3))
    with pytest.raises(mb.InvalidArgumentError, match="4 channels, weight expects 5"):
        layers.conv1d(x, w)
    with pytest.raises(mb.InvalidArgumentError, match="stride 0"):
        layers.conv1d(x, ctx.tensor(mb.f32, (3, 4, 3)), stride=0)
    with pytest.raises(mb.InvalidArgumentError, match="shorter than the kernel"):
        layers.conv1d(ctx.tensor(mb.f32, (1, 4, 2)), ctx.tensor(mb.f32, (3, 4, 5)))


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
