"""CPU op benchmark: metal_backend's CPU backend side by side with numpy (OpenBLAS), ggml and torch.

    python benchmarks/ops.py [--threads 1 2 4 16] [--min-time 0.3] [--only SUBSTRING]

Prints one table per thread count, all from the same process. Every peer computes the same op on the same data with
the same thread count; each peer runs in bursts, the peers in turn over several rounds, after a quiet gap that lets the
previous peer's spinning worker threads park; each peer's best time is kept. Ratios are peer time /
our time: above 1 means metal_backend is faster.

Peers: numpy (OpenBLAS threads set with threadpoolctl), ggml (the ggml-python package, CPU backend
with a persistent thread pool) and torch (CPU build), each skipped with a note when not installed.
numpy and torch have no quantized matmul: their rows for quantized weights multiply the
dequantised f32 weights, which is what a user of those libraries would run.

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, set on some machines to keep old OpenBLAS builds correct,
make a current numpy pick slower kernels. This script removes both from its own environment before
numpy loads and prints the kernel set OpenBLAS then reports (threadpoolctl), so the peer is measured
at its best. Nothing outside this process changes.

Mat-vec rows (one token) also print the weight bytes read per second (the memory-bandwidth roof is
their goal), and two wake-up ratios of ours against our hot time: the median first call after a
0.25 s pause (our workers parked) and the median first call right after a numpy matmul (OpenBLAS's
workers still spinning on the cores). A decoder that alternates short graphs with host work pays
these on every step.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

_REMOVED_ENV = {k: os.environ.pop(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}

import numpy as np  # noqa: E402  (after the environment is settled)

import metal_backend as mb  # noqa: E402

try:
    from threadpoolctl import threadpool_info, threadpool_limits
except ImportError:  # pragma: no cover - reported in the header
    threadpool_info = threadpool_limits = None

try:
    import ggml
except ImportError:  # pragma: no cover
    ggml = None

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    torch = None


# ---- peers ------------------------------------------------------------------------------------------


class Ours:
    """One graph on the metal_backend CPU backend, inputs set once."""

    def __init__(self, threads, build, inputs):
        self.ctx = mb.Context()
        tensors, out = build(self.ctx)
        self.backend = mb.device("CPU").init_backend()
        self.backend.options = {"n_threads": threads}
        self.buffer = mb.alloc_ctx_tensors(self.ctx, self.backend)
        for t, v in zip(tensors, inputs):
            t.set(v)
        self.out = out
        self.graph = mb.Graph(out)

    def __call__(self):
        self.backend.graph_compute(self.graph)

    def result(self):
        return self.out.get()


class Ggml:
    """One graph on ggml's CPU backend with a persistent thread pool (as whisper.cpp runs it)."""

    def __init__(self, threads, build, inputs):
        params = ggml.ggml_init_params(
            mem_size=ggml.ggml_tensor_overhead() * 64 + ggml.ggml_graph_overhead(), mem_buffer=None, no_alloc=True
        )
        self.ctx = ggml.ggml_init(params)
        tensors, out = build(self.ctx)
        self.graph = ggml.ggml_new_graph(self.ctx)
        ggml.ggml_build_forward_expand(self.graph, out)
        self.backend = ggml.ggml_backend_cpu_init()
        ggml.ggml_backend_cpu_set_n_threads(self.backend, threads)
        tp_params = ggml.ggml_threadpool_params_default(threads)
        self.threadpool = ggml.ggml_threadpool_new(ctypes.byref(tp_params))
        ggml.ggml_backend_cpu_set_threadpool(self.backend, self.threadpool)
        self.buffer = ggml.ggml_backend_alloc_ctx_tensors(self.ctx, self.backend)
        for t, data in zip(tensors, inputs):
            raw = data if isinstance(data, (bytes, bytearray)) else np.ascontiguousarray(data).tobytes()
            if len(raw) != ggml.ggml_nbytes(t):
                raise ValueError(f"ggml tensor wants {ggml.ggml_nbytes(t)} bytes, got {len(raw)}")
            cbuf = (ctypes.c_char * len(raw)).from_buffer_copy(raw)
            ggml.ggml_backend_tensor_set(t, ctypes.cast(cbuf, ctypes.c_void_p), 0, len(raw))
        self.out = out

    def __call__(self):
        ggml.ggml_backend_graph_compute(self.backend, self.graph)

    def result(self):
        n = ggml.ggml_nbytes(self.out)
        buf = (ctypes.c_char * n)()
        ggml.ggml_backend_tensor_get(self.out, ctypes.cast(buf, ctypes.c_void_p), 0, n)
        dtype = np.int32 if self.out.contents.type == ggml.GGML_TYPE_I32 else np.float32
        return np.frombuffer(buf, dtype=dtype).copy()

    def close(self):
        ggml.ggml_backend_buffer_free(self.buffer)
        ggml.ggml_backend_free(self.backend)
        ggml.ggml_threadpool_free(self.threadpool)
        ggml.ggml_free(self.ctx)


GGML_TYPES = {}
if ggml is not None:
    GGML_TYPES = {
        "f32": ggml.GGML_TYPE_F32,
        "f16": ggml.GGML_TYPE_F16,
        "q8_0": ggml.GGML_TYPE_Q8_0,
        "q4_0": ggml.GGML_TYPE_Q4_0,
        "q2_K": ggml.GGML_TYPE_Q2_K,
        "q3_K": ggml.GGML_TYPE_Q3_K,
        "q4_K": ggml.GGML_TYPE_Q4_K,
        "q5_K": ggml.GGML_TYPE_Q5_K,
        "q6_K": ggml.GGML_TYPE_Q6_K,
        "iq4_nl": ggml.GGML_TYPE_IQ4_NL,
        "iq4_xs": ggml.GGML_TYPE_IQ4_XS,
        "mxfp4": ggml.GGML_TYPE_MXFP4,
    }


# ---- rows -------------------------------------------------------------------------------------------


class Row:
    """A benchmark row: how each peer builds and runs it, and its FLOP count (None: not a matmul)."""

    def __init__(self, name, shape, flops, ours, numpy_fn, ggml_spec, torch_fn, tol, weight_bytes=None,
                 numpy_peer=True, canon=None):
        self.name, self.shape, self.flops = name, shape, flops
        self.numpy_peer = numpy_peer  # False: numpy_fn is the reference only (no numpy version), not timed
        # canon: applied to every result (in the reference's shape) and the reference before they are
        # compared, for ops whose order ggml leaves open (top_k: sorted indices)
        self.canon = canon or (lambda v: v)
        self.weight_bytes = weight_bytes  # mat-vec rows: bytes of weights each call reads
        self.ours, self.numpy_fn, self.ggml_spec, self.torch_fn = ours, numpy_fn, ggml_spec, torch_fn
        self.tol = tol  # relative error vs numpy above which the row is flagged


