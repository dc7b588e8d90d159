#include "cpu/kernels/gemm_f32.h"

#include <algorithm>
#include <cstdint>

#include "cpu/kernels/simd.h"

namespace mb {

namespace {

// c (ldc floats between rows) = or += the kGemmMR x kGemmNR product of one token group and one panel.
// pf_lines > 0: the kernel may prefetch that many cache lines of pf into L2, one per k step (the next
// panel, see gemm_f32_block); a kernel without prefetch ignores them.
using Kernel = void (*)(int64_t kc, const float* panel, const float* tokens, float* c, int64_t ldc, bool accumulate,
                        const char* pf, int64_t pf_lines);

// ---- portable --------------------------------------------------------------------------------------

#if !defined(MB_SIMD_NEON)

// The 16-wide inner loop vectorises at baseline (SSE2) without intrinsics.
void kernel_portable(int64_t kc, const float* panel, const float* tokens, float* c, int64_t ldc, bool accumulate,
                     const char* /*pf*/, int64_t /*pf_lines*/) {
    float acc[kGemmMR][kGemmNR] = {};
    for (int64_t k = 0; k < kc; ++k) {
        const float* w = panel + k * kGemmNR;
        const float* x = tokens + k * kGemmMR;
        for (int r = 0; r < kGemmMR; ++r) {
            for (int j = 0; j < kGemmNR; ++j) {
                acc[r][j] += w[j] * x[r];
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

#endif  // !MB_SIMD_NEON

void pack_panel_portable(const float* const* rows, int64_t kc, float* panel) {
    for (int64_t k = 0; k < kc; ++k) {
        for (int r = 0; r < kGemmNR; ++r) {
            panel[k * kGemmNR + r] = rows[r][k];
        }
    }
}

// ---- AVX2 + FMA ----------------------------------------------------------------------------------

#if defined(MB_SIMD_X86)

// 12 accumulators + 2 weight vectors + 1 broadcast = 15 of the 16 ymm registers. Two FMAs per cycle
// at latency 4 need 8 independent chains; the 12 accumulators give them.
// With pf_lines > 0 it prefetches the next panel into L2 as kernel_avx512 does the next pair. On this
// 2-core Zen host (512 KiB of L2 per core), A/B in one process, best of 3 x 2 bursts, f32
// 1500x384x1536 / 1500x1536x384 / 2048^3 and q4_0 1500x1536x384 at 1 and 2 threads: 0-13% faster in
// 7 cells, equal in 1.
MB_TARGET_AVX2 void kernel_avx2(int64_t kc, const float* panel, const float* tokens, float* c, int64_t ldc,
                                bool accumulate, const char* pf, int64_t pf_lines) {
    // The output tile's six rows are touched only after the k loop; fetching them now hides the miss
    // (with several k blocks they were evicted by the panels streamed since the last block).
    for (int r = 0; r < kGemmMR; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kGemmNR - 1), _MM_HINT_T0);
    }
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const float* w = panel;
    const float* x = tokens;
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; ++k, w += kGemmNR, x += kGemmMR) {
        if (k < pf_lines) _mm_prefetch(pf + k * 64, _MM_HINT_T1);
        const __m256 w0 = _mm256_load_ps(w);
        const __m256 w1 = _mm256_load_ps(w + 8);
        __m256 b = _mm256_broadcast_ss(x + 0);
        c00 = _mm256_fmadd_ps(w0, b, c00);
        c01 = _mm256_fmadd_ps(w1, b, c01);
        b = _mm256_broadcast_ss(x + 1);
        c10 = _mm256_fmadd_ps(w0, b, c10);
        c11 = _mm256_fmadd_ps(w1, b, c11);
        b = _mm256_broadcast_ss(x + 2);
        c20 = _mm256_fmadd_ps(w0, b, c20);
        c21 = _mm256_fmadd_ps(w1, b, c21);
        b = _mm256_broadcast_ss(x + 3);
        c30 = _mm256_fmadd_ps(w0, b, c30);
        c31 = _mm256_fmadd_ps(w1, b, c31);
        b = _mm256_broadcast_ss(x + 4);
        c40 = _mm256_fmadd_ps(w0, b, c40);
        c41 = _mm256_fmadd_ps(w1, b, c41);
        b = _mm256_broadcast_ss(x + 5);
        c50 = _mm256_fmadd_ps(w0, b, c50);
        c51 = _mm256_fmadd_ps(w1, b, c51);
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

// In-place 8x8 transpose: r[i] lane j becomes r[j] lane i.
MB_TARGET_AVX2 inline void transpose8x8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// 8x8 transposes: eight rows' k..k+7 become eight k-major groups of eight.
MB_TARGET_AVX2 void pack_panel_avx2(const float* const* rows, int64_t kc, float* panel) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        for (int half = 0; half < 2; ++half) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(rows[8 * half + i] + k);
            transpose8x8(r);
            float* out = panel + k * kGemmNR + 8 * half;
            for (int i = 0; i < 8; ++i) _mm256_store_ps(out + i * kGemmNR, r[i]);
        }
    }
    for (; k < kc; ++k) {
        for (int r = 0; r < kGemmNR; ++r) {
            panel[k * kGemmNR + r] = rows[r][k];
        }
    }
}

// One full group of kGemmMR token rows: per 8 k, the rows are loaded as an 8x8 block (rows 6 and 7
// repeat rows 0 and 1), transposed, and each column's first six floats stored at out + k * kGemmMR.
// An 8-float store writes two floats past its column; the next column's store covers them, and the
// group's last column uses a masked store so nothing past the group is touched.
MB_TARGET_AVX2 void pack_token_group_avx2(const float* const* rows, int64_t kc, float* out) {
    static_assert(kGemmMR == 6, "the transpose below packs groups of six rows");
    const __m256i first6 = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
        for (int i = 0; i < kGemmMR; ++i) r[i] = _mm256_loadu_ps(rows[i] + k);
        r[6] = r[0];  // don't-care lanes
        r[7] = r[1];
        transpose8x8(r);
        float* o = out + k * kGemmMR;
        for (int i = 0; i < 7; ++i) _mm256_storeu_ps(o + i * kGemmMR, r[i]);
        if (k + 8 < kc) {
            _mm256_storeu_ps(o + 7 * kGemmMR, r[7]);
        } else {
            _mm256_maskstore_ps(o + 7 * kGemmMR, first6, r[7]);
        }
    }
    for (; k < kc; ++k) {
        for (int r = 0; r < kGemmMR; ++r) {
            out[k * kGemmMR + r] = rows[r][k];
        }
    }
}

#endif  // MB_SIMD_X86

// ---- AVX-512 -------------------------------------------------------------------------------------

#if defined(MB_SIMD_X86)

// Two panels (32 weight rows, one zmm each per k) times two token groups (12 tokens): 24 accumulators
// + 2 weight vectors + 1 broadcast of the 32 zmm registers. Per k: 14 loads for 24 FMAs, where the
// 6x16 AVX2 tile has 8 loads for 12. The packed formats are the AVX2 kernel's: panel p1 and group g1
// simply follow p0 and g0.
// pf_lines > 0: one line of pf is prefetched into L2 per k step, for the first pf_lines steps. The
// caller points it at the next pair of panels: a job's packed weights outgrow L2 (2.36 MB for 1536
// rows of K 384) and come from L3 for the first token groups of each pair, where the hardware
// prefetcher left the tile waiting. Measured on the 16-core Xeon host, A/B in one process, best of
// 3 x 2 bursts, f32 1500x384x1536 / 1500x1536x384 / 2048^3 and q4_0 1500x1536x384 at 2, 4 and 16
// threads: 3-11% faster in 10 of the 12 cells, 3% slower in 2; the median of every cell faster.
MB_TARGET_AVX512 void kernel_avx512(int64_t kc, const float* p0, const float* p1, const float* g0, const float* g1,
                                    float* c, int64_t ldc, bool accumulate, const char* pf, int64_t pf_lines) {
    constexpr int kRows = 2 * kGemmMR;
    for (int r = 0; r < kRows; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 2 * kGemmNR - 1), _MM_HINT_T0);
    }
    __m512 acc[kRows][2];
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) {
        acc[r][0] = _mm512_setzero_ps();
        acc[r][1] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; ++k) {
        if (k < pf_lines) _mm_prefetch(pf + k * 64, _MM_HINT_T1);
        const __m512 w0 = _mm512_loadu_ps(p0 + k * kGemmNR);
        const __m512 w1 = _mm512_loadu_ps(p1 + k * kGemmNR);
#pragma GCC unroll 6
        for (int r = 0; r < kGemmMR; ++r) {
            const __m512 b = _mm512_set1_ps(g0[k * kGemmMR + r]);
            acc[r][0] = _mm512_fmadd_ps(w0, b, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w1, b, acc[r][1]);
        }
#pragma GCC unroll 6
        for (int r = 0; r < kGemmMR; ++r) {
            const __m512 b = _mm512_set1_ps(g1[k * kGemmMR + r]);
            acc[kGemmMR + r][0] = _mm512_fmadd_ps(w0, b, acc[kGemmMR + r][0]);
            acc[kGemmMR + r][1] = _mm512_fmadd_ps(w1, b, acc[kGemmMR + r][1]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) {
        float* cr = c + r * ldc;
        __m512 v0 = acc[r][0];
        __m512 v1 = acc[r][1];
        if (accumulate) {
            v0 = _mm512_add_ps(v0, _mm512_loadu_ps(cr));
            v1 = _mm512_add_ps(v1, _mm512_loadu_ps(cr + kGemmNR));
        }
        _mm512_storeu_ps(cr, v0);
        _mm512_storeu_ps(cr + kGemmNR, v1);
    }
}

#endif  // MB_SIMD_X86

// ---- NEON ----------------------------------------------------------------------------------------

#if defined(MB_SIMD_NEON)

// 24 accumulators + 4 weight vectors + 2 token vectors = 30 of the 32 q registers.
void kernel_neon(int64_t kc, const float* panel, const float* tokens, float* c, int64_t ldc, bool accumulate,
                 const char* /*pf*/, int64_t /*pf_lines*/) {
    float32x4_t acc[kGemmMR][4];
    for (int r = 0; r < kGemmMR; ++r) {
        for (int q = 0; q < 4; ++q) {
            acc[r][q] = vdupq_n_f32(0.0f);
        }
    }
    const float* w = panel;
    const float* x = tokens;
    for (int64_t k = 0; k < kc; ++k, w += kGemmNR, x += kGemmMR) {
        const float32x4_t w0 = vld1q_f32(w), w1 = vld1q_f32(w + 4), w2 = vld1q_f32(w + 8), w3 = vld1q_f32(w + 12);
        const float32x4_t b0123 = vld1q_f32(x);
        const float32x2_t b45 = vld1_f32(x + 4);
#define MB_ROW_LANEQ(R, V, L)                               \
    acc[R][0] = vfmaq_laneq_f32(acc[R][0], w0, V, L);       \
    acc[R][1] = vfmaq_laneq_f32(acc[R][1], w1, V, L);       \
    acc[R][2] = vfmaq_laneq_f32(acc[R][2], w2, V, L);       \
    acc[R][3] = vfmaq_laneq_f32(acc[R][3], w3, V, L);
#define MB_ROW_LANE(R, V, L)                                \
    acc[R][0] = vfmaq_lane_f32(acc[R][0], w0, V, L);        \
    acc[R][1] = vfmaq_lane_f32(acc[R][1], w1, V, L);        \
    acc[R][2] = vfmaq_lane_f32(acc[R][2], w2, V, L);        \
    acc[R][3] = vfmaq_lane_f32(acc[R][3], w3, V, L);
        MB_ROW_LANEQ(0, b0123, 0)
        MB_ROW_LANEQ(1, b0123, 1)
        MB_ROW_LANEQ(2, b0123, 2)
        MB_ROW_LANEQ(3, b0123, 3)
        MB_ROW_LANE(4, b45, 0)
        MB_ROW_LANE(5, b45, 1)
#undef MB_ROW_LANEQ
#undef MB_ROW_LANE
    }
    for (int r = 0; r < kGemmMR; ++r) {
        float* cr = c + r * ldc;
        for (int q = 0; q < 4; ++q) {
            float32x4_t v = acc[r][q];
            if (accumulate) {
                v = vaddq_f32(v, vld1q_f32(cr + 4 * q));
            }
            vst1q_f32(cr + 4 * q, v);
        }
    }
}

#endif  // MB_SIMD_NEON

Kernel select_kernel() {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx2_fma_f16c()) {
        return kernel_avx2;
    }
#endif
#if defined(MB_SIMD_NEON)
    return kernel_neon;
#else
    return kernel_portable;
#endif
}

