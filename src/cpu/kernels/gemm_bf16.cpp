// bf16 pair products (gemm_bf16.h): vdpbf16ps register tiles on AVX512_BF16 hosts, a portable loop
// elsewhere.
#include "cpu/kernels/gemm_bf16.h"

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "cpu/kernels/simd.h"

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's avx512fintrin.h (PR 105593): see flash_attn_ext.cpp.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace mb {

namespace {

float lo_bf16(uint32_t pair) { return bf16_to_fp32(uint16_t(pair & 0xFFFFu)); }
float hi_bf16(uint32_t pair) { return bf16_to_fp32(uint16_t(pair >> 16)); }

void gemm_portable(int64_t rows, int64_t cols, int64_t kp, const uint32_t* a, int64_t lda, const uint32_t* b,
                   int64_t ldb, float* c, int64_t ldc, bool accumulate) {
    for (int64_t i = 0; i < rows; ++i) {
        float* ci = c + i * ldc;
        if (!accumulate) std::memset(ci, 0, size_t(cols) * sizeof(float));
        for (int64_t p = 0; p < kp; ++p) {
            const float a0 = lo_bf16(a[i * lda + p]);
            const float a1 = hi_bf16(a[i * lda + p]);
            const uint32_t* bp = b + p * ldb;
            for (int64_t j = 0; j < cols; ++j) ci[j] += a1 * hi_bf16(bp[j]) + a0 * lo_bf16(bp[j]);
        }
    }
}

#if defined(MB_SIMD_X86)
#define MB_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16,avx2,fma,f16c")))

MB_TARGET_BF16 inline __m512bh as_bh(__m512i x) {
    __m512bh r;
    std::memcpy(&r, &x, sizeof(r));
    return r;
}

// R rows x C registers of 16 columns: R x C accumulators (at most 16 of the 32).
template <int R, int C, bool Acc>
MB_TARGET_BF16 inline void tile(int64_t kp, const uint32_t* a, int64_t lda, const uint32_t* b, int64_t ldb, float* c,
                                int64_t ldc) {
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r) {
        for (int q = 0; q < C; ++q) acc[r][q] = Acc ? _mm512_loadu_ps(c + r * ldc + 16 * q) : _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < kp; ++p) {
        __m512bh bv[C];
        for (int q = 0; q < C; ++q) bv[q] = as_bh(_mm512_loadu_si512(b + p * ldb + 16 * q));
        for (int r = 0; r < R; ++r) {
            const __m512bh av = as_bh(_mm512_set1_epi32(int(a[r * lda + p])));
            for (int q = 0; q < C; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], av, bv[q]);
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int q = 0; q < C; ++q) _mm512_storeu_ps(c + r * ldc + 16 * q, acc[r][q]);
    }
}

// The columns [j, j + 16 C) of every row, 8 rows at a time.
template <int C, bool Acc>
MB_TARGET_BF16 void rows_bf16(int64_t rows, int64_t kp, const uint32_t* a, int64_t lda, const uint32_t* b,
                              int64_t ldb, float* c, int64_t ldc) {
    int64_t i = 0;
    for (; i + 8 <= rows; i += 8) tile<8, C, Acc>(kp, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
    const uint32_t* ai = a + i * lda;
    float* ci = c + i * ldc;
    switch (rows - i) {
        case 7: tile<7, C, Acc>(kp, ai, lda, b, ldb, ci, ldc); break;
        case 6: tile<6, C, Acc>(kp, ai, lda, b, ldb, ci, ldc); break;
        case 5: tile<5, C, Acc>(kp, ai, lda, b, ldb, ci, ldc); break;
        case 4: tile<4, C, Acc>(kp, ai, lda, b, ldb, ci, ldc); break;
        case 3: tile<3, C, Acc>(kp, ai, lda, b, ldb, ci, ldc); break;
        case 2: tile<2, C, Acc>(kp, ai, lda, b, ldb, ci, ldc); break;
        case 1: tile<1, C, Acc>(kp, ai, lda, b, ldb, ci, ldc); break;
        default: break;
    }
}

template <bool Acc>
MB_TARGET_BF16 void gemm_native(int64_t rows, int64_t cols, int64_t kp, const uint32_t* a, int64_t lda,
                                const uint32_t* b, int64_t ldb, float* c, int64_t ldc) {
    int64_t j = 0;
    for (; j + 32 <= cols; j += 32) rows_bf16<2, Acc>(rows, kp, a, lda, b + j, ldb, c + j, ldc);
    if (j < cols) rows_bf16<1, Acc>(rows, kp, a, lda, b + j, ldb, c + j, ldc);
}

MB_TARGET_BF16 void pack_native(float* x, int64_t n) {
    uint16_t* out = reinterpret_cast<uint16_t*>(x);
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        // Both halves are read before the 64 bytes at out + j (at or before the bytes just read) are
        // written.
        const __m512 lo = _mm512_loadu_ps(x + j);
        const __m512 hi = _mm512_loadu_ps(x + j + 16);
        const __m512bh h = _mm512_cvtne2ps_pbh(hi, lo);
        std::memcpy(out + j, &h, sizeof(h));
    }
    if (j < n) {
        const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + j));
        std::memcpy(out + j, &h, sizeof(h));
    }
}
#endif

}  // namespace

bool gemm_bf16_native() { return cpu_has_avx512_bf16(); }

void gemm_bf16_pairs(int64_t rows, int64_t cols, int64_t kp, const uint32_t* a, int64_t lda, const uint32_t* b,
                     int64_t ldb, float* c, int64_t ldc, bool accumulate) {
#if defined(MB_SIMD_X86)
    if (gemm_bf16_native()) {
        if (accumulate) return gemm_native<true>(rows, cols, kp, a, lda, b, ldb, c, ldc);
        return gemm_native<false>(rows, cols, kp, a, lda, b, ldb, c, ldc);
    }
#endif
    gemm_portable(rows, cols, kp, a, lda, b, ldb, c, ldc, accumulate);
}

uint32_t* pack_bf16_pairs_in_place(float* x, int64_t n) {
#if defined(MB_SIMD_X86)
    if (gemm_bf16_native()) {
        pack_native(x, n);
        return reinterpret_cast<uint32_t*>(x);
    }
#endif
    uint16_t* out = reinterpret_cast<uint16_t*>(x);
    for (int64_t j = 0; j < n; ++j) {
        // Element j's bytes [2j, 2j + 2) lie at or before the float j they come from.
        const uint16_t h = fp32_to_bf16(x[j]);
        std::memcpy(out + j, &h, sizeof(h));
    }
    return reinterpret_cast<uint32_t*>(x);
}

}  // namespace mb
