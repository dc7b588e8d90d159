"""Views of block-quantized tensors (issue 11, item 5).

ggml kernels walk a quantized row block by block from its first byte, so a view of a q4_0/q8_0/...
tensor is only meaningful when dim 0 stays in place as whole blocks laid end to end (nb[0] == block
bytes) and every other stride and the byte offset are multiples of the block size. Views that cut
blocks (a transpose, a permute moving dim 0, a reshape or view to a partial block) are refused when
the graph is built, naming the op, the type and the strides; views that keep whole blocks (permuting
the outer dims, slicing rows) work in every consumer: get(), cont, cpy to f32, get_rows and mul_mat,
on every device, compared with numpy on the dequantized values.
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

QUANTS = [mb.q4_0, mb.q4_1, mb.q5_0, mb.q5_1, mb.q8_0]
QNAMES = {mb.q4_0: "q4_0", mb.q4_1: "q4_1", mb.q5_0: "q5_0", mb.q5_1: "q5_1", mb.q8_0: "q8_0"}


def nmse(out, ref):
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.sum((out - ref) ** 2) / np.sum(ref * ref))


@pytest.mark.parametrize("t", QUANTS, ids=QNAMES.get)
def test_transpose_of_quantized_is_refused(t):
    ctx = mb.Context()
    w = ctx.tensor(t, (64, 64), name="w")
    with pytest.raises(mb.InvalidArgumentError, match=rf"ops\.transpose.*{QNAMES[t]}.*nb=\({2 * t.type_size}, "
                                                      rf"{t.type_size}, .*cut its blocks"):
        mb.ops.transpose(w)
    with pytest.raises(mb.InvalidArgumentError, match="ops.transpose"):
        w.transpose()


@pytest.mark.parametrize("t", [mb.q4_0, mb.q8_0], ids=QNAMES.get)
def test_block_cutting_views_are_refused(t):
    ctx = mb.Context()
    w = ctx.tensor(t, (3, 4, 64), name="w")
    bs = t.type_size
    # Moving dim 0 (the numpy last axis) anywhere else.
    for axes in [(0, 2, 1), (2, 1, 0), (1, 2, 0)]:
        with pytest.raises(mb.InvalidArgumentError, match=r"ops\.permute.*cut its blocks"):
            mb.ops.permute(w, list(axes))
    # Rows that are not whole blocks.
    with pytest.raises(mb.InvalidArgumentError, match=r"ops\.reshape.*16 values in dim 0.*multiple of 32"):
        mb.ops.reshape(w, (48, 16))
    with pytest.raises(mb.InvalidArgumentError, match=r"ops\.view.*multiple of 32"):
        mb.ops.view(w, (4, 16))
    # Strides and offsets that land inside a block.
    with pytest.raises(mb.InvalidArgumentError, match=r"ops\.view.*nb=\(2, "):
        mb.ops.view(w, (4, 64), (2 * bs, 2))
    with pytest.raises(mb.InvalidArgumentError, match=rf"ops\.view.*nb=\({bs}, {bs + 1}, .*multiples of {bs}"):
        mb.ops.view(w, (2, 32), (bs + 1, bs))
    with pytest.raises(mb.InvalidArgumentError, match=r"ops\.view.*at byte offset 2 "):
        mb.ops.view(w, (2, 32), (2 * bs, bs), offset=2)
    # The refusals happen at build time: nothing was added to the context.
    assert len(ctx) == 1


def test_float_transpose_still_allowed():
    ctx = mb.Context()
    for t in (mb.f32, mb.f16, mb.bf16, mb.i32):
        a = ctx.tensor(t, (5, 7))
        assert mb.ops.transpose(a).shape == (7, 5)
        assert mb.ops.permute(ctx.tensor(t, (2, 3, 4)), [2, 0, 1]).shape == (4, 2, 3)


def build_consumers(ctx, t):
    """Valid quantized views and every consumer of them, each with its numpy reference."""
    w = ctx.tensor(t, (3, 5, 64), name="w")
    x = ctx.tensor(mb.f32, (4, 5, 64), name="x")
    x2 = ctx.tensor(mb.f32, (3, 4, 64), name="x2")
    idx = ctx.tensor(mb.i32, (5, 2), name="idx")
    wp = w.permute(1, 0, 2)  # (5, 3, 64): outer dims swapped, rows stay whole blocks
    bs = t.type_size
    rows = mb.ops.view(w, (3, 2, 64), (w.nb[2], 2 * w.nb[1], bs))  # every other row
    half = mb.ops.view(w, (3, 5, 32), (w.nb[2], w.nb[1], bs), offset=bs)  # second block of each row
    dst = ctx.tensor(mb.f32, (5, 3, 64), name="dst")
    outs = {
        "cont": (mb.ops.cont(wp), lambda W, X, X2, I: W.transpose(1, 0, 2)),
        "cpy_f32": (mb.ops.cpy(wp, dst), lambda W, X, X2, I: W.transpose(1, 0, 2)),
        "get_rows": (mb.ops.get_rows(wp, idx),
                     lambda W, X, X2, I: np.stack([W.transpose(1, 0, 2)[b][I[b]] for b in range(5)])),
        "cont_half": (mb.ops.cont(half), lambda W, X, X2, I: W[:, :, 32:]),
        "mul_mat_permuted": (mb.ops.mul_mat(wp, mb.ops.cont(x.permute(1, 0, 2))),
                             lambda W, X, X2, I: np.einsum("bnk,bmk->bmn", W.transpose(1, 0, 2),
                                                           X.transpose(1, 0, 2))),
        "mul_mat_rows": (mb.ops.mul_mat(rows, x2), lambda W, X, X2, I: np.einsum("bnk,bmk->bmn", W[:, 0:4:2], X2)),
    }
    views = {"permuted": (wp, lambda W: W.transpose(1, 0, 2)), "rows": (rows, lambda W: W[:, 0:4:2]),
             "half": (half, lambda W: W[:, :, 32:])}
    return (w, x, x2, idx), outs, views


@pytest.mark.parametrize("t", [mb.q4_0, mb.q8_0, mb.q5_1], ids=QNAMES.get)
def test_whole_block_views_work_in_every_consumer(t, target):
    device, params = target
    rng = np.random.default_rng(5)
    ctx = mb.Context()
    (w, x, x2, idx), outs, views = build_consumers(ctx, t)
    graph = mb.Graph([o for o, _ in outs.values()])
    backend = device.init_backend(params)
    mb.alloc_ctx_tensors(ctx, backend)
    w.set(rng.standard_normal((3, 5, 64)))
    x.set(rng.standard_normal((4, 5, 64)))
    x2.set(rng.standard_normal((3, 4, 64)))
    idx.set(rng.integers(0, 3, (5, 2)).astype(np.int32))
    W, X, X2 = (a.get().astype(np.float64) for a in (w, x, x2))
    I = idx.get()
    for name, (view, ref) in views.items():
        np.testing.assert_array_equal(view.get(), ref(W), err_msg=f"get() of the {name} view")
    assert backend.graph_compute(graph) == mb.Status.SUCCESS
    for name, (out, ref) in outs.items():
        want = ref(W, X, X2, I)
        got = out.get()
        assert got.shape == want.shape, name
        if name.startswith("mul_mat"):
            # Activations are quantized to 8 bits per block for quantized weights (ggml's threshold).
            assert nmse(got, want) < 5e-4, name
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("src_t, dst_t", [(mb.f32, mb.q8_0), (mb.f32, mb.q4_0), (mb.q8_0, mb.q8_0), (mb.q4_0, mb.f32)],
                         ids=["f32-q8_0", "f32-q4_0", "q8_0-q8_0", "q4_0-f32"])
def test_cpy_into_and_from_permuted_quantized_views(src_t, dst_t, target):
    device, params = target
    rng = np.random.default_rng(8)
    ctx = mb.Context()
    src = ctx.tensor(src_t, (5, 3, 64), name="src")
    dst = ctx.tensor(dst_t, (3, 5, 64), name="dst")
    out = mb.ops.cpy(src, dst.permute(1, 0, 2))
    graph = mb.Graph(out)
    backend = device.init_backend(params)
    mb.alloc_ctx_tensors(ctx, backend)
    src.set(rng.standard_normal((5, 3, 64)))
    dst.set(np.zeros((3, 5, 64)))
    assert backend.graph_compute(graph) == mb.Status.SUCCESS
    moved = np.ascontiguousarray(src.get().transpose(1, 0, 2))
    want = moved if dst_t == mb.f32 else mb.dequantize(mb.quantize(moved, dst_t), dst_t, moved.shape)
    np.testing.assert_array_equal(dst.get(), want)
