#include "cpu/kernels/gemm_q8_0.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/types.h"
#include "cpu/kernels/int8_dot_x86.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"

namespace mb {

namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kGroup = 8;           // tokens per packed vector
constexpr int64_t kSteps = kBlock / 4;  // 4-code steps per block
constexpr int64_t kStepBytes = 4 * kGroup;
constexpr int kRows = 4;    // weight rows per tile
constexpr int kGroups = 2;  // token groups per tile
// Scratch per block and group of 8 tokens: the codes, then (after every group's codes) the scales.
constexpr size_t kGroupBytes = size_t(kSteps * kStepBytes) + kGroup * sizeof(float);

int64_t n_groups(int64_t nt) { return (nt + kGroup - 1) / kGroup; }

// The portable form, straight from the blocks.
void gemm_portable(int64_t k, const uint8_t* a, size_t stride, int64_t rows, const void* const* acts, int64_t nt,
                   float* out, int64_t ldo) {
    const int64_t nb = k / kBlock;
    for (int64_t r = 0; r < rows; ++r) {
        const auto* w = reinterpret_cast<const BlockQ8_0*>(a + size_t(r) * stride);
        for (int64_t t = 0; t < nt; ++t) {
            const auto* x = static_cast<const BlockQ8Act*>(acts[t]);
            float acc = 0.0f;
            for (int64_t i = 0; i < nb; ++i) {
                int32_t dot = 0;
                for (int j = 0; j < kBlock; ++j) dot += int32_t(w[i].qs[j]) * int32_t(x[i].qs[j]);
                const float scale = fp16_to_fp32(w[i].d) * x[i].d;
                acc = std::fma(float(dot), scale, acc);
            }
            out[t * ldo + r] = acc;
        }
    }
}

#if defined(MB_SIMD_X86)

// Activations of the call into groups of 8 tokens: group g, block i, step s at
// codes + ((g * nb + i) * kSteps + s) * kStepBytes, token l's 4 codes at byte 4 * l; the scales at
// scales + (g * nb + i) * kGroup + l. Tokens past nt get zero codes and scales.
void pack_activations(int64_t nb, const void* const* acts, int64_t nt, int8_t* codes, float* scales) {
    const int64_t ng = n_groups(nt);
    for (int64_t g = 0; g < ng; ++g) {
        for (int64_t i = 0; i < nb; ++i) {
            int8_t* c = codes + (g * nb + i) * kSteps * kStepBytes;
            float* d = scales + (g * nb + i) * kGroup;
            for (int64_t l = 0; l < kGroup; ++l) {
                const int64_t t = g * kGroup + l;
                if (t < nt) {
                    const BlockQ8Act& x = static_cast<const BlockQ8Act*>(acts[t])[i];
                    for (int64_t s = 0; s < kSteps; ++s) std::memcpy(c + s * kStepBytes + 4 * l, x.qs + 4 * s, 4);
                    d[l] = x.d;
                } else {
                    for (int64_t s = 0; s < kSteps; ++s) std::memset(c + s * kStepBytes + 4 * l, 0, 4);
                    d[l] = 0.0f;
                }
            }
        }
    }
}

MB_TARGET_AVX2 inline __m256i broadcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// NR rows (1 .. kRows) x NG groups of 8 tokens, every block. Results for token l of group v land in
// res[(r * NG + v) * kGroup + l].
template <typename Dot, int NR, int NG>
MB_TARGET_AVX2 void tile(int64_t nb, const BlockQ8_0* const* w, const int8_t* abs_w, const int8_t* codes,
                         const float* scales, int64_t group_codes, int64_t group_scales, float* res) {
    // The float sums live in res between blocks: sixteen registers hold the integer sums, the codes
    // and the broadcast weights of a 4 x 2 tile, and a block's float update is one load and store
    // per 8 steps.
    for (int j = 0; j < NR * NG; ++j) _mm256_store_ps(res + j * kGroup, _mm256_setzero_ps());
    for (int64_t i = 0; i < nb; ++i) {
        __m256i iacc[NR][NG];
        for (auto& row : iacc)
            for (auto& v : row) v = _mm256_setzero_si256();
        const int8_t* c = codes + i * kSteps * kStepBytes;
#pragma GCC unroll 1
        for (int64_t s = 0; s < kSteps; ++s) {
            __m256i x[NG];
#pragma GCC unroll 4
            for (int v = 0; v < NG; ++v) {
                x[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + v * group_codes + s * kStepBytes));
            }
#pragma GCC unroll 4
            for (int r = 0; r < NR; ++r) {
                const __m256i q = broadcast4(w[r][i].qs + 4 * s);
                const __m256i abs_q = broadcast4(abs_w + (i * NR + r) * kBlock + 4 * s);
#pragma GCC unroll 4
                for (int v = 0; v < NG; ++v) iacc[r][v] = Dot::lanes(iacc[r][v], abs_q, _mm256_sign_epi8(x[v], q));
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < NR; ++r) {
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(w[r][i].d));
#pragma GCC unroll 4
            for (int v = 0; v < NG; ++v) {
                const __m256 scale = _mm256_mul_ps(d, _mm256_load_ps(scales + v * group_scales + i * kGroup));
                float* f = res + (r * NG + v) * kGroup;
                _mm256_store_ps(f, _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r][v]), scale, _mm256_load_ps(f)));
            }
        }
        // Keeps the sums in memory: without it the compiler holds them in registers across the block
        // and spills integer sums from the step loop instead.
        __asm__ volatile("" ::: "memory");
    }
}