void pack_panel_full(const float* const* rows, int64_t kc, float* panel) {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx2_fma_f16c()) {
        pack_panel_avx2(rows, kc, panel);
        return;
    }
#endif
    pack_panel_portable(rows, kc, panel);
}

}  // namespace

void gemm_pack_panel(const float* const* rows, int nr, int64_t kc, float* panel) {
    if (nr == kGemmNR) {
        pack_panel_full(rows, kc, panel);
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

void gemm_pack_tokens(const float* b, int64_t ldb, int64_t m, int64_t kc, float* out) {
    for (int64_t i0 = 0; i0 < m; i0 += kGemmMR, out += kc * kGemmMR) {
        const int mr = int(std::min<int64_t>(kGemmMR, m - i0));
        const float* rows[kGemmMR];
        for (int r = 0; r < mr; ++r) {
            rows[r] = b + (i0 + r) * ldb;
        }
#if defined(MB_SIMD_X86)
        if (mr == kGemmMR && cpu_has_avx2_fma_f16c()) {
            pack_token_group_avx2(rows, kc, out);
            continue;
        }
#endif
        for (int64_t k = 0; k < kc; ++k) {
            float* o = out + k * kGemmMR;
            for (int r = 0; r < mr; ++r) {
                o[r] = rows[r][k];
            }
            for (int r = mr; r < kGemmMR; ++r) {
                o[r] = 0.0f;
            }
        }
    }
}

namespace {

// A GemmPrefetch handed out a share per kernel call: the next share lines of its ranges, in order.
class PrefetchShares {
public:
    PrefetchShares(GemmPrefetch ranges, int64_t share) : r_(ranges), share_(share) {}

    // The start and line count of the next share (at most max_lines, within one range).
    const char* take(int64_t max_lines, int64_t* lines) {
        if (r_.lines[0] == 0) {
            r_.at[0] = r_.at[1];
            r_.lines[0] = r_.lines[1];
            r_.lines[1] = 0;
        }
        *lines = std::min({share_, max_lines, r_.lines[0]});
        const char* at = r_.at[0];
        r_.at[0] += *lines * 64;
        r_.lines[0] -= *lines;
        return *lines > 0 ? at : nullptr;
    }

private:
    GemmPrefetch r_;
    int64_t share_;
};

// Token groups i0 .. m of one panel (nr <= kGemmNR rows of c from column j0) through the 6x16 kernel;
// edge tiles go through a local tile.
// The calls without a panel of their own to fetch take a share of shares.
void panel_groups(Kernel kernel, int64_t kc, const float* panel, int nr, int64_t j0, const float* tokens, int64_t i0,
                  int64_t m, float* c, int64_t ldc, bool accumulate, PrefetchShares* shares,
                  const char* next = nullptr) {
    for (bool first = true; i0 < m; i0 += kGemmMR, first = false) {
        const int mr = int(std::min<int64_t>(kGemmMR, m - i0));
        const float* group = tokens + (i0 / kGemmMR) * kc * kGemmMR;
        float* ct = c + i0 * ldc + j0;
        // The first call on this panel fetches the next one (kc lines) into L2.
        const char* pf = first ? next : nullptr;
        int64_t pf_lines = pf != nullptr ? kc : 0;
        if (pf == nullptr) pf = shares->take(kc, &pf_lines);
        if (mr == kGemmMR && nr == kGemmNR) {
            kernel(kc, panel, group, ct, ldc, accumulate, pf, pf_lines);
            continue;
        }
        alignas(32) float tile[kGemmMR * kGemmNR];
        kernel(kc, panel, group, tile, kGemmNR, false, pf, pf_lines);
        for (int r = 0; r < mr; ++r) {
            for (int j = 0; j < nr; ++j) {
                const float v = tile[r * kGemmNR + j];
                ct[r * ldc + j] = accumulate ? ct[r * ldc + j] + v : v;
            }
        }
    }
}

}  // namespace

void gemm_f32_block(int64_t kc, const float* panels, int64_t n, const float* tokens, int64_t m, float* c,
                    int64_t ldc, bool accumulate, GemmPrefetch prefetch) {
    const Kernel kernel = select_kernel();
    // Kernel calls (6 x 16 tiles; an AVX-512 call counts for four): the prefetch is spread over half.
    const int64_t calls = ((n + kGemmNR - 1) / kGemmNR) * ((m + kGemmMR - 1) / kGemmMR);
    const int64_t quads = cpu_has_avx512f() ? 4 : 1;
    const int64_t half = std::max<int64_t>(1, calls / (2 * quads));
    PrefetchShares shares(prefetch, (prefetch.lines[0] + prefetch.lines[1] + half - 1) / half);
    // The weight panel stays in L1 across the token groups; the token groups stream from L2.
    int64_t j0 = 0;
#if defined(MB_SIMD_X86)
    if (cpu_has_avx512f()) {
        // Pairs of full panels against pairs of full token groups, 32 rows x 12 tokens a call; the
        // token groups left over (fewer than 12 tokens) take the 6x16 kernel.
        for (; j0 + 2 * kGemmNR <= n; j0 += 2 * kGemmNR) {
            const float* p0 = panels + (j0 / kGemmNR) * kc * kGemmNR;
            const float* p1 = p0 + kc * kGemmNR;
            int64_t i0 = 0;
            // The first two calls on this pair fetch the next pair into L2, a line per k step (see
            // kernel_avx512).
            const bool has_next = j0 + 4 * kGemmNR <= n;
            const char* next = has_next ? reinterpret_cast<const char*>(p1 + kc * kGemmNR) : nullptr;
            for (; i0 + 2 * kGemmMR <= m; i0 += 2 * kGemmMR) {
                const float* g0 = tokens + (i0 / kGemmMR) * kc * kGemmMR;
                const int64_t call = i0 / (2 * kGemmMR);
                const bool fetch = has_next && call < 2;
                int64_t pf_lines = fetch ? kc : 0;
                const char* pf = fetch ? next + call * kc * 64 : shares.take(kc, &pf_lines);
                kernel_avx512(kc, p0, p1, g0, g0 + kc * kGemmMR, c + i0 * ldc + j0, ldc, accumulate, pf, pf_lines);
            }
            panel_groups(kernel, kc, p0, kGemmNR, j0, tokens, i0, m, c, ldc, accumulate, &shares);
            panel_groups(kernel, kc, p1, kGemmNR, j0 + kGemmNR, tokens, i0, m, c, ldc, accumulate, &shares);
        }
    }
#endif
    for (; j0 < n; j0 += kGemmNR) {
        const float* panel = panels + (j0 / kGemmNR) * kc * kGemmNR;
        const char* next = j0 + 2 * kGemmNR <= n ? reinterpret_cast<const char*>(panel + kc * kGemmNR) : nullptr;
        panel_groups(kernel, kc, panel, int(std::min<int64_t>(kGemmNR, n - j0)), j0, tokens, 0, m, c, ldc,
                     accumulate, &shares, next);
    }
}

}  // namespace mb
