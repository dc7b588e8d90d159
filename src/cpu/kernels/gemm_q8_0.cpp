#include "cpu/kernels/gemm_q8_0.h"

#include <cmath>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

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

// A row block's weights as the tiles read them, per block i at prep + i * prep_block_bytes(NR): the
// NR rows' 32 codes, then their 32 |codes|, then their NR scales as floats (padded to 32 bytes).
constexpr size_t prep_block_bytes(int nr) {
    return size_t(nr) * 2 * kBlock + (size_t(nr) * sizeof(float) + 31) / 32 * 32;
}

// Per block, the integer sums of a 4 x 2 tile (tile_4x2_avx2): 8 vectors of 8 int32.
constexpr size_t kSumsBytes = size_t(kRows * kGroups) * 32;
// Rows per tile when every token fits one group (tile_8x1_avx2, which uses the same sums).
constexpr int kFewRows = 8;

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

template <int NR>
MB_TARGET_AVX2 void prepare_rows(int64_t nb, const BlockQ8_0* const* w, int8_t* prep) {
    for (int64_t i = 0; i < nb; ++i) {
        int8_t* p = prep + size_t(i) * prep_block_bytes(NR);
        float* d = reinterpret_cast<float*>(p + 2 * NR * kBlock);
        for (int r = 0; r < NR; ++r) {
            // -128 becomes 0x80, read as 128 unsigned by vpmaddubsw: still exact.
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][i].qs));
            _mm256_store_si256(reinterpret_cast<__m256i*>(p + r * kBlock), q);
            _mm256_store_si256(reinterpret_cast<__m256i*>(p + (NR + r) * kBlock), _mm256_abs_epi8(q));
            d[r] = _cvtsh_ss(w[r][i].d);
        }
    }
}

// One block (8 steps of 4 codes) of the 4-row x 2-group tile with AVX2's byte products, written out
// so that the sixteen registers hold exactly the 8 integer sums, the two code vectors, the broadcast
// weight and |weight|, two products and the ones (the compiler's own allocation spilled or shuffled
// sums here and ran a third slower). p: the prepared block (row r's codes at p + 32 r, its |codes|
// at p + 32 (4 + r)); c0, c1: the two groups' 8 code vectors. acc[r][v] = the block's lanes of
// DotAvx2::lanes over the steps, from zero.
MB_TARGET_AVX2 inline void block_4x2_avx2(__m256i (&acc)[4][2], const int8_t* p, const int8_t* c0, const int8_t* c1) {
    __m256i x0, x1, q, a, t0, t1, ones;
#define MB_Q8_ROW(qoff, aoff, s0, s1)              \
    "vpbroadcastd " qoff "(%[p]), %[q]\n\t"       \
    "vpbroadcastd " aoff "(%[p]), %[a]\n\t"       \
    "vpsignb %[q], %[x0], %[t0]\n\t"              \
    "vpsignb %[q], %[x1], %[t1]\n\t"              \
    "vpmaddubsw %[t0], %[a], %[t0]\n\t"           \
    "vpmaddubsw %[t1], %[a], %[t1]\n\t"           \
    "vpmaddwd %[ones], %[t0], %[t0]\n\t"          \
    "vpmaddwd %[ones], %[t1], %[t1]\n\t"          \
    "vpaddd %[t0], %[" s0 "], %[" s0 "]\n\t"      \
    "vpaddd %[t1], %[" s1 "], %[" s1 "]\n\t"
#define MB_Q8_STEP(s)                                                                            \
    "vmovdqa 32*" s "(%[c0]), %[x0]\n\t"                                                        \
    "vmovdqa 32*" s "(%[c1]), %[x1]\n\t"                                                        \
    MB_Q8_ROW("4*" s, "128+4*" s, "s00", "s01") MB_Q8_ROW("32+4*" s, "160+4*" s, "s10", "s11") \
    MB_Q8_ROW("64+4*" s, "192+4*" s, "s20", "s21") MB_Q8_ROW("96+4*" s, "224+4*" s, "s30", "s31")
    __asm__("vpcmpeqw %[ones], %[ones], %[ones]\n\t"
            "vpsrlw $15, %[ones], %[ones]\n\t"
            "vpxor %[s00], %[s00], %[s00]\n\t"
            "vpxor %[s01], %[s01], %[s01]\n\t"
            "vpxor %[s10], %[s10], %[s10]\n\t"
            "vpxor %[s11], %[s11], %[s11]\n\t"
            "vpxor %[s20], %[s20], %[s20]\n\t"
            "vpxor %[s21], %[s21], %[s21]\n\t"
            "vpxor %[s30], %[s30], %[s30]\n\t"
            "vpxor %[s31], %[s31], %[s31]\n\t"
            MB_Q8_STEP("0") MB_Q8_STEP("1") MB_Q8_STEP("2") MB_Q8_STEP("3")
            MB_Q8_STEP("4") MB_Q8_STEP("5") MB_Q8_STEP("6") MB_Q8_STEP("7")
            : [s00] "=&x"(acc[0][0]), [s01] "=&x"(acc[0][1]), [s10] "=&x"(acc[1][0]), [s11] "=&x"(acc[1][1]),
              [s20] "=&x"(acc[2][0]), [s21] "=&x"(acc[2][1]), [s30] "=&x"(acc[3][0]), [s31] "=&x"(acc[3][1]),
              [x0] "=&x"(x0), [x1] "=&x"(x1), [q] "=&x"(q), [a] "=&x"(a), [t0] "=&x"(t0), [t1] "=&x"(t1),
              [ones] "=&x"(ones)
            : [p] "r"(p), [c0] "r"(c0), [c1] "r"(c1),
              "m"(*reinterpret_cast<const int8_t(*)[8 * kBlock]>(p)),
              "m"(*reinterpret_cast<const int8_t(*)[kSteps * kStepBytes]>(c0)),
              "m"(*reinterpret_cast<const int8_t(*)[kSteps * kStepBytes]>(c1)));
#undef MB_Q8_STEP
#undef MB_Q8_ROW
}

