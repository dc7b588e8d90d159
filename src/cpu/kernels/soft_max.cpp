// SOFT_MAX: softmax(x*scale + slope*mask) over each row of an f32 tensor, with an optional f32/f16
// mask broadcast over dims 2,3 by modulo, ALiBi slopes per head (dim 2) and optional per-head sinks.
// A row makes three passes, all but the first over dst while it sits in L1: logits and max, exp and
// sum, normalise.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/errors.h"
#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

// y = x*scale (+ slope*mask); returns max(y).
float logits_portable(const float* x, const float* mask, float scale, float slope, float* y, int64_t n) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
        const float v = mask ? x[i] * scale + slope * mask[i] : x[i] * scale;
        y[i] = v;
        mx = v > mx ? v : mx;
    }
    return mx;
}

// y = exp(y - mx); returns sum(y).
float exp_sum_portable(float* y, float mx, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = vec::exp(y[i] - mx);
    return vec::sum_portable(y, n);
}

void scale_portable(float* y, float s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

#if defined(MB_VEC_AVX2)
MB_AVX2 float logits_avx2(const float* x, const float* mask, float scale, float slope, float* y, int64_t n) {
    const __m256 sv = _mm256_set1_ps(scale);
    const __m256 kv = _mm256_set1_ps(slope);
    const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    __m256 m0 = ninf, m1 = ninf;
    int64_t i = 0;
    if (mask) {
        for (; i + 16 <= n; i += 16) {
            const __m256 v0 = _mm256_fmadd_ps(kv, _mm256_loadu_ps(mask + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
            const __m256 v1 =
                _mm256_fmadd_ps(kv, _mm256_loadu_ps(mask + i + 8), _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), sv));
            _mm256_storeu_ps(y + i, v0);
            _mm256_storeu_ps(y + i + 8, v1);
            m0 = _mm256_max_ps(m0, v0);
            m1 = _mm256_max_ps(m1, v1);
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            const __m256 v0 = _mm256_mul_ps(_mm256_loadu_ps(x + i), sv);
            const __m256 v1 = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), sv);
            _mm256_storeu_ps(y + i, v0);
            _mm256_storeu_ps(y + i + 8, v1);
            m0 = _mm256_max_ps(m0, v0);
            m1 = _mm256_max_ps(m1, v1);
        }
    }
    float mx = vec::hmax8(_mm256_max_ps(m0, m1));
    for (; i < n; ++i) {
        const float v = mask ? x[i] * scale + slope * mask[i] : x[i] * scale;
        y[i] = v;
        mx = v > mx ? v : mx;
    }
    return mx;
}

MB_AVX2 float exp_sum_avx2(float* y, float mx, int64_t n) {
    const __m256 mv = _mm256_set1_ps(mx);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 e0 = vec::exp8(_mm256_sub_ps(_mm256_loadu_ps(y + i), mv));
        const __m256 e1 = vec::exp8(_mm256_sub_ps(_mm256_loadu_ps(y + i + 8), mv));
        _mm256_storeu_ps(y + i, e0);
        _mm256_storeu_ps(y + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 e = vec::exp8(_mm256_sub_ps(_mm256_loadu_ps(y + i), mv));
        _mm256_storeu_ps(y + i, e);
        s0 = _mm256_add_ps(s0, e);
    }
    if (i < n) {
        const __m256i mask = vec::tail_mask8(n - i);
        const __m256 e = _mm256_and_ps(vec::exp8(_mm256_sub_ps(_mm256_maskload_ps(y + i, mask), mv)),
                                       _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(y + i, mask, e);
        s1 = _mm256_add_ps(s1, e);
    }
    return vec::hsum8(_mm256_add_ps(s0, s1));
}

MB_AVX2 void scale_avx2(float* y, float s, int64_t n) {
    const __m256 sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), sv));
    for (; i < n; ++i) y[i] *= s;
}
#endif

float logits(const float* x, const float* mask, float scale, float slope, float* y, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return logits_avx2(x, mask, scale, slope, y, n);
#endif
    return logits_portable(x, mask, scale, slope, y, n);
}

