// RWKV_WKV6 and RWKV_WKV7 (ggml_rwkv_wkv6 / _wkv7): linear attention over an S x S state per head, T tokens
// in n_seqs sequences of T / n_seqs, every input packed f32; dst [S*H, T] y, then the new states
// [S*S*H, n_seqs]. Per token, with the head's state M (row i, column j):
//   WKV6 (k, v, r, tf, td, state): kv = k[i] v[j]; y[j] = sum_i r[i] (tf[i] kv + M[i, j]);
//                                  M[i, j] = M[i, j] td[i] + kv
//   WKV7 (r, w, k, v, a, b, state): sa = sum_j a[j] M[i, j]; M[i, j] = M[i, j] w[j] + v[i] k[j] + sa b[j];
//                                   y[i] = sum_j M[i, j] r[j]
// Threads take (sequence, head) pairs, each independent over its tokens.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

const float* f32(const Tensor* t) { return reinterpret_cast<const float*>(host_data(*t)); }

#if defined(MB_VEC_AVX2)
// One WKV6 token of a head for the columns j < S rounded down to 8: y stays in registers over the rows i,
// four column blocks at a time (four independent FMA chains); the rest of the columns is left to the caller.
MB_AVX2 int64_t wkv6_token_avx2(float* __restrict M, const float* __restrict k, const float* __restrict v,
                                const float* __restrict r, const float* __restrict tf, const float* __restrict td,
                                float* __restrict y, int64_t S) {
    int64_t j0 = 0;
    for (; j0 + 32 <= S; j0 += 32) {
        __m256 vv[4], acc[4];
        for (int u = 0; u < 4; ++u) {
            vv[u] = _mm256_loadu_ps(v + j0 + 8 * u);
            acc[u] = _mm256_setzero_ps();
        }
        for (int64_t i = 0; i < S; ++i) {
            const __m256 ki = _mm256_set1_ps(k[i]), ri = _mm256_set1_ps(r[i]);
            const __m256 tfi = _mm256_set1_ps(tf[i]), tdi = _mm256_set1_ps(td[i]);
            float* row = M + i * S + j0;
            for (int u = 0; u < 4; ++u) {
                const __m256 kv = _mm256_mul_ps(ki, vv[u]);
                const __m256 m = _mm256_loadu_ps(row + 8 * u);
                acc[u] = _mm256_fmadd_ps(ri, _mm256_fmadd_ps(tfi, kv, m), acc[u]);
                _mm256_storeu_ps(row + 8 * u, _mm256_fmadd_ps(m, tdi, kv));
            }
        }
        for (int u = 0; u < 4; ++u) _mm256_storeu_ps(y + j0 + 8 * u, acc[u]);
    }
    for (; j0 + 8 <= S; j0 += 8) {
        const __m256 vv = _mm256_loadu_ps(v + j0);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < S; ++i) {
            const __m256 kv = _mm256_mul_ps(_mm256_set1_ps(k[i]), vv);
            float* row = M + i * S + j0;
            const __m256 m = _mm256_loadu_ps(row);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(r[i]), _mm256_fmadd_ps(_mm256_set1_ps(tf[i]), kv, m), acc);
            _mm256_storeu_ps(row, _mm256_fmadd_ps(m, _mm256_set1_ps(td[i]), kv));
        }
        _mm256_storeu_ps(y + j0, acc);
    }
    return j0;
}
#endif

void wkv6_head(const Tensor& dst, int64_t h, int64_t seq, int64_t S, int64_t H, int64_t per_seq, float* M,
               std::vector<float>& y) {
    const float* k = f32(dst.src[0]);
    const float* v = f32(dst.src[1]);
    const float* r = f32(dst.src[2]);
    const float* tf = f32(dst.src[3]) + h * S;
    const float* td = f32(dst.src[4]);
    float* out = reinterpret_cast<float*>(host_data(dst));
    for (int64_t t = seq * per_seq; t < (seq + 1) * per_seq; ++t) {
        const size_t off = size_t(t * H + h) * size_t(S);
        int64_t j_done = 0;
#if defined(MB_VEC_AVX2)
        if (vec::use_avx2()) j_done = wkv6_token_avx2(M, k + off, v + off, r + off, tf, td + off, y.data(), S);
#endif
        std::fill(y.begin() + j_done, y.end(), 0.0f);
        for (int64_t i = 0; i < S; ++i) {
            const float ki = k[off + i], ri = r[off + i], tfi = tf[i], tdi = td[off + i];
            float* row = M + i * S;
            for (int64_t j = j_done; j < S; ++j) {
                const float kv = ki * v[off + j];
                y[j] += ri * (tfi * kv + row[j]);
                row[j] = row[j] * tdi + kv;
            }
        }
        std::memcpy(out + off, y.data(), size_t(S) * sizeof(float));
    }
}