// NR rows (1 .. kRows) x NG groups of 8 tokens, every block. Results for token l of group v land in
// res[(r * NG + v) * kGroup + l].
template <typename Dot, int NR, int NG>
MB_TARGET_AVX2 void tile(int64_t nb, const int8_t* prep, const int8_t* codes, const float* scales,
                         int64_t group_codes, int64_t group_scales, float* res) {
    // The float sums live in res between blocks: the integer sums, the codes and the broadcast weights
    // of a 4 x 2 tile take the sixteen registers, and a block's float update is one load and store
    // per accumulator and 8 steps.
    for (int j = 0; j < NR * NG; ++j) _mm256_store_ps(res + j * kGroup, _mm256_setzero_ps());
    for (int64_t i = 0; i < nb; ++i) {
        const int8_t* p = prep + size_t(i) * prep_block_bytes(NR);
        const int8_t* c = codes + i * kSteps * kStepBytes;
        __m256i iacc[NR][NG];
        {
            for (auto& row : iacc)
                for (auto& v : row) v = _mm256_setzero_si256();
#pragma GCC unroll 1
            for (int64_t s = 0; s < kSteps; ++s) {
                __m256i x[NG];
#pragma GCC unroll 4
                for (int v = 0; v < NG; ++v) {
                    x[v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + v * group_codes + s * kStepBytes));
                }
#pragma GCC unroll 4
                for (int r = 0; r < NR; ++r) {
                    const __m256i q = broadcast4(p + r * kBlock + 4 * s);
                    const __m256i abs_q = broadcast4(p + (NR + r) * kBlock + 4 * s);
#pragma GCC unroll 4
                    for (int v = 0; v < NG; ++v) iacc[r][v] = Dot::lanes(iacc[r][v], abs_q, _mm256_sign_epi8(x[v], q));
                }
            }
        }
        const float* d = reinterpret_cast<const float*>(p + 2 * NR * kBlock);
#pragma GCC unroll 4
        for (int r = 0; r < NR; ++r) {
            const __m256 dr = _mm256_broadcast_ss(d + r);
#pragma GCC unroll 4
            for (int v = 0; v < NG; ++v) {
                const __m256 scale = _mm256_mul_ps(dr, _mm256_load_ps(scales + v * group_scales + i * kGroup));
                float* f = res + (r * NG + v) * kGroup;
                _mm256_store_ps(f, _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r][v]), scale, _mm256_load_ps(f)));
            }
        }
        // Keeps the float sums in memory: without it the compiler holds them in registers across the
        // block and spills integer sums from the steps instead.
        __asm__ volatile("" ::: "memory");
    }
}