def matmul_row(wtype, n, k, m, rng):
    """x (n, k) times weights (m, k) transposed: ggml's mul_mat(w, x)."""
    w = rng.standard_normal((m, k)).astype(np.float32)
    x = rng.standard_normal((n, k)).astype(np.float32)
    t = getattr(mb, wtype)
    w_raw = mb.quantize(w, t)
    w_deq = mb.dequantize(w_raw, t, (m, k)).astype(np.float32)
    w_t = np.ascontiguousarray(w_deq.T)

    def build_ours(ctx):
        tw = ctx.tensor(t, (m, k), name="w")
        tx = ctx.tensor(mb.f32, (n, k), name="x")
        return [tw, tx], mb.ops.mul_mat(tw, tx)

    def build_ggml(ctx):
        tw = ggml.ggml_new_tensor_2d(ctx, GGML_TYPES[wtype], k, m)
        tx = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, k, n)
        return [tw, tx], ggml.ggml_mul_mat(ctx, tw, tx)

    tw_torch = torch.from_numpy(w_t) if torch is not None else None
    tx_torch = torch.from_numpy(x) if torch is not None else None
    # Quantized weights: activations are quantized to 8 bits, an error near 1% per product term.
    tol = 1e-4 if wtype == "f32" else (1e-3 if wtype == "f16" else 2e-2)
    return Row(
        f"matmul {wtype}",
        f"{n}x{k}x{m}",
        2.0 * n * k * m,
        (build_ours, [w, x]),
        lambda: x @ w_t,
        (build_ggml, [w_raw, x]) if wtype in GGML_TYPES else None,
        (lambda: torch.mm(tx_torch, tw_torch)) if torch is not None else None,
        tol,
        weight_bytes=len(w_raw) if n == 1 else None,
    )


def attention_decode_row(rng):
    """A Whisper decoder step's self-attention (flash_attn_ext's row path): 4 layers, each 20 sequences x
    6 heads of 64 with one query over 224 of a sequence's 448 cached f16 positions, the heads side by side
    in the cache rows (views, as backend_compute reads them); the 4 caches (28 MB read) outgrow the
    caches that a step's weights share, as they do in the decoder. Ours and ggml sum the 4 outputs."""
    layers_, b, h, d, ctx_rows, n = 4, 20, 6, 64, 448, 224
    scale = 1.0 / np.sqrt(d)
    qs = [rng.standard_normal((b, h, 1, d)).astype(np.float32) for _ in range(layers_)]
    caches = [rng.standard_normal((b * ctx_rows, h * d)).astype(np.float16) for _ in range(2 * layers_)]

    def heads(cache):  # (b, h, n, d) of the first n positions of each sequence
        return cache.reshape(b, ctx_rows, h, d)[:, :n].transpose(0, 2, 1, 3).astype(np.float32)

    def np_attention():  # (b, 1, h, d), the layout flash_attn_ext writes, summed over the layers
        out = 0.0
        for i in range(layers_):
            s = np.einsum("bhqd,bhkd->bhqk", qs[i], heads(caches[2 * i])) * np.float32(scale)
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            out = out + np.einsum("bhqk,bhkd->bqhd", e / e.sum(axis=-1, keepdims=True), heads(caches[2 * i + 1]))
        return out

    def build_ours(ctx):
        from metal_backend.nn import layers

        tq = [ctx.tensor(mb.f32, (b, h, 1, d)) for _ in range(layers_)]
        tc = [ctx.tensor(mb.f16, (b * ctx_rows, h * d)) for _ in range(2 * layers_)]
        out = None
        for i in range(layers_):
            k, v = (layers.head_view(c, h, d, n, h * d, 0, b, ctx_rows) for c in (tc[2 * i], tc[2 * i + 1]))
            a = mb.ops.flash_attn_ext(tq[i], k, v, None, scale)
            out = a if out is None else mb.ops.add(out, a)
        return [*tq, *tc], out

    def build_ggml(ctx):
        tq = [ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, d, 1, h, b) for _ in range(layers_)]
        tc = [ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F16, h * d, b * ctx_rows) for _ in range(2 * layers_)]
        out = None
        for i in range(layers_):
            k, v = (ggml.ggml_view_4d(ctx, c, d, n, h, b, h * d * 2, d * 2, ctx_rows * h * d * 2, 0)
                    for c in (tc[2 * i], tc[2 * i + 1]))
            a = ggml.ggml_flash_attn_ext(ctx, tq[i], k, v, None, scale, 0.0, 0.0)
            ggml.ggml_flash_attn_ext_set_prec(a, ggml.GGML_PREC_F32)
            out = a if out is None else ggml.ggml_add(ctx, out, a)
        return [*tq, *tc], out

    torch_fn = None
    if torch is not None:
        tq = [torch.from_numpy(q) for q in qs]
        tc = [torch.from_numpy(c).view(b, ctx_rows, h, d)[:, :n].transpose(1, 2) for c in caches]

        def torch_fn():  # f16 strided views as stored: SDPA reads them converted (its CPU kernels take one type)
            return sum(F.scaled_dot_product_attention(tq[i], tc[2 * i].float(), tc[2 * i + 1].float())
                       for i in range(layers_))

    flops = 4.0 * layers_ * b * h * n * d
    return Row("attn decode", f"{layers_}x{b}x{h}x1x{n}x{d}", flops, (build_ours, [*qs, *caches]), np_attention,
               (build_ggml, [*qs, *caches]), torch_fn, 1e-4, numpy_peer=False)


def softmax_row(rng):
    a = rng.standard_normal((6, 1500, 1500)).astype(np.float32)

    def np_softmax():
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.soft_max(t)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_3d(ctx, ggml.GGML_TYPE_F32, 1500, 1500, 6)
        return [t], ggml.ggml_soft_max(ctx, t)

    ta = torch.from_numpy(a) if torch is not None else None
    return Row("softmax", "6x1500x1500", None, (build_ours, [a]), np_softmax, (build_ggml, [a]),
               (lambda: torch.softmax(ta, dim=-1)) if torch is not None else None, 1e-4)