// One WKV7 state row in place: sa = a . row; row = row * w + vi * k + sa * b; returns row . r.
#define MB_WKV7_ROW_BODY                                                             \
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                         \
    int64_t j = 0;                                                                   \
    for (; j + 8 <= S; j += 8) {                                                     \
        for (int u = 0; u < 8; ++u) acc[u] += a[j + u] * row[j + u];                 \
    }                                                                                \
    float sa = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])); \
    for (; j < S; ++j) sa += a[j] * row[j];                                          \
    float out[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                         \
    j = 0;                                                                           \
    for (; j + 8 <= S; j += 8) {                                                     \
        for (int u = 0; u < 8; ++u) {                                                \
            const float m = row[j + u] * w[j + u] + vi * k[j + u] + sa * b[j + u];   \
            row[j + u] = m;                                                          \
            out[u] += m * r[j + u];                                                  \
        }                                                                            \
    }                                                                                \
    float y = ((out[0] + out[1]) + (out[2] + out[3])) + ((out[4] + out[5]) + (out[6] + out[7])); \
    for (; j < S; ++j) {                                                             \
        const float m = row[j] * w[j] + vi * k[j] + sa * b[j];                       \
        row[j] = m;                                                                  \
        y += m * r[j];                                                               \
    }                                                                                \
    return y;

float wkv7_row_portable(float* __restrict row, const float* __restrict r, const float* __restrict w,
                        const float* __restrict k, const float* __restrict a, const float* __restrict b, float vi,
                        int64_t S) {
    MB_WKV7_ROW_BODY
}

#undef MB_WKV7_ROW_BODY

#if defined(MB_VEC_AVX2)
// The same with four vector accumulators per dot product (one would chain every FMA on the last).
MB_AVX2 float wkv7_row_avx2(float* __restrict row, const float* __restrict r, const float* __restrict w,
                            const float* __restrict k, const float* __restrict a, const float* __restrict b, float vi,
                            int64_t S) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t j = 0;
    for (; j + 32 <= S; j += 32) {
        for (int u = 0; u < 4; ++u) {
            acc[u] = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8 * u), _mm256_loadu_ps(row + j + 8 * u), acc[u]);
        }
    }
    for (; j + 8 <= S; j += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(row + j), acc[0]);
    float sa = vec::hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; j < S; ++j) sa += a[j] * row[j];
    const __m256 vsa = _mm256_set1_ps(sa), vvi = _mm256_set1_ps(vi);
    __m256 out[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    j = 0;
    for (; j + 32 <= S; j += 32) {
        for (int u = 0; u < 4; ++u) {
            const int64_t o = j + 8 * u;
            const __m256 m = _mm256_fmadd_ps(
                _mm256_loadu_ps(row + o), _mm256_loadu_ps(w + o),
                _mm256_fmadd_ps(vvi, _mm256_loadu_ps(k + o), _mm256_mul_ps(vsa, _mm256_loadu_ps(b + o))));
            _mm256_storeu_ps(row + o, m);
            out[u] = _mm256_fmadd_ps(m, _mm256_loadu_ps(r + o), out[u]);
        }
    }
    for (; j + 8 <= S; j += 8) {
        const __m256 m = _mm256_fmadd_ps(
            _mm256_loadu_ps(row + j), _mm256_loadu_ps(w + j),
            _mm256_fmadd_ps(vvi, _mm256_loadu_ps(k + j), _mm256_mul_ps(vsa, _mm256_loadu_ps(b + j))));
        _mm256_storeu_ps(row + j, m);
        out[0] = _mm256_fmadd_ps(m, _mm256_loadu_ps(r + j), out[0]);
    }
    float y = vec::hsum8(_mm256_add_ps(_mm256_add_ps(out[0], out[1]), _mm256_add_ps(out[2], out[3])));
    for (; j < S; ++j) {
        const float m = row[j] * w[j] + vi * k[j] + sa * b[j];
        row[j] = m;
        y += m * r[j];
    }
    return y;
}
#endif

