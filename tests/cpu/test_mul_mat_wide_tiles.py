"""mul_mat on the CPU's matrix-vector path (few tokens, float weights): the AVX-512 tiles of 4 weight
rows x 3 to 6 tokens (vec_dot.h: vec_dot_rows_wide_fn; 3 and 5 are pairs plus a last token, used for
matrices this small on every host) against a float64 numpy product, and bit for bit against the tiles
they replace: tokens in pairs through the two-token tile, an odd last token through the one-token tile.
Computing the tokens two at a time (N=2 products) and the odd last one alone (N=1) gives those old
results, so every token count must match them byte for byte.
(The one-token tile sums k in two chains, so N=1 alone is not the reference for paired tokens.)
"""
from __future__ import annotations

import numpy as np
import pytest

import metal_backend as mb

CPU = mb.device("CPU")
WTYPES = ["f32", "f16", "bf16"]


def _weights(rng, wtype: str, m: int, k: int):
    w = rng.standard_normal((m, k)).astype(np.float32)
    if wtype == "f16":
        w16 = w.astype(np.float16)
        return w16.tobytes(), w16.astype(np.float64)
    if wtype == "bf16":
        bits = (w.view(np.uint32) >> 16).astype(np.uint16)
        return bits.tobytes(), (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return w.tobytes(), w.astype(np.float64)


def _product(wtype: str, raw: bytes, m: int, k: int, x: np.ndarray, threads: int) -> np.ndarray:
    ctx = mb.Context()
    tw = ctx.tensor(getattr(mb, wtype), (m, k))
    tx = ctx.tensor(mb.f32, x.shape)
    out = mb.ops.mul_mat(tw, tx)
    backend = CPU.init_backend(f"n_threads={threads}")
    _buf = mb.alloc_ctx_tensors(ctx, backend)
    tw.set(raw)
    tx.set(np.ascontiguousarray(x, dtype=np.float32))
    backend.graph_compute(mb.Graph(out))
    return out.get().copy()


def _old_tiles(wtype, raw, m, k, x, threads):
    n = x.shape[0]
    parts = [_product(wtype, raw, m, k, x[t:t + 2], threads) for t in range(0, n - n % 2, 2)]
    if n % 2:
        parts.append(_product(wtype, raw, m, k, x[n - 1:n], threads))
    return np.concatenate(parts, axis=0)


KS = (1, 7, 16, 33, 384, 385, 511)
CASES = [(wt, n, k) for wt in WTYPES for n in range(1, 12 if wt == "f32" else 14) for k in KS]
CASES += [("f16", n, k) for n in (23,) for k in (7, 385)] + [("bf16", 23, 385)]


@pytest.mark.parametrize("wtype,n,k", CASES)
def test_wide_tiles_match_pairs_bitwise_and_numpy(wtype, n, k):
    rng = np.random.default_rng(1000 * n + k)
    m = 13 if k > 100 else 22  # not a multiple of 4: the last rows go one by one
    raw, w64 = _weights(rng, wtype, m, k)
    x = rng.standard_normal((n, k)).astype(np.float32)
    threads = 1 + (n + k) % 2
    got = _product(wtype, raw, m, k, x, threads)
    assert got.shape == (n, m)
    ref = x.astype(np.float64) @ w64.T
    mag = np.abs(x.astype(np.float64)) @ np.abs(w64).T
    assert np.all(np.abs(got - ref) <= 4 * k * 2.0**-24 * mag + 1e-30)
    old = _old_tiles(wtype, raw, m, k, x, threads)
    assert got.view(np.uint32).tobytes() == old.view(np.uint32).tobytes()


def test_gemm_path_from_24_tokens_f16_still_close():
    # 24 tokens of f16 weights take the GEMM (a different order): numpy only.
    rng = np.random.default_rng(7)
    m, k, n = 13, 385, 24
    raw, w64 = _weights(rng, "f16", m, k)
    x = rng.standard_normal((n, k)).astype(np.float32)
    got = _product("f16", raw, m, k, x, 2)
    ref = x.astype(np.float64) @ w64.T
    mag = np.abs(x.astype(np.float64)) @ np.abs(w64).T
    assert np.all(np.abs(got - ref) <= 4 * k * 2.0**-24 * mag + 1e-30)