def attention_rows(rng):
    """Whisper tiny's encoder self-attention (6 heads of 64, 1500 queries and keys, no mask), f32: ours
    as flash_attn_ext (f32 keys and values, and bf16 ones: the int8 compute type's on AVX512_BF16
    hosts) and as mul_mat + soft_max_ext + mul_mat (the graph the matmul path builds),
    against ggml's flash_attn_ext (f16 keys and values, as whisper.cpp stores them) and torch's
    scaled_dot_product_attention."""
    h, n, d = 6, 1500, 64
    q, k, v = (rng.standard_normal((1, h, n, d)).astype(np.float32) for _ in range(3))
    scale = 1.0 / np.sqrt(d)

    def np_attention():  # (1, n, h, d), the layout flash_attn_ext writes
        s = np.einsum("bhqd,bhkd->bhqk", q, k) * np.float32(scale)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return np.einsum("bhqk,bhkd->bqhd", e / e.sum(axis=-1, keepdims=True), v)

    def build_flash(ctx):
        t = [ctx.tensor(mb.f32, (1, h, n, d)) for _ in range(3)]
        return t, mb.ops.flash_attn_ext(t[0], t[1], t[2], None, scale)

    def build_flash_bf16(ctx):  # the int8 compute type's encoder attention on AVX512_BF16 hosts
        t = [ctx.tensor(mb.f32, (1, h, n, d)), ctx.tensor(mb.bf16, (1, h, n, d)), ctx.tensor(mb.bf16, (1, h, n, d))]
        return t, mb.ops.flash_attn_ext(t[0], t[1], t[2], None, scale)

    def build_matmul(ctx):
        tq, tk = (ctx.tensor(mb.f32, (1, h, n, d)) for _ in range(2))
        tvt = ctx.tensor(mb.f32, (1, h, d, n))
        probs = mb.ops.soft_max_ext(mb.ops.mul_mat(tk, tq), None, scale, 0.0)
        return [tq, tk, tvt], mb.ops.cont(mb.ops.permute(mb.ops.mul_mat(tvt, probs), [0, 2, 1, 3]))

    def build_ggml(ctx):
        tq = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, d, n, h, 1)
        tk, tv = (ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F16, d, n, h, 1) for _ in range(2))
        out = ggml.ggml_flash_attn_ext(ctx, tq, tk, tv, None, scale, 0.0, 0.0)
        ggml.ggml_flash_attn_ext_set_prec(out, ggml.GGML_PREC_F32)
        return [tq, tk, tv], out

    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v)) if torch is not None else (None, None, None)
    torch_fn = (lambda: F.scaled_dot_product_attention(tq, tk, tv)) if torch is not None else None
    flops = 4.0 * h * n * n * d
    ggml_spec = (build_ggml, [q, k.astype(np.float16), v.astype(np.float16)])
    vt = np.ascontiguousarray(np.swapaxes(v, 2, 3))
    return [Row("attn flash", f"{h}x{n}x{n}x{d}", flops, (build_flash, [q, k, v]), np_attention, ggml_spec,
                torch_fn, 1e-4, numpy_peer=False),
            Row("attn flash bf16", f"{h}x{n}x{n}x{d}", flops, (build_flash_bf16, [q, k, v]), np_attention, ggml_spec,
                torch_fn, 1e-2, numpy_peer=False),
            Row("attn matmul", f"{h}x{n}x{n}x{d}", flops, (build_matmul, [q, k, vt]), np_attention, ggml_spec,
                torch_fn, 1e-4, numpy_peer=False)]


def norm_row(rng):
    a = rng.standard_normal((1500, 384)).astype(np.float32)
    eps = 1e-5

    def np_norm():
        mu = a.mean(axis=-1, keepdims=True)
        return (a - mu) / np.sqrt(((a - mu) ** 2).mean(axis=-1, keepdims=True) + eps)

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.norm(t, eps)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, 384, 1500)
        return [t], ggml.ggml_norm(ctx, t, eps)

    ta = torch.from_numpy(a) if torch is not None else None
    return Row("layer norm", "1500x384", None, (build_ours, [a]), np_norm, (build_ggml, [a]),
               (lambda: F.layer_norm(ta, (384,), eps=eps)) if torch is not None else None, 1e-4)


def gelu_row(rng):
    a = rng.standard_normal((1500, 1536)).astype(np.float32)
    c = np.float32(np.sqrt(2.0 / np.pi))

    def np_gelu():
        return 0.5 * a * (1.0 + np.tanh(c * (a + np.float32(0.044715) * a * a * a)))

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.gelu(t)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, 1536, 1500)
        return [t], ggml.ggml_gelu(ctx, t)

    ta = torch.from_numpy(a) if torch is not None else None
    # ggml itself evaluates GELU through an f16 table; 1e-3 allows a table too.
    return Row("gelu", "1500x1536", None, (build_ours, [a]), np_gelu, (build_ggml, [a]),
               (lambda: F.gelu(ta, approximate="tanh")) if torch is not None else None, 1e-3)


def add_row(rng):
    a = rng.standard_normal((1500, 384)).astype(np.float32)
    b = rng.standard_normal((1500, 384)).astype(np.float32)

    def build_ours(ctx):
        ta, tb = ctx.tensor(mb.f32, a.shape), ctx.tensor(mb.f32, b.shape)
        return [ta, tb], mb.ops.add(ta, tb)

    def build_ggml(ctx):
        ta = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, 384, 1500)
        tb = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, 384, 1500)
        return [ta, tb], ggml.ggml_add(ctx, ta, tb)

    tta = torch.from_numpy(a) if torch is not None else None
    ttb = torch.from_numpy(b) if torch is not None else None
    return Row("add", "1500x384", None, (build_ours, [a, b]), lambda: a + b, (build_ggml, [a, b]),
               (lambda: torch.add(tta, ttb)) if torch is not None else None, 1e-6)


def mul_mat_id_row(rng):
    """A MoE layer's routed up-projection: 32 tokens, 2 of 8 experts each, 384 -> 1536."""
    e, n, k, t, used = 8, 1536, 384, 32, 2
    w = rng.standard_normal((e, n, k)).astype(np.float32)
    x = rng.standard_normal((t, 1, k)).astype(np.float32)
    ids = np.stack([rng.permutation(e)[:used] for _ in range(t)]).astype(np.int32)

    def np_moe():
        # Per expert: gather its tokens, one matmul (what a numpy MoE layer runs).
        out = np.empty((t, used, n), np.float32)
        for j in range(e):
            tok, slot = np.nonzero(ids == j)
            if tok.size:
                out[tok, slot] = x[tok, 0] @ w[j].T
        return out

    def build_ours(ctx):
        tw, tx, ti = ctx.tensor(mb.f32, w.shape), ctx.tensor(mb.f32, x.shape), ctx.tensor(mb.i32, ids.shape)
        return [tw, tx, ti], mb.ops.mul_mat_id(tw, tx, ti)

    torch_fn = None
    if torch is not None:
        # As numpy's: per expert, its tokens through one matmul (gathering every token's expert weights,
        # tw[ids], would copy 32 x 2 matrices and time the copy, not the product).
        tw, tx = torch.from_numpy(w), torch.from_numpy(x[:, 0])
        routes = [(j, *(torch.from_numpy(v) for v in np.nonzero(ids == j))) for j in range(e)]
        routes = [(j, tok, slot) for j, tok, slot in routes if tok.numel()]

        def torch_fn():
            out = torch.empty((t, used, n))
            for j, tok, slot in routes:
                out[tok, slot] = tx[tok] @ tw[j].T
            return out

    def build_ggml(ctx):
        tw = ggml.ggml_new_tensor_3d(ctx, ggml.GGML_TYPE_F32, k, n, e)
        tx = ggml.ggml_new_tensor_3d(ctx, ggml.GGML_TYPE_F32, k, 1, t)
        ti = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_I32, used, t)
        return [tw, tx, ti], ggml.ggml_mul_mat_id(ctx, tw, tx, ti)

    return Row("mul_mat_id", f"{t}x{k}x{n} {used}/{e}", 2.0 * t * used * n * k, (build_ours, [w, x, ids]), np_moe,
               (build_ggml, [w, x, ids]), torch_fn, 1e-4)