float exp_sum(float* y, float mx, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return exp_sum_avx2(y, mx, n);
#endif
    return exp_sum_portable(y, mx, n);
}

void scale_row(float* y, float s, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return scale_avx2(y, s, n);
#endif
    scale_portable(y, s, n);
}

}  // namespace

bool soft_max_supported(const Tensor& dst) {
    if (dst.op != Op::SOFT_MAX) return false;
    const Tensor* a = dst.src[0];
    if (a == nullptr || a->type != Type::F32 || dst.type != Type::F32 || !vec::same_shape(*a, dst)) return false;
    if (const Tensor* m = dst.src[1]) {
        if (m->type != Type::F32 && m->type != Type::F16) return false;
        if (m->ne[0] != a->ne[0] || m->ne[1] < a->ne[1]) return false;
        if (m->ne[2] == 0 || m->ne[3] == 0 || a->ne[2] % m->ne[2] != 0 || a->ne[3] % m->ne[3] != 0) return false;
    }
    if (const Tensor* s = dst.src[2]) {
        if (s->type != Type::F32 || s->nelements() != a->ne[2]) return false;
    }
    return true;
}

void compute_soft_max(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const Tensor* mask = dst.src[1];
    const Tensor* sinks = dst.src[2];
    const float scale = dst.param_f(0);
    const float max_bias = dst.param_f(1);
    const int64_t n = dst.ne[0];

    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    std::vector<float> in, mbuf, out;
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        const uint8_t* arow = vec::row_ptr(a, ix);
        uint8_t* orow = vec::row_ptr(dst, ix);
        const float* x = reinterpret_cast<const float*>(arow);
        if (a.nb[0] != sizeof(float)) {
            in.resize(size_t(n));
            vec::gather_f32(arow, a.nb[0], n, in.data());
            x = in.data();
        }
        const float* mrow = nullptr;
        if (mask) {
            const uint8_t* mp = vec::row_ptr(*mask, {ix.i1, ix.i2 % mask->ne[2], ix.i3 % mask->ne[3]});
            if (mask->type == Type::F32 && mask->nb[0] == sizeof(float)) {
                mrow = reinterpret_cast<const float*>(mp);
            } else {
                mbuf.resize(size_t(n));
                if (mask->type == Type::F32) {
                    vec::gather_f32(mp, mask->nb[0], n, mbuf.data());
                } else if (mask->nb[0] == sizeof(uint16_t)) {
                    dequantize_row(Type::F16, mp, mbuf.data(), n);
                } else {
                    for (int64_t i = 0; i < n; ++i) {
                        uint16_t h;
                        std::memcpy(&h, mp + size_t(i) * mask->nb[0], sizeof h);
                        mbuf[size_t(i)] = fp16_to_fp32(h);
                    }
                }
                mrow = mbuf.data();
            }
        }
        float* y = reinterpret_cast<float*>(orow);
        if (dst.nb[0] != sizeof(float)) {
            out.resize(size_t(n));
            y = out.data();
        }
        const float slope = vec::alibi_slope(max_bias, ix.i2, dst.ne[2]);
        float mx = logits(x, mrow, scale, slope, y, n);
        float sink = 0.0f;
        if (sinks) {
            // The sinks may have any shape holding one value per head; head h is element h in order.
            const int64_t h = ix.i2;
            const int64_t j0 = h % sinks->ne[0], j1 = (h / sinks->ne[0]) % sinks->ne[1];
            const int64_t j2 = (h / (sinks->ne[0] * sinks->ne[1])) % sinks->ne[2];
            const int64_t j3 = h / (sinks->ne[0] * sinks->ne[1] * sinks->ne[2]);
            std::memcpy(&sink, at(*sinks, j0, j1, j2, j3), sizeof sink);
            mx = std::max(mx, sink);
        }
        float sum = exp_sum(y, mx, n);
        if (sinks) sum += vec::exp(sink - mx);
        scale_row(y, 1.0f / sum, n);
        if (dst.nb[0] != sizeof(float)) vec::scatter_f32(y, n, orow, dst.nb[0]);
    }
}

}  // namespace mb
