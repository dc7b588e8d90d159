// NORM, RMS_NORM and L2_NORM over each row (ne[0]) of an f32 tensor with any strides. NORM takes the variance
// around the mean in a second pass (not E[x^2] - E[x]^2, which cancels for rows far from zero).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

// y = x - mean; returns sum(y^2).
float center_portable(const float* x, float mean, float* y, int64_t n) {
    float s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) {
            const float d = x[i + k] - mean;
            y[i + k] = d;
            s[k] += d * d;
        }
    }
    for (; i < n; ++i) {
        const float d = x[i] - mean;
        y[i] = d;
        s[0] += d * d;
    }
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

float sumsq_portable(const float* x, int64_t n) {
    float s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) s[k] += x[i + k] * x[i + k];
    }
    for (; i < n; ++i) s[0] += x[i] * x[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void scale_portable(const float* x, float s, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

#if defined(MB_VEC_AVX2)
MB_AVX2 float center_avx2(const float* x, float mean, float* y, int64_t n) {
    const __m256 m = _mm256_set1_ps(mean);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
        const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m);
        _mm256_storeu_ps(y + i, d0);
        _mm256_storeu_ps(y + i + 8, d1);
        a0 = _mm256_fmadd_ps(d0, d0, a0);
        a1 = _mm256_fmadd_ps(d1, d1, a1);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
        _mm256_storeu_ps(y + i, d);
        a0 = _mm256_fmadd_ps(d, d, a0);
    }
    if (i < n) {
        const __m256i mask = vec::tail_mask8(n - i);
        const __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), m), _mm256_castsi256_ps(mask));
        _mm256_maskstore_ps(y + i, mask, d);
        a1 = _mm256_fmadd_ps(d, d, a1);
    }
    return vec::hsum8(_mm256_add_ps(a0, a1));
}

MB_AVX2 float sumsq_avx2(const float* x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + i);
        const __m256 v1 = _mm256_loadu_ps(x + i + 8);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_fmadd_ps(v, v, a0);
    }
    if (i < n) {
        const __m256 v = _mm256_maskload_ps(x + i, vec::tail_mask8(n - i));
        a1 = _mm256_fmadd_ps(v, v, a1);
    }
    return vec::hsum8(_mm256_add_ps(a0, a1));
}

MB_AVX2 void scale_avx2(const float* x, float s, float* y, int64_t n) {
    const __m256 sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
    if (i < n) {
        const __m256i mask = vec::tail_mask8(n - i);
        _mm256_maskstore_ps(y + i, mask, _mm256_mul_ps(_mm256_maskload_ps(x + i, mask), sv));
    }
}
#endif

// s1 = sum(x - k), s2 = sum((x - k)^2) in one sweep; with k the data's mean (as rounded), s1 is the
// rounding residue that corrects it.
void shifted_sums_portable(const float* x, float k, int64_t n, float* s1, float* s2) {
    float a[8] = {}, b[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int u = 0; u < 8; ++u) {
            const float d = x[i + u] - k;
            a[u] += d;
            b[u] += d * d;
        }
    }
    for (; i < n; ++i) {
        const float d = x[i] - k;
        a[0] += d;
        b[0] += d * d;
    }
    *s1 = ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    *s2 = ((b[0] + b[4]) + (b[1] + b[5])) + ((b[2] + b[6]) + (b[3] + b[7]));
}

// y = (x - mean) * s.
void center_scale_portable(const float* x, float mean, float s, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * s;
}