def argsort_row(rng):
    a = rng.standard_normal((512, 1000)).astype(np.float32)

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.argsort(t)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, 1000, 512)
        return [t], ggml.ggml_argsort(ctx, t, ggml.GGML_SORT_ORDER_ASC)

    ta = torch.from_numpy(a) if torch is not None else None
    return Row("argsort", "512x1000", None, (build_ours, [a]), lambda: np.argsort(a, axis=-1, kind="stable"),
               (build_ggml, [a]),
               (lambda: torch.argsort(ta, dim=-1, stable=True)) if torch is not None else None, 0.0)


def top_k_row(rng):
    rows, n, k = 64, 32000, 40
    a = rng.standard_normal((rows, n)).astype(np.float32)

    def np_top_k():
        part = np.argpartition(-a, k, axis=-1)[:, :k]
        return np.take_along_axis(part, np.argsort(-np.take_along_axis(a, part, -1), axis=-1, kind="stable"), -1)

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.top_k(t, k)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, n, rows)
        return [t], ggml.ggml_top_k(ctx, t, k)

    ta = torch.from_numpy(a) if torch is not None else None
    # ggml leaves the order of the k indices open (it swaps the first two): compared as sorted sets.
    return Row("top_k", f"{rows}x{n} k={k}", None, (build_ours, [a]), np_top_k, (build_ggml, [a]),
               (lambda: torch.topk(ta, k, dim=-1)) if torch is not None else None, 0.0,
               canon=lambda v: np.sort(v, axis=-1))


def group_norm_row(rng):
    a = rng.standard_normal((1, 320, 64, 64)).astype(np.float32)
    groups, eps = 32, 1e-6

    def np_group_norm():
        g = a.reshape(1, groups, -1)
        m = g.mean(axis=-1, keepdims=True)
        v = ((g - m) ** 2).mean(axis=-1, keepdims=True)
        return ((g - m) / np.sqrt(v + eps)).reshape(a.shape)

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.group_norm(t, groups, eps)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, 64, 64, 320, 1)
        return [t], ggml.ggml_group_norm(ctx, t, groups, eps)

    ta = torch.from_numpy(a) if torch is not None else None
    return Row("group_norm", "320x64x64 g32", None, (build_ours, [a]), np_group_norm, (build_ggml, [a]),
               (lambda: F.group_norm(ta, groups, eps=eps)) if torch is not None else None, 1e-4)


def conv_transpose_1d_row(rng):
    """A vocoder's 8x upsampling layer: 256 -> 128 channels, kernel 16, 200 frames (no padding: ggml's
    CPU kernel takes p0 = 0 only)."""
    ic, oc, k, length, s, p = 256, 128, 16, 200, 8, 0
    w = rng.standard_normal((ic, oc, k)).astype(np.float32)
    x = rng.standard_normal((1, ic, length)).astype(np.float32)
    ol = (length - 1) * s - 2 * p + (k - 1) + 1

    def np_conv_t():
        full = np.zeros((oc, (length - 1) * s + k), np.float32)
        for j in range(k):
            full[:, j:j + (length - 1) * s + 1:s] += w[:, :, j].T @ x[0]
        return full[None, :, p:p + ol]

    def build_ours(ctx):
        tw, tx = ctx.tensor(mb.f32, w.shape), ctx.tensor(mb.f32, x.shape)
        return [tw, tx], mb.ops.conv_transpose_1d(tw, tx, s, p, 1)

    def build_ggml(ctx):
        tw = ggml.ggml_new_tensor_3d(ctx, ggml.GGML_TYPE_F32, k, oc, ic)
        tx = ggml.ggml_new_tensor_3d(ctx, ggml.GGML_TYPE_F32, length, ic, 1)
        return [tw, tx], ggml.ggml_conv_transpose_1d(ctx, tw, tx, s, p, 1)

    tw = torch.from_numpy(w) if torch is not None else None
    tx = torch.from_numpy(x) if torch is not None else None
    return Row("conv_t_1d", f"{ic}x{length}->{oc}x{ol}", 2.0 * ic * oc * k * length, (build_ours, [w, x]), np_conv_t,
               (build_ggml, [w, x]),
               (lambda: F.conv_transpose1d(tx, tw, stride=s, padding=p)) if torch is not None else None, 1e-4)


def cumsum_row(rng):
    a = rng.standard_normal((512, 4096)).astype(np.float32)

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.cumsum(t)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, 4096, 512)
        return [t], ggml.ggml_cumsum(ctx, t)

    ta = torch.from_numpy(a) if torch is not None else None
    return Row("cumsum", "512x4096", None, (build_ours, [a]), lambda: np.cumsum(a, axis=-1), (build_ggml, [a]),
               (lambda: torch.cumsum(ta, dim=-1)) if torch is not None else None, 1e-5)


def out_prod_row(rng):
    """A weight gradient: 1500 tokens, 384 x 384 (ggml_out_prod(a, b) = b^T a over the tokens)."""
    k, m, n = 1500, 384, 384
    a = rng.standard_normal((k, m)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)

    def build_ours(ctx):
        ta, tb = ctx.tensor(mb.f32, a.shape), ctx.tensor(mb.f32, b.shape)
        return [ta, tb], mb.ops.out_prod(ta, tb)

    def build_ggml(ctx):
        ta = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, m, k)
        tb = ggml.ggml_new_tensor_2d(ctx, ggml.GGML_TYPE_F32, n, k)
        return [ta, tb], ggml.ggml_out_prod(ctx, ta, tb)

    ta = torch.from_numpy(a) if torch is not None else None
    tb = torch.from_numpy(b) if torch is not None else None
    return Row("out_prod", f"{k}x{m} {k}x{n}", 2.0 * k * m * n, (build_ours, [a, b]), lambda: b.T @ a,
               (build_ggml, [a, b]), (lambda: tb.T @ ta) if torch is not None else None, 1e-5)


