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

// GROUP_NORM: the jobs are (group, i3) pairs; sums in double (a group holds channels * H * W values).
void group_norm(const ComputeParams& p, Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const int64_t n_groups = dst.op_params[0];
    const double eps = dst.param_f(1);
    const int64_t per = (a.ne[2] + n_groups - 1) / n_groups;
    int64_t j0, j1;
    split_range(n_groups * a.ne[3], p.ith, p.nth, &j0, &j1);
    for (int64_t j = j0; j < j1; ++j) {
        const int64_t g = j % n_groups, i3 = j / n_groups;
        const int64_t c0 = g * per, c1 = std::min(c0 + per, a.ne[2]);
        if (c0 >= c1) continue;
        const double n = double(a.ne[0] * a.ne[1] * (c1 - c0));
        double s = 0.0;
        for (int64_t c = c0; c < c1; ++c)
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) s += *reinterpret_cast<const float*>(at(a, i0, i1, c, i3));
        const double mean = s / n;
        double s2 = 0.0;
        for (int64_t c = c0; c < c1; ++c)
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    const double d = *reinterpret_cast<const float*>(at(a, i0, i1, c, i3)) - mean;
                    s2 += d * d;
                }
        const double scale = 1.0 / std::sqrt(s2 / n + eps);
        for (int64_t c = c0; c < c1; ++c)
            for (int64_t i1 = 0; i1 < a.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
                    const float x = *reinterpret_cast<const float*>(at(a, i0, i1, c, i3));
                    *reinterpret_cast<float*>(at(dst, i0, i1, c, i3)) = float((x - mean) * scale);
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