#if defined(MB_VEC_AVX2)
MB_AVX2 void shifted_sums_avx2(const float* x, float k, int64_t n, float* s1, float* s2) {
    const __m256 vk = _mm256_set1_ps(k);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vk);
        const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vk);
        a0 = _mm256_add_ps(a0, d0);
        a1 = _mm256_add_ps(a1, d1);
        b0 = _mm256_fmadd_ps(d0, d0, b0);
        b1 = _mm256_fmadd_ps(d1, d1, b1);
    }
    if (i + 8 <= n) {
        const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vk);
        a0 = _mm256_add_ps(a0, d);
        b0 = _mm256_fmadd_ps(d, d, b0);
        i += 8;
    }
    if (i < n) {
        const __m256i mask = vec::tail_mask8(n - i);
        const __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), vk), _mm256_castsi256_ps(mask));
        a1 = _mm256_add_ps(a1, d);
        b1 = _mm256_fmadd_ps(d, d, b1);
    }
    *s1 = vec::hsum8(_mm256_add_ps(a0, a1));
    *s2 = vec::hsum8(_mm256_add_ps(b0, b1));
}

MB_AVX2 void center_scale_avx2(const float* x, float mean, float s, float* y, int64_t n) {
    const __m256 m = _mm256_set1_ps(mean), sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), sv));
    if (i < n) {
        const __m256i mask = vec::tail_mask8(n - i);
        _mm256_maskstore_ps(y + i, mask, _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), m), sv));
    }
}
#endif

void shifted_sums(const float* x, float k, int64_t n, float* s1, float* s2) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return shifted_sums_avx2(x, k, n, s1, s2);
#endif
    shifted_sums_portable(x, k, n, s1, s2);
}

void center_scale(const float* x, float mean, float s, float* y, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return center_scale_avx2(x, mean, s, y, n);
#endif
    center_scale_portable(x, mean, s, y, n);
}

float center(const float* x, float mean, float* y, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return center_avx2(x, mean, y, n);
#endif
    return center_portable(x, mean, y, n);
}

float sumsq(const float* x, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return sumsq_avx2(x, n);
#endif
    return sumsq_portable(x, n);
}

void scale(const float* x, float s, float* y, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return scale_avx2(x, s, y, n);
#endif
    scale_portable(x, s, y, n);
}