def conv_2d_row(rng):
    """A UNet block's 3x3 convolution: 64 -> 64 channels on 64x64, padding 1."""
    c, oc, h, w, k = 64, 64, 64, 64, 3
    kern = (rng.standard_normal((oc, c, k, k)) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)

    def np_conv():
        xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))  # (c, h, w, k, k)
        return np.tensordot(kern, win, axes=([1, 2, 3], [0, 3, 4]))[None]

    def build_ours(ctx):
        tk, tx = ctx.tensor(mb.f32, kern.shape), ctx.tensor(mb.f32, x.shape)
        return [tk, tx], mb.ops.conv_2d_direct(tk, tx, 1, 1, 1, 1, 1, 1)

    def build_ggml(ctx):
        tk = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, k, k, c, oc)
        tx = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, w, h, c, 1)
        return [tk, tx], ggml.ggml_conv_2d_direct(ctx, tk, tx, 1, 1, 1, 1, 1, 1)

    tk = torch.from_numpy(kern) if torch is not None else None
    tx = torch.from_numpy(x) if torch is not None else None
    return Row("conv_2d", f"{c}x{h}x{w} k3 ->{oc}", 2.0 * oc * c * k * k * h * w, (build_ours, [kern, x]), np_conv,
               (build_ggml, [kern, x]), (lambda: F.conv2d(tx, tk, padding=1)) if torch is not None else None, 1e-4)


def conv_2d_dw_row(rng):
    """A depthwise 3x3 convolution (MobileNet-style block): 64 channels on 64x64, padding 1."""
    c, h, w, k = 64, 64, 64, 3
    kern = (rng.standard_normal((c, 1, k, k)) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)

    def np_conv_dw():
        xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(1, 2))  # (c, h, w, k, k)
        return np.einsum("chwyx,cyx->chw", win, kern[:, 0])[None]

    def build_ours(ctx):
        tk, tx = ctx.tensor(mb.f32, kern.shape), ctx.tensor(mb.f32, x.shape)
        return [tk, tx], mb.ops.conv_2d_dw_direct(tk, tx, 1, 1, 1, 1, 1, 1)

    def build_ggml(ctx):
        tk = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, k, k, 1, c)
        tx = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, w, h, c, 1)
        return [tk, tx], ggml.ggml_conv_2d_dw_direct(ctx, tk, tx, 1, 1, 1, 1, 1, 1)

    tk = torch.from_numpy(kern) if torch is not None else None
    tx = torch.from_numpy(x) if torch is not None else None
    return Row("conv_2d_dw", f"{c}x{h}x{w} k3", 2.0 * c * k * k * h * w, (build_ours, [kern, x]), np_conv_dw,
               (build_ggml, [kern, x]), (lambda: F.conv2d(tx, tk, padding=1, groups=c)) if torch is not None else None,
               1e-4)


def pool_2d_row(rng):
    """2x2 max pooling, stride 2: 64 channels of 128x128 -> 64x64."""
    c, h, w = 64, 128, 128
    x = rng.standard_normal((1, c, h, w)).astype(np.float32)

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, x.shape)
        return [t], mb.ops.pool_2d(t, "max", 2, 2, 2, 2)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, w, h, c, 1)
        return [t], ggml.ggml_pool_2d(ctx, t, ggml.GGML_OP_POOL_MAX, 2, 2, 2, 2, 0.0, 0.0)

    tx = torch.from_numpy(x) if torch is not None else None
    return Row("pool_2d", f"max {c}x{h}x{w} k2 s2", None, (build_ours, [x]),
               lambda: x.reshape(1, c, h // 2, 2, w // 2, 2).max(axis=(3, 5)), (build_ggml, [x]),
               (lambda: F.max_pool2d(tx, 2)) if torch is not None else None, 1e-6)


def conv_transpose_2d_row(rng):
    """A UNet decoder's 2x upsampling: 64 -> 32 channels, kernel 4, stride 2, 32x32 -> 66x66."""
    ic, oc, h, w, k, s = 64, 32, 32, 32, 4, 2
    kern = (rng.standard_normal((ic, oc, k, k)) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, ic, h, w)).astype(np.float32)

    def np_conv_t():
        out = np.zeros((1, oc, (h - 1) * s + k, (w - 1) * s + k), np.float32)
        for ky in range(k):
            for kx in range(k):
                out[0, :, ky:ky + (h - 1) * s + 1:s, kx:kx + (w - 1) * s + 1:s] += np.tensordot(
                    kern[:, :, ky, kx], x[0], axes=([0], [0]))
        return out

    def build_ours(ctx):
        tk, tx = ctx.tensor(mb.f32, kern.shape), ctx.tensor(mb.f32, x.shape)
        return [tk, tx], mb.ops.conv_transpose_2d_p0(tk, tx, s)

    def build_ggml(ctx):
        tk = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, k, k, oc, ic)
        tx = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, w, h, ic, 1)
        return [tk, tx], ggml.ggml_conv_transpose_2d_p0(ctx, tk, tx, s)

    tk = torch.from_numpy(kern) if torch is not None else None
    tx = torch.from_numpy(x) if torch is not None else None
    return Row("conv_t_2d", f"{ic}x{h}x{w} k4 s2 ->{oc}", 2.0 * ic * oc * k * k * h * w, (build_ours, [kern, x]),
               np_conv_t, (build_ggml, [kern, x]),
               (lambda: F.conv_transpose2d(tx, tk, stride=s)) if torch is not None else None, 1e-4)


