// SSM_SCAN (Mamba's selective scan, ggml_ssm_scan). Per sequence i3, starting from state s[:, :, :, ids[i3]],
// per token and head h (group g = h / (n_head / n_group)), with dt+ = softplus(dt[h]):
//   state[i0, i1] = state[i0, i1] * exp(dt+ * A[i0 or 0, h]) + B[i0, g] * x[i1, h] * dt+
//   y[i1, h] = sum_i0 state[i0, i1] * C[i0, g]
// dst: y packed in x's shape, then the final state of each sequence (s's layout, nb03 apart). Threads take
// (sequence, head) pairs: each is independent over its tokens.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

// One state row in place with a per-head decay: st = st * da + b * xdt, returns sum(st * c). Eight
// independent partial sums, so the compiler can keep the row in vector registers.
#define MB_SSM_ROW_BODY                                                            \
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                       \
    int64_t i = 0;                                                                 \
    for (; i + 8 <= n; i += 8) {                                                   \
        for (int u = 0; u < 8; ++u) {                                              \
            const float v = st[i + u] * da + b[i + u] * xdt;                       \
            acc[u] += v * c[i + u];                                                \
            st[i + u] = v;                                                         \
        }                                                                          \
    }                                                                              \
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])); \
    for (; i < n; ++i) {                                                           \
        const float v = st[i] * da + b[i] * xdt;                                   \
        sum += v * c[i];                                                           \
        st[i] = v;                                                                 \
    }                                                                              \
    return sum;

float scan_row_portable(float* __restrict st, const float* __restrict b, const float* __restrict c, float da,
                        float xdt, int64_t n) {
    MB_SSM_ROW_BODY
}

#undef MB_SSM_ROW_BODY

#if defined(MB_VEC_AVX2)
// The same with four vector accumulators: one would chain every FMA of the row on the last one's latency.
MB_AVX2 float scan_row_avx2(float* __restrict st, const float* __restrict b, const float* __restrict c, float da,
                            float xdt, int64_t n) {
    const __m256 vda = _mm256_set1_ps(da), vx = _mm256_set1_ps(xdt);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int u = 0; u < 4; ++u) {
            const int64_t o = i + 8 * u;
            const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(st + o), vda, _mm256_mul_ps(_mm256_loadu_ps(b + o), vx));
            _mm256_storeu_ps(st + o, v);
            acc[u] = _mm256_fmadd_ps(v, _mm256_loadu_ps(c + o), acc[u]);
        }
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(st + i), vda, _mm256_mul_ps(_mm256_loadu_ps(b + i), vx));
        _mm256_storeu_ps(st + i, v);
        acc[0] = _mm256_fmadd_ps(v, _mm256_loadu_ps(c + i), acc[0]);
    }
    float sum = vec::hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) {
        const float v = st[i] * da + b[i] * xdt;
        sum += v * c[i];
        st[i] = v;
    }
    return sum;
}
#endif

#if defined(MB_SIMD_X86)
// The same on 16 lanes: the row's update is bound by its stores, one per vector.
MB_TARGET_AVX512 float scan_row_avx512(float* __restrict st, const float* __restrict b, const float* __restrict c,
                                       float da, float xdt, int64_t n) {
    const __m512 vda = _mm512_set1_ps(da), vx = _mm512_set1_ps(xdt);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int u = 0; u < 4; ++u) {
            const int64_t o = i + 16 * u;
            const __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(st + o), vda, _mm512_mul_ps(_mm512_loadu_ps(b + o), vx));
            _mm512_storeu_ps(st + o, v);
            acc[u] = _mm512_fmadd_ps(v, _mm512_loadu_ps(c + o), acc[u]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_fmadd_ps(_mm512_loadu_ps(st + i), vda, _mm512_mul_ps(_mm512_loadu_ps(b + i), vx));
        _mm512_storeu_ps(st + i, v);
        acc[0] = _mm512_fmadd_ps(v, _mm512_loadu_ps(c + i), acc[0]);
    }
    // Halves through memory: GCC 12's _mm512_reduce_add_ps trips -Werror=uninitialized (PR 105593).
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
    float sum = vec::hsum8(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
    for (; i < n; ++i) {
        const float v = st[i] * da + b[i] * xdt;
        sum += v * c[i];
        st[i] = v;
    }
    return sum;
}
#endif