// One block of the 8-row x 1-group tile (few tokens: one group of 8), as block_4x2_avx2 but read
// straight from the weight blocks (w[r]: row r's block; its codes at byte 2), |codes| taken per step:
// with few tokens a row block serves one tile, and a separate preparing pass over the rows (which
// stream from memory for a vocabulary projection) cost more than it saved. c: the group's 8 code
// vectors; acc[r] = the block's lanes for row r, from zero.
MB_TARGET_AVX2 inline void block_8x1_avx2(__m256i (&acc)[8], const BlockQ8_0* const* w, int64_t i, const int8_t* c) {
    __m256i x, q, a, t, ones;
#define MB_Q8_ROW(r, s)                                \
    "vpbroadcastd 2+4*" s "(%[w" r "]), %[q]\n\t"     \
    "vpabsb %[q], %[a]\n\t"                           \
    "vpsignb %[q], %[x], %[t]\n\t"                    \
    "vpmaddubsw %[t], %[a], %[t]\n\t"                 \
    "vpmaddwd %[ones], %[t], %[t]\n\t"                \
    "vpaddd %[t], %[s" r "], %[s" r "]\n\t"
#define MB_Q8_STEP(s)                                                                        \
    "vmovdqa 32*" s "(%[c]), %[x]\n\t"                                                      \
    MB_Q8_ROW("0", s) MB_Q8_ROW("1", s) MB_Q8_ROW("2", s) MB_Q8_ROW("3", s)                 \
    MB_Q8_ROW("4", s) MB_Q8_ROW("5", s) MB_Q8_ROW("6", s) MB_Q8_ROW("7", s)
    __asm__("vpcmpeqw %[ones], %[ones], %[ones]\n\t"
            "vpsrlw $15, %[ones], %[ones]\n\t"
            "vpxor %[s0], %[s0], %[s0]\n\t"
            "vpxor %[s1], %[s1], %[s1]\n\t"
            "vpxor %[s2], %[s2], %[s2]\n\t"
            "vpxor %[s3], %[s3], %[s3]\n\t"
            "vpxor %[s4], %[s4], %[s4]\n\t"
            "vpxor %[s5], %[s5], %[s5]\n\t"
            "vpxor %[s6], %[s6], %[s6]\n\t"
            "vpxor %[s7], %[s7], %[s7]\n\t"
            MB_Q8_STEP("0") MB_Q8_STEP("1") MB_Q8_STEP("2") MB_Q8_STEP("3")
            MB_Q8_STEP("4") MB_Q8_STEP("5") MB_Q8_STEP("6") MB_Q8_STEP("7")
            : [s0] "=&x"(acc[0]), [s1] "=&x"(acc[1]), [s2] "=&x"(acc[2]), [s3] "=&x"(acc[3]),
              [s4] "=&x"(acc[4]), [s5] "=&x"(acc[5]), [s6] "=&x"(acc[6]), [s7] "=&x"(acc[7]),
              [x] "=&x"(x), [q] "=&x"(q), [a] "=&x"(a), [t] "=&x"(t), [ones] "=&x"(ones)
            : [w0] "r"(w[0] + i), [w1] "r"(w[1] + i), [w2] "r"(w[2] + i), [w3] "r"(w[3] + i),
              [w4] "r"(w[4] + i), [w5] "r"(w[5] + i), [w6] "r"(w[6] + i), [w7] "r"(w[7] + i), [c] "r"(c)
            : "memory");
#undef MB_Q8_STEP
#undef MB_Q8_ROW
}