def ssm_scan_row(rng):
    """Mamba-2 130M's scan over a 64-token prompt: 24 heads of 64, d_state 128, one group."""
    nt, nh, nr, nc = 64, 24, 64, 128
    s = (rng.standard_normal((1, nh, nr, nc)) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, nt, nh, nr)).astype(np.float32)
    dt = rng.standard_normal((1, nt, nh)).astype(np.float32)
    A = -rng.uniform(0.5, 2.0, (nh, 1)).astype(np.float32)
    B = rng.standard_normal((1, nt, 1, nc)).astype(np.float32)
    C = rng.standard_normal((1, nt, 1, nc)).astype(np.float32)
    ids = np.zeros(1, np.int32)

    def scan(lib, st, xx, d, a, b, c):
        dsp = lib.where(d > 20, d, lib.log1p(lib.exp(d)))  # (nt, nh)
        ys = []
        for t in range(nt):
            decay = lib.exp(dsp[t][:, None] * a)[:, None, :]
            st = st * decay + b[t][:, None, :] * (xx[t] * dsp[t][:, None])[:, :, None]
            ys.append((st * c[t][:, None, :]).sum(-1))
        return ys, st

    def np_scan():
        ys, st = scan(np, s[0], x[0], dt[0], A, B[0, :, 0][:, None], C[0, :, 0][:, None])
        return np.concatenate([np.stack(ys).ravel(), st.ravel()])

    def build_ours(ctx):
        ts = [ctx.tensor(mb.f32, v.shape) for v in (s, x, dt, A, B, C)] + [ctx.tensor(mb.i32, ids.shape)]
        return ts, mb.ops.ssm_scan(*ts)

    def build_ggml(ctx):
        f = ggml.GGML_TYPE_F32
        ts = [ggml.ggml_new_tensor_4d(ctx, f, nc, nr, nh, 1), ggml.ggml_new_tensor_4d(ctx, f, nr, nh, nt, 1),
              ggml.ggml_new_tensor_3d(ctx, f, nh, nt, 1), ggml.ggml_new_tensor_2d(ctx, f, 1, nh),
              ggml.ggml_new_tensor_4d(ctx, f, nc, 1, nt, 1), ggml.ggml_new_tensor_4d(ctx, f, nc, 1, nt, 1),
              ggml.ggml_new_tensor_1d(ctx, ggml.GGML_TYPE_I32, 1)]
        return ts, ggml.ggml_ssm_scan(ctx, *ts)

    torch_fn = None
    if torch is not None:
        tt = [torch.from_numpy(np.ascontiguousarray(v)) for v in (s[0], x[0], dt[0], A, B[0, :, 0][:, None],
                                                                   C[0, :, 0][:, None])]

        def torch_fn():
            return scan(torch, *tt)

    inputs = [s, x, dt, A, B, C, ids]
    return Row("ssm_scan", f"{nt}t {nh}x{nr} d{nc}", None, (build_ours, inputs), np_scan, (build_ggml, inputs),
               torch_fn, 1e-4)


def rwkv_rows(rng):
    """RWKV-6 / RWKV-7 1.6B's WKV over a 64-token prompt: 32 heads of 64."""
    T, H, S = 64, 32, 64
    tok = [rng.standard_normal((T, H, S)).astype(np.float32) * 0.5 for _ in range(4)]
    decay = rng.uniform(0.5, 0.99, (T, H, S)).astype(np.float32)
    state = (rng.standard_normal((1, S * S * H)) * 0.1).astype(np.float32)
    tf = rng.standard_normal((H, S)).astype(np.float32)
    rows = []

    def wkv6(lib, k, v, r, tf_, td, st):
        M = st.reshape(H, S, S)
        ys = []
        for t in range(T):
            kv = k[t][:, :, None] * v[t][:, None, :]
            ys.append((r[t][:, :, None] * (tf_[:, :, None] * kv + M)).sum(1))
            M = M * td[t][:, :, None] + kv
        return ys, M

    def wkv7(lib, r, w, k, v, a, b, st):
        M = st.reshape(H, S, S)
        ys = []
        for t in range(T):
            sa = (M * a[t][:, None, :]).sum(-1)
            M = M * w[t][:, None, :] + v[t][:, :, None] * k[t][:, None, :] + sa[:, :, None] * b[t][:, None, :]
            ys.append((M * r[t][:, None, :]).sum(-1))
        return ys, M

    f = ggml.GGML_TYPE_F32 if ggml is not None else None
    for name, fn, inputs in [("rwkv_wkv6", wkv6, [tok[0], tok[1], tok[2], tf, decay, state]),
                             ("rwkv_wkv7", wkv7, [tok[0], decay, tok[1], tok[2], -tok[3] * 0.1, tok[3] * 0.1,
                                                  state])]:
        op = getattr(mb.ops, name)

        def np_fn(fn=fn, inputs=inputs):
            ys, M = fn(np, *inputs[:-1], inputs[-1][0])
            return np.concatenate([np.stack(ys).ravel(), M.ravel()])

        def build_ours(ctx, op=op, inputs=inputs):
            ts = [ctx.tensor(mb.f32, v.shape) for v in inputs]
            return ts, op(*ts)

        def build_ggml(ctx, name=name, inputs=inputs):
            ts = []
            for v in inputs:
                ne = v.shape[::-1]
                new = ggml.ggml_new_tensor_3d if len(ne) == 3 else ggml.ggml_new_tensor_2d
                ts.append(new(ctx, f, *ne))
            return ts, getattr(ggml, "ggml_" + name)(ctx, *ts)

        torch_fn = None
        if torch is not None:
            tt = [torch.from_numpy(np.ascontiguousarray(v)) for v in inputs[:-1]] + [torch.from_numpy(inputs[-1][0])]

            def torch_fn(fn=fn, tt=tt):
                return fn(torch, *tt)

        rows.append(Row(name, f"{T}t {H}x{S}", None, (build_ours, inputs), np_fn, (build_ggml, inputs), torch_fn,
                        1e-4))
    return rows


def interpolate_row(mode, rng):
    """A UNet decoder's 2x resampling: 1x128x64x64 -> 128x128 (ggml's half-pixel sampling, as torch's
    align_corners=False)."""
    c, h, w = 128, 64, 64
    a = rng.standard_normal((1, c, h, w)).astype(np.float32)
    oh, ow = 2 * h, 2 * w

    def np_bilinear():
        def axis(n_in, n_out):
            p = (np.arange(n_out, dtype=np.float32) + 0.5) / np.float32(n_out / n_in) - 0.5
            p0 = np.floor(p).astype(np.int64)
            lo, hi = np.clip(p0, 0, n_in - 1), np.clip(p0 + 1, 0, n_in - 1)
            return lo, hi, np.clip(p - lo, 0, 1)
        ylo, yhi, dy = axis(h, oh)
        xlo, xhi, dx = axis(w, ow)
        top = a[:, :, ylo][..., xlo] * (1 - dx) + a[:, :, ylo][..., xhi] * dx
        bot = a[:, :, yhi][..., xlo] * (1 - dx) + a[:, :, yhi][..., xhi] * dx
        return top * (1 - dy[:, None]) + bot * dy[:, None]

    ta = torch.from_numpy(a) if torch is not None else None
    torch_fn = None
    if torch is not None:
        def torch_fn():
            return F.interpolate(ta, scale_factor=2, mode=mode, align_corners=False)
    if mode == "bicubic":  # numpy has no bicubic: torch's result (Keys a = -0.75, as ggml) is the reference
        ref = torch_fn().numpy() if torch is not None else None

        def np_fn():
            return ref
    else:
        np_fn = np_bilinear

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.upscale(t, 2, mode)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, w, h, c, 1)
        return [t], ggml.ggml_interpolate(ctx, t, ow, oh, c, 1, 1 if mode == "bilinear" else 2)

    return Row(f"upscale {mode[:5]}", f"{c}x{h}x{w} x2", None, (build_ours, [a]), np_fn, (build_ggml, [a]), torch_fn,
               1e-4, numpy_peer=mode != "bicubic")


