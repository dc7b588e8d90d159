#include "cpu/kernels/gemm_f32.h"

#include <algorithm>

#include "cpu/kernels/simd.h"

namespace mb {

namespace {

using Kernel = void (*)(int64_t kc, const float* panel, const float* const* b, float* c, int64_t ldc,
                        bool accumulate);

// ---- portable --------------------------------------------------------------------------------------

// The 16-wide inner loop vectorises at baseline (SSE2, NEON) without intrinsics.
void kernel_portable(int64_t kc, const float* panel, const float* const* b, float* c, int64_t ldc,
                     bool accumulate) {
    float acc[kGemmMR][kGemmNR] = {};
    for (int64_t k = 0; k < kc; ++k) {
        const float* w = panel + k * kGemmNR;
        for (int r = 0; r < kGemmMR; ++r) {
            const float x = b[r][k];
            for (int j = 0; j < kGemmNR; ++j) {
                acc[r][j] += w[j] * x;
            }
        }
    }
    for (int r = 0; r < kGemmMR; ++r) {
        float* cr = c + r * ldc;
        for (int j = 0; j < kGemmNR; ++j) {
            cr[j] = accumulate ? cr[j] + acc[r][j] : acc[r][j];
        }
    }
}

void pack_portable(const float* const* rows, int64_t kc, float* panel) {
    for (int64_t k = 0; k < kc; ++k) {
        for (int r = 0; r < kGemmNR; ++r) {
            panel[k * kGemmNR + r] = rows[r][k];
        }
    }
}

// ---- AVX2 + FMA ----------------------------------------------------------------------------------

#if defined(MB_SIMD_X86)

// 12 accumulators + 2 weight vectors + 1 broadcast = 15 of the 16 ymm registers. Two FMAs per cycle
// need 12 independent chains of latency 4, which the 12 accumulators give.
MB_TARGET_AVX2 void kernel_avx2(int64_t kc, const float* panel, const float* const* b, float* c, int64_t ldc,
                                bool accumulate) {
    const float* b0 = b[0];
    const float* b1 = b[1];
    const float* b2 = b[2];
    const float* b3 = b[3];
    const float* b4 = b[4];
    const float* b5 = b[5];
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const float* w = panel;
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; ++k, w += kGemmNR) {
        const __m256 w0 = _mm256_load_ps(w);
        const __m256 w1 = _mm256_load_ps(w + 8);
        __m256 x = _mm256_broadcast_ss(b0 + k);
        c00 = _mm256_fmadd_ps(w0, x, c00);
        c01 = _mm256_fmadd_ps(w1, x, c01);
        x = _mm256_broadcast_ss(b1 + k);
        c10 = _mm256_fmadd_ps(w0, x, c10);
        c11 = _mm256_fmadd_ps(w1, x, c11);
        x = _mm256_broadcast_ss(b2 + k);
        c20 = _mm256_fmadd_ps(w0, x, c20);
        c21 = _mm256_fmadd_ps(w1, x, c21);
        x = _mm256_broadcast_ss(b3 + k);
        c30 = _mm256_fmadd_ps(w0, x, c30);
        c31 = _mm256_fmadd_ps(w1, x, c31);
        x = _mm256_broadcast_ss(b4 + k);
        c40 = _mm256_fmadd_ps(w0, x, c40);
        c41 = _mm256_fmadd_ps(w1, x, c41);
        x = _mm256_broadcast_ss(b5 + k);
        c50 = _mm256_fmadd_ps(w0, x, c50);
        c51 = _mm256_fmadd_ps(w1, x, c51);
    }
    const __m256 acc[kGemmMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < kGemmMR; ++r) {
        float* cr = c + r * ldc;
        __m256 v0 = acc[r][0];
        __m256 v1 = acc[r][1];
        if (accumulate) {
            v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cr));
            v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cr + 8));
        }
        _mm256_storeu_ps(cr, v0);
        _mm256_storeu_ps(cr + 8, v1);
    }
}

