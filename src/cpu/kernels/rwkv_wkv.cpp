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
        std::fill(y.begin(), y.end(), 0.0f);
        for (int64_t i = 0; i < S; ++i) {
            const float ki = k[off + i], ri = r[off + i], tfi = tf[i], tdi = td[off + i];
            float* row = M + i * S;
            for (int64_t j = 0; j < S; ++j) {
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

#if defined(MB_VEC_AVX2)
MB_AVX2 float wkv7_row_avx2(float* __restrict row, const float* __restrict r, const float* __restrict w,
                            const float* __restrict k, const float* __restrict a, const float* __restrict b, float vi,
                            int64_t S) {
    MB_WKV7_ROW_BODY
}
#endif
#undef MB_WKV7_ROW_BODY

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
        for (int64_t i = 0; i < S; ++i) {
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