// GROUP_NORM: the jobs are (group, i3) pairs. Two passes over a group's values, piece by piece (rows of
// dim 0) with the vectorised helpers: each piece's mean and squared deviations (two sweeps of the piece,
// the second from L1), merged over the group in double (a group holds channels * H * W values), then
// dst = (x - mean) / sqrt(var + eps). A group stored as one packed span is cut into chunks of
// kChunk values instead of rows, so short rows cost no per-row overhead.
void group_norm(const ComputeParams& p, Tensor& dst) {
    constexpr int64_t kChunk = 4096;
    const Tensor& a = *dst.src[0];
    const int64_t n_groups = dst.op_params[0];
    const double eps = dst.param_f(1);
    const int64_t per = (a.ne[2] + n_groups - 1) / n_groups;
    const int64_t n0 = a.ne[0], n1 = a.ne[1];
    std::vector<float> in, out;
    if (a.nb[0] != sizeof(float)) in.resize(size_t(n0));
    if (dst.nb[0] != sizeof(float)) out.resize(size_t(n0));
    int64_t j0, j1;
    split_range(n_groups * a.ne[3], p.ith, p.nth, &j0, &j1);
    for (int64_t j = j0; j < j1; ++j) {
        const int64_t g = j % n_groups, i3 = j / n_groups;
        const int64_t c0 = g * per, c1 = std::min(c0 + per, a.ne[2]);
        if (c0 >= c1) continue;
        const int64_t count = n0 * n1 * (c1 - c0);
        const auto span_packed = [&](const Tensor& t) {
            return t.nb[0] == sizeof(float) && (n1 == 1 || t.nb[1] == size_t(n0) * sizeof(float)) &&
                   (c1 - c0 == 1 || t.nb[2] == size_t(n1 * n0) * sizeof(float));
        };
        const bool one_span = span_packed(a) && span_packed(dst);
        const int64_t pieces = one_span ? (count + kChunk - 1) / kChunk : n1 * (c1 - c0);
        // Piece q of the group: its source values (gathered when strided) and length.
        auto source = [&](int64_t q, int64_t* n) -> const float* {
            if (one_span) {
                *n = std::min(kChunk, count - q * kChunk);
                return reinterpret_cast<const float*>(at(a, 0, 0, c0, i3)) + q * kChunk;
            }
            *n = n0;
            const uint8_t* row = at(a, 0, q % n1, c0 + q / n1, i3);
            if (a.nb[0] == sizeof(float)) return reinterpret_cast<const float*>(row);
            vec::gather_f32(row, a.nb[0], n0, in.data());
            return in.data();
        };
        // Mean and squared deviations of each piece (its second pass reads it from L1), merged in double
        // (Chan et al.'s pairwise update): exact to rounding however far the pieces' means lie apart.
        int64_t n;
        double g_n = 0.0, g_mean = 0.0, g_m2 = 0.0;
        for (int64_t q = 0; q < pieces; ++q) {
            const float* x = source(q, &n);
            const float c_mean = vec::sum(x, n) / float(n);
            float d1, d2;
            shifted_sums(x, c_mean, n, &d1, &d2);
            const double c_n = double(n);
            const double c_mu = double(c_mean) + double(d1) / c_n;
            const double c_m2 = std::max(double(d2) - double(d1) * double(d1) / c_n, 0.0);
            const double t_n = g_n + c_n, delta = c_mu - g_mean;
            g_mean += delta * c_n / t_n;
            g_m2 += c_m2 + delta * delta * g_n * c_n / t_n;
            g_n = t_n;
        }
        const float mean = float(g_mean);
        const float scale_by = float(1.0 / std::sqrt(g_m2 / double(count) + eps));
        for (int64_t q = 0; q < pieces; ++q) {
            const float* x = source(q, &n);
            if (one_span) {
                center_scale(x, mean, scale_by, reinterpret_cast<float*>(at(dst, 0, 0, c0, i3)) + q * kChunk, n);
            } else if (dst.nb[0] == sizeof(float)) {
                center_scale(x, mean, scale_by, reinterpret_cast<float*>(at(dst, 0, q % n1, c0 + q / n1, i3)), n);
            } else {
                center_scale(x, mean, scale_by, out.data(), n);
                vec::scatter_f32(out.data(), n, at(dst, 0, q % n1, c0 + q / n1, i3), dst.nb[0]);
            }
        }
    }
}

}  // namespace

bool norm_supported(const Tensor& dst) {
    if (dst.op == Op::GROUP_NORM) {
        const Tensor* a = dst.src[0];
        return a && a->type == Type::F32 && dst.type == Type::F32 && vec::same_shape(*a, dst);
    }
    if (dst.op != Op::NORM && dst.op != Op::RMS_NORM && dst.op != Op::L2_NORM) return false;
    const Tensor* a = dst.src[0];
    return a != nullptr && a->type == Type::F32 && dst.type == Type::F32 && vec::same_shape(*a, dst);
}

void compute_norm(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    if (dst.op == Op::GROUP_NORM) return group_norm(p, dst);
    const Tensor& a = *dst.src[0];
    const float eps = dst.param_f(0);
    const int64_t n = dst.ne[0];
    const bool rms = dst.op == Op::RMS_NORM;

    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    std::vector<float> in, out;
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
        float* y = reinterpret_cast<float*>(orow);
        if (dst.nb[0] != sizeof(float)) {
            out.resize(size_t(n));
            y = out.data();
        }
        if (dst.op == Op::L2_NORM) {
            scale(x, 1.0f / std::fmax(std::sqrt(sumsq(x, n)), eps), y, n);
        } else if (rms) {
            const float ms = sumsq(x, n) / float(n);
            scale(x, 1.0f / std::sqrt(ms + eps), y, n);
        } else {
            const float mean = vec::sum(x, n) / float(n);
            const float var = center(x, mean, y, n) / float(n);
            scale(y, 1.0f / std::sqrt(var + eps), y, n);
        }
        if (dst.nb[0] != sizeof(float)) vec::scatter_f32(y, n, orow, dst.nb[0]);
    }
}

}  // namespace mb