// 8x8 transposes: eight rows' k..k+7 become eight k-major groups of eight.
MB_TARGET_AVX2 void pack_avx2(const float* const* rows, int64_t kc, float* panel) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        for (int half = 0; half < 2; ++half) {
            const float* const* rr = rows + 8 * half;
            const __m256 r0 = _mm256_loadu_ps(rr[0] + k), r1 = _mm256_loadu_ps(rr[1] + k);
            const __m256 r2 = _mm256_loadu_ps(rr[2] + k), r3 = _mm256_loadu_ps(rr[3] + k);
            const __m256 r4 = _mm256_loadu_ps(rr[4] + k), r5 = _mm256_loadu_ps(rr[5] + k);
            const __m256 r6 = _mm256_loadu_ps(rr[6] + k), r7 = _mm256_loadu_ps(rr[7] + k);
            const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
            const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
            const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float* out = panel + k * kGemmNR + 8 * half;
            _mm256_store_ps(out + 0 * kGemmNR, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_store_ps(out + 1 * kGemmNR, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_store_ps(out + 2 * kGemmNR, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_store_ps(out + 3 * kGemmNR, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_store_ps(out + 4 * kGemmNR, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_store_ps(out + 5 * kGemmNR, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_store_ps(out + 6 * kGemmNR, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_store_ps(out + 7 * kGemmNR, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
    }
    for (; k < kc; ++k) {
        for (int r = 0; r < kGemmNR; ++r) {
            panel[k * kGemmNR + r] = rows[r][k];
        }
    }
}

#endif  // MB_SIMD_X86

Kernel select_kernel() {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx2_fma_f16c()) {
        return kernel_avx2;
    }
#endif
    return kernel_portable;
}

void pack_full(const float* const* rows, int64_t kc, float* panel) {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx2_fma_f16c()) {
        pack_avx2(rows, kc, panel);
        return;
    }
#endif
    pack_portable(rows, kc, panel);
}

}  // namespace

void gemm_pack_panel(const float* const* rows, int nr, int64_t kc, float* panel) {
    if (nr == kGemmNR) {
        pack_full(rows, kc, panel);
        return;
    }
    for (int64_t k = 0; k < kc; ++k) {
        float* out = panel + k * kGemmNR;
        for (int r = 0; r < nr; ++r) {
            out[r] = rows[r][k];
        }
        for (int r = nr; r < kGemmNR; ++r) {
            out[r] = 0.0f;
        }
    }
}

void gemm_f32_block(int64_t kc, const float* panels, int64_t n, const float* b, int64_t ldb, int64_t m, float* c,
                    int64_t ldc, bool accumulate) {
    static const Kernel kernel = select_kernel();
    for (int64_t j0 = 0; j0 < n; j0 += kGemmNR) {
        const float* panel = panels + (j0 / kGemmNR) * kc * kGemmNR;
        const int nr = int(std::min<int64_t>(kGemmNR, n - j0));
        for (int64_t i0 = 0; i0 < m; i0 += kGemmMR) {
            const int mr = int(std::min<int64_t>(kGemmMR, m - i0));
            const float* rows[kGemmMR];
            for (int r = 0; r < kGemmMR; ++r) {
                // Missing rows of an edge tile repeat the first one; their results are dropped.
                rows[r] = b + (i0 + (r < mr ? r : 0)) * ldb;
            }
            float* ct = c + i0 * ldc + j0;
            if (mr == kGemmMR && nr == kGemmNR) {
                kernel(kc, panel, rows, ct, ldc, accumulate);
                continue;
            }
            alignas(32) float tile[kGemmMR * kGemmNR];
            kernel(kc, panel, rows, tile, kGemmNR, false);
            for (int r = 0; r < mr; ++r) {
                for (int j = 0; j < nr; ++j) {
                    const float v = tile[r * kGemmNR + j];
                    ct[r * ldc + j] = accumulate ? ct[r * ldc + j] + v : v;
                }
            }
        }
    }
}

}  // namespace mb