def antialias_row(rng):
    """A vision encoder's antialiased 2x downsampling: 1x64x128x128 -> 64x64 (bilinear, antialias: torch's
    antialias=True, ggml's GGML_SCALE_FLAG_ANTIALIAS)."""
    c, h, w = 64, 128, 128
    a = rng.standard_normal((1, c, h, w)).astype(np.float32)
    oh, ow = h // 2, w // 2
    ta = torch.from_numpy(a) if torch is not None else None
    torch_fn = None
    if torch is not None:
        def torch_fn():
            return F.interpolate(ta, size=(oh, ow), mode="bilinear", align_corners=False, antialias=True)
    ref = torch_fn().numpy() if torch is not None else None  # numpy has no antialiased resize: torch is the reference

    def build_ours(ctx):
        t = ctx.tensor(mb.f32, a.shape)
        return [t], mb.ops.interpolate(t, (1, c, oh, ow), "bilinear", antialias=True)

    def build_ggml(ctx):
        t = ggml.ggml_new_tensor_4d(ctx, ggml.GGML_TYPE_F32, w, h, c, 1)
        return [t], ggml.ggml_interpolate(ctx, t, ow, oh, c, 1, 1 | 512)

    return Row("upscale bil_aa", f"{c}x{h}x{w} /2", None, (build_ours, [a]), lambda: ref, (build_ggml, [a]),
               torch_fn, 1e-4, numpy_peer=False)


def all_rows(rng):
    rows = [matmul_row("f32", n, k, m, rng) for (n, k, m) in
            [(1500, 384, 384), (1500, 384, 1536), (1500, 1536, 384), (2048, 2048, 2048)]]
    for wtype in ("f16", "q8_0", "q4_0"):
        for (k, m) in [(384, 1536), (1536, 384)]:
            for n in (1, 1500):
                rows.append(matmul_row(wtype, n, k, m, rng))
    # ggml's super-block and non-linear types (K a multiple of 256: whisper base's 512 and 2048).
    for wtype in ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs", "mxfp4"):
        for (k, m) in [(512, 2048), (2048, 512)]:
            for n in (1, 1500):
                rows.append(matmul_row(wtype, n, k, m, rng))
    rows += [softmax_row(rng), *attention_rows(rng), attention_decode_row(rng), norm_row(rng), gelu_row(rng),
             add_row(rng)]
    rows += [mul_mat_id_row(rng), argsort_row(rng), top_k_row(rng), group_norm_row(rng), conv_transpose_1d_row(rng)]
    rows += [ssm_scan_row(rng), *rwkv_rows(rng), interpolate_row("bilinear", rng), interpolate_row("bicubic", rng)]
    rows += [cumsum_row(rng), out_prod_row(rng), conv_2d_row(rng), conv_2d_dw_row(rng), pool_2d_row(rng),
             conv_transpose_2d_row(rng)]
    if torch is not None:
        rows.append(antialias_row(rng))
    return rows


# ---- timing -----------------------------------------------------------------------------------------


# OpenBLAS's idle workers keep spinning on a core for about 0.11 s after each call (measured here with
# getrusage across a sleep after a numpy matmul: 0.11 s of CPU burnt in a 0.2 s or 0.4 s sleep; torch's
# workers: about 0.01 s). Calling the peers in turn, call by call, therefore timed every other peer
# with one of the two cores taken by numpy's spinner. Each peer now runs in bursts after that spin
# has ended.
SETTLE_S = 0.15


def time_bursts(fns, min_time, rounds=3, min_calls=3):
    """Best time of each callable: `rounds` rounds, in each a burst per callable after a quiet gap of
    SETTLE_S (other peers' spinning workers parked), one untimed warm-up call, then timed calls until
    the burst ran min_time / rounds and at least min_calls times. Rounds spread load from other
    processes over all peers."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            time.sleep(SETTLE_S)
            fn()
            spent, calls = 0.0, 0
            while calls < min_calls or spent < min_time / rounds:
                t0 = time.perf_counter()
                fn()
                dt = time.perf_counter() - t0
                best[i] = min(best[i], dt)
                spent += dt
                calls += 1
    return best


PAUSE_S = 0.25


def pause_ratio(fn, hot, samples=5):
    """Median time of fn's first call after a PAUSE_S pause over its hot time: our wake-up ratio, and
    the same for a peer (torch's OpenMP workers park too) as a yardstick."""
    after_pause = []
    for _ in range(samples):
        time.sleep(PAUSE_S)
        t0 = time.perf_counter()
        fn()
        after_pause.append(time.perf_counter() - t0)
    return float(np.median(after_pause)) / hot


def after_numpy_ratio(ours, hot, samples=5):
    """Median time of our first call right after a numpy matmul (OpenBLAS's workers still spinning)
    over our hot time."""
    a = np.ones((384, 384), dtype=np.float32)
    after_numpy = []
    for _ in range(samples):
        a @ a
        t0 = time.perf_counter()
        ours()
        after_numpy.append(time.perf_counter() - t0)
    return float(np.median(after_numpy)) / hot


def pause_cost(fn, samples=5):
    """Extra time, in seconds, of fn's first call after a PAUSE_S pause over a hot call (medians)."""
    for _ in range(100):
        fn()
    hot = []
    for _ in range(200):
        t0 = time.perf_counter()
        fn()
        hot.append(time.perf_counter() - t0)
    cold = []
    for _ in range(samples):
        time.sleep(PAUSE_S)
        t0 = time.perf_counter()
        fn()
        cold.append(time.perf_counter() - t0)
    return float(np.median(cold)) - float(np.median(hot))


def host_pause_cost():
    """What any library pays after sleeping here (cold caches, a core woken from idle), the floor under
    every pause/hot ratio: the extra time of a 1000-element numpy dot after the pause."""
    v = np.ones(1000)
    return pause_cost(lambda: v @ v)


def ours_pause_floor(nth):
    """The same for our smallest graph (one 1-element add) at nth threads: our own fixed cost of a call
    after a pause, apart from the work."""
    one = np.ones((1, 1), dtype=np.float32)

    def build(ctx):
        ta, tb = ctx.tensor(mb.f32, (1, 1)), ctx.tensor(mb.f32, (1, 1))
        return [ta, tb], mb.ops.add(ta, tb)

    return pause_cost(Ours(nth, build, [one, one]))


def relative_error(got, ref):
    """|got - ref| / |ref| (2-norms), ref in float64."""
    got = np.asarray(got, dtype=np.float64).reshape(ref.shape)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))


def fmt_err(e):
    return "-" if e is None else f"{e:.0e}"


def fmt_ms(t):
    return "-" if t is None else (f"{t * 1e3:.3f}" if t < 0.01 else f"{t * 1e3:.2f}")