float scan_row(float* st, const float* b, const float* c, float da, float xdt, int64_t n) {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx512f()) return scan_row_avx512(st, b, c, da, xdt, n);
#endif
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return scan_row_avx2(st, b, c, da, xdt, n);
#endif
    return scan_row_portable(st, b, c, da, xdt, n);
}

}  // namespace

bool ssm_scan_supported(const Tensor& dst) {
    if (dst.op != Op::SSM_SCAN || dst.type != Type::F32) return false;
    for (int i = 0; i < 6; ++i) {
        if (!dst.src[i] || dst.src[i]->type != Type::F32) return false;
    }
    return dst.src[6] && dst.src[6]->type == Type::I32;
}

void compute_ssm_scan(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& s = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const Tensor& dt = *dst.src[2];
    const Tensor& A = *dst.src[3];
    const Tensor& B = *dst.src[4];
    const Tensor& C = *dst.src[5];
    const Tensor& ids = *dst.src[6];
    const int64_t nc = s.ne[0], nr = x.ne[0], nh = x.ne[1], nt = x.ne[2], ns = x.ne[3], ng = B.ne[1];
    const int64_t per_group = nh / ng;
    const bool scalar_a = A.ne[0] == 1;
    float* y_all = reinterpret_cast<float*>(host_data(dst));
    uint8_t* states = host_data(dst) + size_t(x.nelements()) * sizeof(float);
    const float* a_data = reinterpret_cast<const float*>(host_data(A));
    int64_t w0, w1;
    split_range(ns * nh, p.ith, p.nth, &w0, &w1);
    for (int64_t w = w0; w < w1; ++w) {
        const int64_t h = w % nh, i3 = w / nh, g = h / per_group;
        const int32_t id = *reinterpret_cast<const int32_t*>(at(ids, i3));
        if (id < 0 || id >= s.ne[3]) {
            fail<OutOfRangeError>("SSM_SCAN", "state id ", id, " of sequence ", i3, " out of range for s ",
                                  s.describe(), " (", s.ne[3], " states)");
        }
        const float* s0 = reinterpret_cast<const float*>(at(s, 0, 0, h, id));
        float* st = reinterpret_cast<float*>(states + size_t(i3) * s.nb[3] + size_t(h) * s.nb[2]);
        const float* a_h = a_data + h * A.ne[0];
        for (int64_t t = 0; t < nt; ++t) {
            const float* xr = reinterpret_cast<const float*>(at(x, 0, h, t, i3));
            const float* b = reinterpret_cast<const float*>(at(B, 0, g, t, i3));
            const float* c = reinterpret_cast<const float*>(at(C, 0, g, t, i3));
            const float d = *reinterpret_cast<const float*>(at(dt, h, t, i3));
            const float dsp = d > 20.0f ? d : std::log1p(std::exp(d));
            float* y = y_all + ((i3 * nt + t) * nh + h) * nr;
            const float da = scalar_a ? std::exp(dsp * a_h[0]) : 0.0f;
            if (t == 0) std::memcpy(st, s0, size_t(nr * nc) * sizeof(float));
            for (int64_t i1 = 0; i1 < nr; ++i1) {
                const float* prev = st + i1 * nc;
                float* cur = st + i1 * nc;
                const float xdt = xr[i1] * dsp;
                float sum = 0.0f;
                if (scalar_a) {
                    sum = scan_row(cur, b, c, da, xdt, nc);
                } else {
                    for (int64_t i0 = 0; i0 < nc; ++i0) {
                        const float v = prev[i0] * std::exp(dsp * a_h[i0]) + b[i0] * xdt;
                        sum += v * c[i0];
                        cur[i0] = v;
                    }
                }
                y[i1] = sum;
            }
        }
        if (nt == 0) {
            for (int64_t i1 = 0; i1 < nr; ++i1) {
                for (int64_t i0 = 0; i0 < nc; ++i0) st[i1 * nc + i0] = s0[i1 * nc + i0];
            }
        }
    }
}

}  // namespace mb