// The 8-row tile against one group of 8 tokens (nt <= 8), every block: integer sums, then their float
// updates in block order (as tile_4x2_avx2). out[t * ldo + r] for the nt tokens.
// next, next_bytes: the following tile's rows, prefetched over the blocks (the vocabulary projection's
// rows stream from memory, and 8 interleaved rows defeat the hardware's stream prefetch).
MB_TARGET_AVX2 void tile_8x1_avx2(int64_t nb, const BlockQ8_0* const* w, const int8_t* codes, const float* scales,
                                  __m256i* sums, int64_t nt, float* out, int64_t ldo, const uint8_t* next,
                                  size_t next_bytes) {
    const size_t lines = (next_bytes + 63) / 64;
    for (int64_t i = 0; i < nb; ++i) {
        for (size_t l = lines * size_t(i) / size_t(nb); l < lines * size_t(i + 1) / size_t(nb); ++l) {
            _mm_prefetch(reinterpret_cast<const char*>(next + 64 * l), _MM_HINT_T0);
        }
        __m256i iacc[8];
        block_8x1_avx2(iacc, w, i, codes + i * kSteps * kStepBytes);
        for (int j = 0; j < 8; ++j) _mm256_store_si256(sums + i * 8 + j, iacc[j]);
    }
    __m256 acc[8];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const __m256 x = _mm256_load_ps(scales + i * kGroup);
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            const __m256 d = _mm256_set1_ps(_cvtsh_ss(w[r][i].d));
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_load_si256(sums + i * 8 + r)), _mm256_mul_ps(d, x),
                                     acc[r]);
        }
    }
    alignas(32) float res[8 * kGroup];
    for (int r = 0; r < 8; ++r) _mm256_store_ps(res + r * kGroup, acc[r]);
    for (int64_t l = 0; l < nt; ++l) {
        for (int r = 0; r < 8; ++r) out[l * ldo + r] = res[r * kGroup + l];
    }
}

// The 4-row x 2-group tile with AVX2's byte products, in two passes: the blocks' integer sums into
// sums (nb x 8 vectors), then their float updates in block order. Interleaving the float update of each
// block with the integer steps (as tile() does) cost a third of the speed: the integer steps keep
// every vector pipe busy, and the 24 float operations per block stalled them; in a pass of their own
// they run as 8 independent chains. Same arithmetic as tile<DotAvx2, 4, 2>.
MB_TARGET_AVX2 void tile_4x2_avx2(int64_t nb, const int8_t* prep, const int8_t* codes, const float* scales,
                                  int64_t group_codes, int64_t group_scales, __m256i* sums, float* res) {
    for (int64_t i = 0; i < nb; ++i) {
        __m256i iacc[4][2];
        block_4x2_avx2(iacc, prep + size_t(i) * prep_block_bytes(4), codes + i * kSteps * kStepBytes,
                       codes + group_codes + i * kSteps * kStepBytes);
        for (int j = 0; j < 8; ++j) _mm256_store_si256(sums + i * 8 + j, iacc[j / 2][j % 2]);
    }
    __m256 acc[8];
    for (auto& v : acc) v = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const float* d = reinterpret_cast<const float*>(prep + size_t(i) * prep_block_bytes(4) + 8 * kBlock);
        const __m256 x0 = _mm256_load_ps(scales + i * kGroup);
        const __m256 x1 = _mm256_load_ps(scales + group_scales + i * kGroup);
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
            const __m256 dr = _mm256_broadcast_ss(d + r);
            acc[2 * r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_load_si256(sums + i * 8 + 2 * r)),
                                         _mm256_mul_ps(dr, x0), acc[2 * r]);
            acc[2 * r + 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_load_si256(sums + i * 8 + 2 * r + 1)),
                                             _mm256_mul_ps(dr, x1), acc[2 * r + 1]);
        }
    }
    for (int j = 0; j < 8; ++j) _mm256_store_ps(res + j * kGroup, acc[j]);
}