def fmt_ratio(peer, ours):
    return "-" if peer is None or ours is None else f"{peer / ours:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[2], help="one table per thread count")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds each peer runs per row (at least)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of bursts per row (each peer's best over all); more rounds, steadier ratios")
    ap.add_argument("--only", default="",
                    help="run only rows whose name or shape contains this (several: comma-separated)")
    args = ap.parse_args()
    if any(t < 1 for t in args.threads):
        ap.error(f"--threads takes counts of at least 1, got {args.threads}")
    if args.rounds < 1:
        ap.error(f"--rounds takes a count of at least 1, got {args.rounds}")

    print(f"metal_backend {mb.__version__}, CPU: {mb.device('CPU').description}, "
          f"threads {' '.join(map(str, args.threads))}, load average at start {os.getloadavg()[0]:.2f}")
    if _REMOVED_ENV:
        print("removed for this process: " + ", ".join(f"{k}={v}" for k, v in _REMOVED_ENV.items()))
    else:
        print("OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: not set")
    if threadpool_limits is None:
        print("  threadpoolctl missing (pip install threadpoolctl): numpy threads NOT limited")
    if ggml is None:
        print("  ggml: not installed (pip install ggml-python); column empty")
    else:
        print(f"  ggml (ggml-python): avx2={ggml.ggml_cpu_has_avx2()} avx512={ggml.ggml_cpu_has_avx512()} "
              f"avx512_vnni={ggml.ggml_cpu_has_avx512_vnni()} fma={ggml.ggml_cpu_has_fma()} "
              f"f16c={ggml.ggml_cpu_has_f16c()} llamafile-sgemm={ggml.ggml_cpu_has_llamafile()}")
    if torch is None:
        print("  torch: not installed; column empty")
    print(f"ratios are peer time / our time (above 1: metal_backend faster); times are best of bursts run in "
          f"turn, {args.rounds} rounds (see time_bursts)")
    print("GB/s: weight bytes per second of our mat-vec; pause/hot and np/hot: our first call after a "
          f"{PAUSE_S} s pause / right after a numpy matmul, over our hot time (medians of 5); torch p/h: "
          "torch's first call after the same pause over torch's hot time; err ours, err ggml: relative "
          "error (2-norm) against numpy in float64 on the same (dequantised) weights")
    for nth in args.threads:
        run_table(nth, args)
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")
    return 0


def run_table(nth, args):
    """Every row at nth threads for every peer."""
    print(f"\n== {nth} threads ==")
    print(f"  host floor: after a {PAUSE_S} s pause a 1000-element numpy dot takes {host_pause_cost() * 1e6:.0f} us "
          f"more than hot, our 1-element graph {ours_pause_floor(nth) * 1e6:.0f} us more")
    limiter = None
    if threadpool_limits is not None:
        limiter = threadpool_limits(limits=nth)
        for info in threadpool_info():
            print(f"  {info['internal_api']} {info.get('version')} kernels={info.get('architecture')} "
                  f"threads={info['num_threads']} ({os.path.basename(info['filepath'])})")
    if torch is not None:
        torch.set_num_threads(nth)
        print(f"  torch {torch.__version__}, {torch.get_num_threads()} threads")

    header = ("op", "shape (NxKxM)", "ours ms", "GFLOP/s", "GB/s", "numpy ms", "np/ours", "ggml ms",
              "ggml/ours", "torch ms", "torch/ours", "pause/hot", "np/hot", "torch p/h", "err ours", "err ggml", "note")
    widths = (12, 15, 9, 8, 6, 9, 8, 9, 9, 9, 10, 9, 7, 9, 8, 8, 0)
    print(" ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())

    rng = np.random.default_rng(0)
    for row in all_rows(rng):
        if args.only and not any(o in row.name or o in row.shape for o in args.only.split(",")):
            continue
        note = ""
        fns, names = [], []
        ours = None
        try:
            ours = Ours(nth, *row.ours)
            fns.append(ours)
            names.append("ours")
        except mb.MetalBackendError as e:  # an op another helper has not landed yet
            note = f"ours: {type(e).__name__}"
        if row.numpy_peer:
            fns.append(row.numpy_fn)
            names.append("numpy")
        g = None
        if ggml is not None and row.ggml_spec is not None:
            g = Ggml(nth, *row.ggml_spec)
            fns.append(g)
            names.append("ggml")
        if row.torch_fn is not None:
            fns.append(row.torch_fn)
            names.append("torch")
        try:
            times = dict(zip(names, time_bursts(fns, args.min_time, rounds=args.rounds)))
        except mb.MetalBackendError as e:
            fns = [f for f, n in zip(fns, names) if n != "ours"]
            names = [n for n in names if n != "ours"]
            times = dict(zip(names, time_bursts(fns, args.min_time, rounds=args.rounds)))
            note = f"ours: {type(e).__name__}: {str(e)[:60]}"
            ours = None
        t_ours = times.get("ours")
        pause = after_np = torch_pause = None
        ref = np.asarray(row.numpy_fn(), dtype=np.float64)
        rel_ours = rel_ggml = None
        if ours is not None:
            rel_ours = relative_error(row.canon(np.asarray(ours.result()).reshape(ref.shape)), row.canon(ref))
            if rel_ours > row.tol:
                note = f"CHECK: relative error {rel_ours:.2g} vs numpy"
        if g is not None:
            rel_ggml = relative_error(row.canon(np.asarray(g.result()).reshape(ref.shape)), row.canon(ref))
        if ours is not None and row.weight_bytes:
            pause, after_np = pause_ratio(ours, t_ours), after_numpy_ratio(ours, t_ours)
        if row.weight_bytes and row.torch_fn is not None and times.get("torch"):
            torch_pause = pause_ratio(row.torch_fn, times["torch"])
        if g is not None:
            g.close()
        gflops = f"{row.flops / t_ours * 1e-9:.1f}" if (row.flops and t_ours) else "-"
        gbps = f"{row.weight_bytes / t_ours * 1e-9:.1f}" if (row.weight_bytes and t_ours) else "-"
        cells = (row.name, row.shape, fmt_ms(t_ours), gflops, gbps, fmt_ms(times.get("numpy")),
                 fmt_ratio(times.get("numpy"), t_ours), fmt_ms(times.get("ggml")),
                 fmt_ratio(times.get("ggml"), t_ours), fmt_ms(times.get("torch")),
                 fmt_ratio(times.get("torch"), t_ours), "-" if pause is None else f"{pause:.2f}",
                 "-" if after_np is None else f"{after_np:.2f}",
                 "-" if torch_pause is None else f"{torch_pause:.2f}", fmt_err(rel_ours), fmt_err(rel_ggml), note)
        print(" ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip(), flush=True)
    if limiter is not None:
        limiter.restore_original_limits()


if __name__ == "__main__":
    sys.exit(main())