// NR rows against every token. abs_w: scratch for the rows' |codes| (nb * NR blocks of 32), made once
// here so the tiles broadcast them instead of taking each absolute value once per token group.
template <typename Dot, int NR>
MB_TARGET_AVX2 void row_block(int64_t nb, const BlockQ8_0* const* w, int8_t* abs_w, const int8_t* codes,
                              const float* scales, int64_t nt, float* out, int64_t ldo) {
    for (int64_t i = 0; i < nb; ++i) {
        for (int r = 0; r < NR; ++r) {
            // -128 becomes 0x80, read as 128 unsigned by vpmaddubsw: still exact.
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][i].qs));
            _mm256_store_si256(reinterpret_cast<__m256i*>(abs_w + (i * NR + r) * kBlock), _mm256_abs_epi8(q));
        }
    }
    const int64_t group_codes = nb * kSteps * kStepBytes;
    const int64_t group_scales = nb * kGroup;
    const int64_t ng = n_groups(nt);
    alignas(32) float res[kRows * kGroups * kGroup];
    for (int64_t g = 0; g < ng; g += kGroups) {
        const int groups = int(ng - g < kGroups ? ng - g : kGroups);
        const int8_t* c = codes + g * group_codes;
        const float* d = scales + g * group_scales;
        if (groups == 2) {
            tile<Dot, NR, 2>(nb, w, abs_w, c, d, group_codes, group_scales, res);
        } else {
            tile<Dot, NR, 1>(nb, w, abs_w, c, d, group_codes, group_scales, res);
        }
        for (int r = 0; r < NR; ++r) {
            for (int v = 0; v < groups; ++v) {
                for (int64_t l = 0; l < kGroup; ++l) {
                    const int64_t t = (g + v) * kGroup + l;
                    if (t < nt) out[t * ldo + r] = res[(r * groups + v) * kGroup + l];
                }
            }
        }
    }
}

static_assert(kGroups == 2, "row_block picks the one- or two-group tile");

template <typename Dot>
MB_TARGET_AVX2 void gemm_avx2(int64_t k, const uint8_t* a, size_t stride, int64_t rows, const void* const* acts,
                              int64_t nt, float* out, int64_t ldo, uint8_t* scratch) {
    const int64_t nb = k / kBlock;
    int8_t* codes = reinterpret_cast<int8_t*>(scratch);
    float* scales = reinterpret_cast<float*>(scratch + size_t(n_groups(nt) * nb * kSteps * kStepBytes));
    int8_t* abs_w = reinterpret_cast<int8_t*>(scratch + size_t(n_groups(nt) * nb) * kGroupBytes);
    pack_activations(nb, acts, nt, codes, scales);
    int64_t r = 0;
    const BlockQ8_0* w[kRows];
    for (; r + kRows <= rows; r += kRows) {
        for (int i = 0; i < kRows; ++i) w[i] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r + i) * stride);
        row_block<Dot, kRows>(nb, w, abs_w, codes, scales, nt, out + r, ldo);
    }
    for (; r < rows; ++r) {
        w[0] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r) * stride);
        row_block<Dot, 1>(nb, w, abs_w, codes, scales, nt, out + r, ldo);
    }
}

#endif  // MB_SIMD_X86

}  // namespace

bool gemm_q8_0_built() {
#if defined(MB_SIMD_X86)
    return true;
#else
    return false;
#endif
}

size_t gemm_q8_0_scratch_bytes(int64_t k, int64_t nt) {
    const size_t nb = size_t(k / kBlock);
    return nb * size_t(n_groups(nt)) * kGroupBytes + nb * size_t(kRows * kBlock);
}

void gemm_q8_0(int64_t k, const uint8_t* a, size_t stride, int64_t rows, const void* const* acts, int64_t nt,
               float* out, int64_t ldo, uint8_t* scratch) {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx2_fma_f16c()) {
        const auto fn = by_byte_dot(gemm_avx2<DotAvx2>, gemm_avx2<DotAvxVnni>, gemm_avx2<DotVnni>);
        fn(k, a, stride, rows, acts, nt, out, ldo, scratch);
        return;
    }
#else
    (void)scratch;
#endif
    gemm_portable(k, a, stride, rows, acts, nt, out, ldo);
}

}  // namespace mb
