"""flash_attn_ext's row path on the CPU (a decoder step: at most 4 query rows per head) over the cache
layout Whisper's decoder reads: a head's keys and values are views into cache rows that hold every
head side by side, each sequence's rows a fixed number of positions apart, and only the first n_kv
positions read (the rest of the cache holds whatever earlier steps left). Against float64 numpy under
every ISA cap (flash_attn_row.h's AVX-512 and AVX2 kernels, the element-by-element loops without
them), for f16 and f32 caches, head sizes with and without vector tails, key counts below, at and
past the kernels' steps of four keys, and a mask that hides the cache's unwritten tail."""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb
from metal_backend.nn import layers
from op_cases import flash_attn_ref

CTX_ROWS = 40  # cache positions per sequence


def run_rows(cache_type, seqs, heads, d, n_kv, nq, written, rng):
    """Returns (ours, reference) for queries (seqs, heads, nq, d) over the first n_kv positions of
    two caches (seqs * CTX_ROWS, heads * d), positions from `written` on masked out."""
    ctx = mb.Context()
    q = ctx.tensor(mb.f32, (seqs, heads, nq, d))
    kc = ctx.tensor(cache_type, (seqs * CTX_ROWS, heads * d))
    vc = ctx.tensor(cache_type, (seqs * CTX_ROWS, heads * d))
    mask = ctx.tensor(mb.f16, (nq, n_kv))
    k, v = (layers.head_view(c, heads, d, n_kv, heads * d, 0, seqs, CTX_ROWS) for c in (kc, vc))
    out = mb.ops.flash_attn_ext(q, k, v, mask, 1.0 / np.sqrt(d))
    backend = mb.device("CPU").init_backend()
    backend.options = {"n_threads": 2}
    mb.alloc_ctx_tensors(ctx, backend)
    dtype = np.float16 if cache_type == mb.f16 else np.float32
    qv = rng.standard_normal((seqs, heads, nq, d)).astype(np.float32)
    kv, vv = (rng.standard_normal((seqs * CTX_ROWS, heads * d)).astype(dtype) for _ in range(2))
    mv = np.where(np.arange(n_kv)[None, :] < written, 0.0, -np.inf).astype(np.float16)
    mv = np.broadcast_to(mv, (nq, n_kv)).copy()
    q.set(qv)
    kc.set(kv)
    vc.set(vv)
    mask.set(mv)
    backend.graph_compute(mb.Graph(out))

    def heads_of(cache):
        return cache.astype(np.float32).reshape(seqs, CTX_ROWS, heads, d)[:, :n_kv].transpose(0, 2, 1, 3)

    ref = flash_attn_ref(qv, heads_of(kv), heads_of(vv), mv[None, None], 1.0 / np.sqrt(d))
    return out.get(), ref


@pytest.mark.parametrize("cache_type", [mb.f16, mb.f32], ids=lambda t: t.name)
@pytest.mark.parametrize("d", [40, 64, 80, 33])
@pytest.mark.parametrize("n_kv, written", [(1, 1), (3, 3), (4, 2), (17, 17), (32, 21), (40, 33)])
def test_decoder_cache_views(cache_type, d, n_kv, written, isa_cap):
    rng = np.random.default_rng(n_kv * 100 + d)
    ours, ref = run_rows(cache_type, 5, 3, d, n_kv, 1, written, rng)
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("nq", [2, 4])
@pytest.mark.parametrize("seqs", [1, 20])
def test_several_rows_and_sequences(nq, seqs, isa_cap):
    rng = np.random.default_rng(nq + seqs)
    ours, ref = run_rows(mb.f16, seqs, 6, 64, 32, nq, 29, rng)
    np.testing.assert_allclose(ours, ref, rtol=2e-5, atol=2e-6)