#if defined(MB_VEC_AVX2)
// Four state rows (i0 .. i0+3) of one WKV7 token at once, for S a multiple of 8: the token's a, w, k, b, r
// vectors are loaded once for the four rows, and the rows' dot products are four independent chains.
MB_AVX2 void wkv7_rows4_avx2(float* __restrict M, const float* __restrict r, const float* __restrict w,
                             const float* __restrict k, const float* __restrict a, const float* __restrict b,
                             const float* __restrict v, int64_t i0, int64_t S, float* __restrict y) {
    float* row[4] = {M + i0 * S, M + (i0 + 1) * S, M + (i0 + 2) * S, M + (i0 + 3) * S};
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t j = 0; j < S; j += 8) {
        const __m256 av = _mm256_loadu_ps(a + j);
        for (int q = 0; q < 4; ++q) acc[q] = _mm256_fmadd_ps(av, _mm256_loadu_ps(row[q] + j), acc[q]);
    }
    __m256 sa[4], vi[4], out[4];
    for (int q = 0; q < 4; ++q) {
        sa[q] = _mm256_set1_ps(vec::hsum8(acc[q]));
        vi[q] = _mm256_set1_ps(v[i0 + q]);
        out[q] = _mm256_setzero_ps();
    }
    for (int64_t j = 0; j < S; j += 8) {
        const __m256 wv = _mm256_loadu_ps(w + j), kv = _mm256_loadu_ps(k + j);
        const __m256 bv = _mm256_loadu_ps(b + j), rv = _mm256_loadu_ps(r + j);
        for (int q = 0; q < 4; ++q) {
            const __m256 m = _mm256_fmadd_ps(_mm256_loadu_ps(row[q] + j), wv,
                                             _mm256_fmadd_ps(vi[q], kv, _mm256_mul_ps(sa[q], bv)));
            _mm256_storeu_ps(row[q] + j, m);
            out[q] = _mm256_fmadd_ps(m, rv, out[q]);
        }
    }
    for (int q = 0; q < 4; ++q) y[q] = vec::hsum8(out[q]);
}
#endif

void wkv7_head(const Tensor& dst, int64_t h, int64_t seq, int64_t S, int64_t H, int64_t per_seq, float* M) {
    const float* r = f32(dst.src[0]);
    const float* w = f32(dst.src[1]);
    const float* k = f32(dst.src[2]);
    const float* v = f32(dst.src[3]);
    const float* a = f32(dst.src[4]);
    const float* b = f32(dst.src[5]);
    float* out = reinterpret_cast<float*>(host_data(dst));
    for (int64_t t = seq * per_seq; t < (seq + 1) * per_seq; ++t) {
        const size_t off = size_t(t * H + h) * size_t(S);
        int64_t i = 0;
#if defined(MB_VEC_AVX2)
        if (vec::use_avx2() && S % 8 == 0) {
            for (; i + 4 <= S; i += 4) {
                wkv7_rows4_avx2(M, r + off, w + off, k + off, a + off, b + off, v + off, i, S, out + off + i);
            }
        }
#endif
        for (; i < S; ++i) {
            float* row = M + i * S;
            const float vi = v[off + i];
#if defined(MB_VEC_AVX2)
            if (vec::use_avx2()) {
                out[off + i] = wkv7_row_avx2(row, r + off, w + off, k + off, a + off, b + off, vi, S);
                continue;
            }
#endif
            out[off + i] = wkv7_row_portable(row, r + off, w + off, k + off, a + off, b + off, vi, S);
        }
    }
}

}  // namespace

bool rwkv_wkv_supported(const Tensor& dst) {
    if ((dst.op != Op::RWKV_WKV6 && dst.op != Op::RWKV_WKV7) || dst.type != Type::F32) return false;
    const int n = dst.op == Op::RWKV_WKV6 ? 6 : 7;
    for (int i = 0; i < n; ++i) {
        if (!dst.src[i] || dst.src[i]->type != Type::F32 || !dst.src[i]->is_contiguous()) return false;
    }
    return true;
}

void compute_rwkv_wkv(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const bool v7 = dst.op == Op::RWKV_WKV7;
    const Tensor& tok = *dst.src[v7 ? 2 : 0];  // k: [S, H, T]
    const Tensor& state = *dst.src[v7 ? 6 : 5];
    const int64_t S = tok.ne[0], H = tok.ne[1], T = tok.ne[2], n_seqs = state.ne[1];
    const int64_t per_seq = T / n_seqs;
    float* states = reinterpret_cast<float*>(host_data(dst)) + T * S * H;
    const float* state0 = reinterpret_cast<const float*>(host_data(state));
    std::vector<float> y(static_cast<size_t>(S));
    int64_t w0, w1;
    split_range(n_seqs * H, p.ith, p.nth, &w0, &w1);
    for (int64_t w = w0; w < w1; ++w) {
        const int64_t h = w % H, seq = w / H;
        const size_t m_off = size_t((seq * H + h) * S * S);
        float* M = states + m_off;
        std::memcpy(M, state0 + m_off, size_t(S * S) * sizeof(float));
        if (v7) {
            wkv7_head(dst, h, seq, S, H, per_seq, M);
        } else {
            wkv6_head(dst, h, seq, S, H, per_seq, M, y);
        }
    }
}

}  // namespace mb