// A 4-row tile's results for the 8 tokens of group v (res[(r * groups + v) * 8 + l]) into out: token l's
// 4 rows at out + l * ldo.
MB_TARGET_AVX2 inline void store_4x8(const float* res, int groups, int v, float* out, int64_t ldo) {
    const __m256 r0 = _mm256_load_ps(res + (0 * groups + v) * kGroup);
    const __m256 r1 = _mm256_load_ps(res + (1 * groups + v) * kGroup);
    const __m256 r2 = _mm256_load_ps(res + (2 * groups + v) * kGroup);
    const __m256 r3 = _mm256_load_ps(res + (3 * groups + v) * kGroup);
    const __m256 lo01 = _mm256_unpacklo_ps(r0, r1);  // tokens 0, 1 | 4, 5 of rows 0, 1
    const __m256 hi01 = _mm256_unpackhi_ps(r0, r1);  // tokens 2, 3 | 6, 7
    const __m256 lo23 = _mm256_unpacklo_ps(r2, r3);
    const __m256 hi23 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t04 = _mm256_shuffle_ps(lo01, lo23, 0x44);
    const __m256 t15 = _mm256_shuffle_ps(lo01, lo23, 0xEE);
    const __m256 t26 = _mm256_shuffle_ps(hi01, hi23, 0x44);
    const __m256 t37 = _mm256_shuffle_ps(hi01, hi23, 0xEE);
    _mm_storeu_ps(out + 0 * ldo, _mm256_castps256_ps128(t04));
    _mm_storeu_ps(out + 1 * ldo, _mm256_castps256_ps128(t15));
    _mm_storeu_ps(out + 2 * ldo, _mm256_castps256_ps128(t26));
    _mm_storeu_ps(out + 3 * ldo, _mm256_castps256_ps128(t37));
    _mm_storeu_ps(out + 4 * ldo, _mm256_extractf128_ps(t04, 1));
    _mm_storeu_ps(out + 5 * ldo, _mm256_extractf128_ps(t15, 1));
    _mm_storeu_ps(out + 6 * ldo, _mm256_extractf128_ps(t26, 1));
    _mm_storeu_ps(out + 7 * ldo, _mm256_extractf128_ps(t37, 1));
}

// NR rows against every token. prep: scratch for the rows' prepared blocks (prepare_rows), made once
// here for every token group.
template <typename Dot, int NR>
MB_TARGET_AVX2 void row_block(int64_t nb, const BlockQ8_0* const* w, int8_t* prep, __m256i* sums,
                              const int8_t* codes, const float* scales, int64_t nt, float* out, int64_t ldo) {
    prepare_rows<NR>(nb, w, prep);
    const int64_t group_codes = nb * kSteps * kStepBytes;
    const int64_t group_scales = nb * kGroup;
    const int64_t ng = n_groups(nt);
    alignas(32) float res[kRows * kGroups * kGroup];
    for (int64_t g = 0; g < ng; g += kGroups) {
        const int groups = int(ng - g < kGroups ? ng - g : kGroups);
        const int8_t* c = codes + g * group_codes;
        const float* d = scales + g * group_scales;
        if (std::is_same_v<Dot, DotAvx2> && NR == 4 && groups == 2) {
            tile_4x2_avx2(nb, prep, c, d, group_codes, group_scales, sums, res);
        } else if (groups == 2) {
            tile<Dot, NR, 2>(nb, prep, c, d, group_codes, group_scales, res);
        } else {
            tile<Dot, NR, 1>(nb, prep, c, d, group_codes, group_scales, res);
        }
        if (NR == 4 && (g + groups) * kGroup <= nt) {
            for (int v = 0; v < groups; ++v) store_4x8(res, groups, v, out + (g + v) * kGroup * ldo, ldo);
            continue;
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
    int8_t* prep = reinterpret_cast<int8_t*>(scratch + size_t(n_groups(nt) * nb) * kGroupBytes);
    __m256i* sums = reinterpret_cast<__m256i*>(prep + size_t(nb) * prep_block_bytes(kRows));
    pack_activations(nb, acts, nt, codes, scales);
    int64_t r = 0;
    if (std::is_same_v<Dot, DotAvx2> && nt <= kGroup) {
        const BlockQ8_0* w8[kFewRows];
        for (; r + kFewRows <= rows; r += kFewRows) {
            for (int i = 0; i < kFewRows; ++i) w8[i] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r + i) * stride);
            const size_t next_rows = size_t(std::min<int64_t>(kFewRows, rows - r - kFewRows));
            tile_8x1_avx2(nb, w8, codes, scales, sums, nt, out + r, ldo, a + size_t(r + kFewRows) * stride,
                          next_rows * stride);
        }
    }
    const BlockQ8_0* w[kRows];
    for (; r + kRows <= rows; r += kRows) {
        for (int i = 0; i < kRows; ++i) w[i] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r + i) * stride);
        row_block<Dot, kRows>(nb, w, prep, sums, codes, scales, nt, out + r, ldo);
    }
    for (; r < rows; ++r) {
        w[0] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r) * stride);
        row_block<Dot, 1>(nb, w, prep, sums, codes, scales, nt, out + r, ldo);
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
    return nb * size_t(n_groups(nt)) * kGroupBytes + nb * prep_block_bytes(kRows) + nb * kSumsBytes;
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
