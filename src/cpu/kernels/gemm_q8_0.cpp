#include "cpu/kernels/gemm_q8_0.h"

#include <cmath>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "core/types.h"
#include "cpu/kernels/int8_dot_x86.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"

// GCC 12's avx512fintrin.h (PR 105593, fixed in GCC 13) fills undefined lanes from a self-initialised
// variable, which -Wmaybe-uninitialized reports once inlined into the AVX512-VNNI kernel below.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

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

// AVX512-VNNI kernel (512-bit vpdpbusd, where cpu_has_avx512_vnni() holds, more than one group of 8
// tokens). The sign trick costs a vpsignb per weight row and token vector, as many instructions as the
// products themselves; here the activations carry the unsigned operand instead: their codes plus 128
// (x ^ 0x80, 1 .. 255), against the weight codes as signed bytes (-128 included), so one vpdpbusd makes
// 64 products, and each block's sum starts from -128 * sum(weight codes), which takes the +128 back
// out exactly (|sum| <= 32 * 255 * 128, far inside int32). The integer sum of a block is then the
// portable one, and the float update per block the same three operations, so the results are bit for
// bit those of every other path. 16 tokens per vector (4 codes each), weight codes broadcast from the
// blocks as stored; tiles of kRows512 rows x kGroups512 vectors keep the integer and float sums in the
// 32 registers.
#define MB_TARGET_Q8_VNNI512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

constexpr int64_t kGroup16 = 16;                   // tokens per 512-bit vector
constexpr int64_t kStep16Bytes = 4 * kGroup16;     // one step: 4 codes of 16 tokens
constexpr int64_t kBlock16Bytes = kSteps * kStep16Bytes;
constexpr int kRows512 = 4;
constexpr int kGroups512 = 3;

int64_t n_groups16(int64_t nt) { return (nt + kGroup16 - 1) / kGroup16; }

size_t scratch_bytes_512(int64_t nb, int64_t nt) {
    return size_t(n_groups16(nt) * nb) * size_t(kBlock16Bytes + kGroup16 * int64_t(sizeof(float))) +
           size_t(kRows512 * nb) * (sizeof(int32_t) + sizeof(float));
}

// Activations as the 512-bit tiles read them: group g, block i, step s at
// codes + (g * nb + i) * kBlock16Bytes + s * kStep16Bytes, token l's 4 codes (+128) at byte 4 * l; the
// scales at scales + (g * nb + i) * 16 + l. Tokens past nt get code 0 (byte 0x80) and scale 0.
MB_TARGET_Q8_VNNI512 void pack_activations16(int64_t nb, const void* const* acts, int64_t nt, uint8_t* codes,
                                             float* scales) {
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    const int64_t ng = n_groups16(nt);
    for (int64_t g = 0; g < ng; ++g) {
        for (int64_t l = 0; l < kGroup16; ++l) {
            const int64_t t = g * kGroup16 + l;
            const auto* x = t < nt ? static_cast<const BlockQ8Act*>(acts[t]) : nullptr;
            for (int64_t i = 0; i < nb; ++i) {
                uint8_t* c = codes + (g * nb + i) * kBlock16Bytes + 4 * l;
                alignas(32) uint32_t q[kSteps];
                const __m256i v =
                    x ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)) : _mm256_setzero_si256();
                _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_xor_si256(v, flip));
                for (int64_t s = 0; s < kSteps; ++s) std::memcpy(c + s * kStep16Bytes, q + s, 4);
                scales[(g * nb + i) * kGroup16 + l] = x ? x[i].d : 0.0f;
            }
        }
    }
}

// NR rows x NG vectors of 16 tokens, every block: res[(r * NG + v) * 16 + l] for token l of vector v.
// corr[r * nb + i] = -128 * (row r's block i code sum), dw[r * nb + i] its scale.
template <int NR, int NG>
MB_TARGET_Q8_VNNI512 void tile_512(int64_t nb, const BlockQ8_0* const* w, const int32_t* corr, const float* dw,
                                   const uint8_t* codes, const float* scales, int64_t group_codes,
                                   int64_t group_scales, float* res) {
    __m512 facc[NR][NG];
    for (auto& row : facc)
        for (auto& v : row) v = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        __m512i acc[NR][NG];
#pragma GCC unroll 8
        for (int r = 0; r < NR; ++r) {
            const __m512i c0 = _mm512_set1_epi32(corr[r * nb + i]);
#pragma GCC unroll 4
            for (int v = 0; v < NG; ++v) acc[r][v] = c0;
        }
        const uint8_t* c = codes + i * kBlock16Bytes;
#pragma GCC unroll 8
        for (int64_t s = 0; s < kSteps; ++s) {
            __m512i x[NG];
#pragma GCC unroll 4
            for (int v = 0; v < NG; ++v) x[v] = _mm512_loadu_si512(c + v * group_codes + s * kStep16Bytes);
#pragma GCC unroll 8
            for (int r = 0; r < NR; ++r) {
                int32_t q;
                std::memcpy(&q, w[r][i].qs + 4 * s, 4);
                const __m512i wq = _mm512_set1_epi32(q);
#pragma GCC unroll 4
                for (int v = 0; v < NG; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], x[v], wq);
            }
        }
        __m512 d[NG];
#pragma GCC unroll 4
        for (int v = 0; v < NG; ++v) d[v] = _mm512_loadu_ps(scales + v * group_scales + i * kGroup16);
#pragma GCC unroll 8
        for (int r = 0; r < NR; ++r) {
            const __m512 dr = _mm512_set1_ps(dw[r * nb + i]);
#pragma GCC unroll 4
            for (int v = 0; v < NG; ++v) {
                facc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][v]), _mm512_mul_ps(dr, d[v]), facc[r][v]);
            }
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int v = 0; v < NG; ++v) _mm512_storeu_ps(res + (r * NG + v) * kGroup16, facc[r][v]);
}

template <int NR, int NG>
MB_TARGET_Q8_VNNI512 void tile_512_upto(int groups, int64_t nb, const BlockQ8_0* const* w, const int32_t* corr,
                                        const float* dw, const uint8_t* codes, const float* scales,
                                        int64_t group_codes, int64_t group_scales, float* res) {
    if constexpr (NG > 1) {
        if (groups < NG) {
            tile_512_upto<NR, NG - 1>(groups, nb, w, corr, dw, codes, scales, group_codes, group_scales, res);
            return;
        }
    }
    tile_512<NR, NG>(nb, w, corr, dw, codes, scales, group_codes, group_scales, res);
}

// NR rows against every token: the rows' code sums and scales first, then the tiles.
template <int NR>
MB_TARGET_Q8_VNNI512 void row_block_512(int64_t nb, const BlockQ8_0* const* w, int32_t* corr, float* dw,
                                        const uint8_t* codes, const float* scales, int64_t nt, float* out,
                                        int64_t ldo) {
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    for (int r = 0; r < NR; ++r) {
        for (int64_t i = 0; i < nb; ++i) {
            // sum(q) = sum(q + 128) - 32 * 128, the unsigned sum by vpsadbw.
            const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][i].qs)), flip);
            const __m256i s4 = _mm256_sad_epu8(q, _mm256_setzero_si256());
            const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
            const int64_t sum = _mm_cvtsi128_si64(_mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2))) - 32 * 128;
            corr[r * nb + i] = int32_t(-128 * sum);
            dw[r * nb + i] = _cvtsh_ss(w[r][i].d);
        }
    }
    const int64_t group_codes = nb * kBlock16Bytes;
    const int64_t group_scales = nb * kGroup16;
    const int64_t ng = n_groups16(nt);
    alignas(64) float res[NR * kGroups512 * kGroup16];
    for (int64_t g = 0; g < ng; g += kGroups512) {
        const int groups = int(std::min<int64_t>(kGroups512, ng - g));
        tile_512_upto<NR, kGroups512>(groups, nb, w, corr, dw, codes + g * group_codes, scales + g * group_scales,
                                      group_codes, group_scales, res);
        const int64_t t0 = g * kGroup16;
        const int64_t t1 = std::min<int64_t>(nt, t0 + groups * kGroup16);
        for (int64_t t = t0; t < t1; ++t) {
            const int64_t v = (t - t0) / kGroup16, l = (t - t0) % kGroup16;
            for (int r = 0; r < NR; ++r) out[t * ldo + r] = res[(r * groups + v) * kGroup16 + l];
        }
    }
}

MB_TARGET_Q8_VNNI512 void gemm_vnni512(int64_t k, const uint8_t* a, size_t stride, int64_t rows,
                                       const void* const* acts, int64_t nt, float* out, int64_t ldo,
                                       uint8_t* scratch) {
    const int64_t nb = k / kBlock;
    uint8_t* codes = scratch;
    float* scales = reinterpret_cast<float*>(scratch + size_t(n_groups16(nt) * nb * kBlock16Bytes));
    int32_t* corr = reinterpret_cast<int32_t*>(scales + n_groups16(nt) * nb * kGroup16);
    float* dw = reinterpret_cast<float*>(corr + kRows512 * nb);
    pack_activations16(nb, acts, nt, codes, scales);
    const BlockQ8_0* w[kRows512];
    int64_t r = 0;
    for (; r + kRows512 <= rows; r += kRows512) {
        for (int i = 0; i < kRows512; ++i) w[i] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r + i) * stride);
        row_block_512<kRows512>(nb, w, corr, dw, codes, scales, nt, out + r, ldo);
    }
    for (; r < rows; ++r) {
        w[0] = reinterpret_cast<const BlockQ8_0*>(a + size_t(r) * stride);
        row_block_512<1>(nb, w, corr, dw, codes, scales, nt, out + r, ldo);
    }
}


// AVX512-VNNI kernel for few tokens (where few_tokens_win and cpu_has_avx512_vnni() hold): 16
// weight rows per vector, one per 32-bit lane, instead of 16 tokens. With tokens in the lanes (above)
// a product of 20 tokens fills two vectors of 16, so 12 of 32 lanes do no work; here every lane is a
// row, whatever the token count. A panel of 16 rows is transposed once into vectors of 4 codes of each
// row (per block 8 vectors, the codes plus 128: x ^ 0x80, so the weights are the unsigned operand),
// then every token's 4 codes are broadcast against them straight from its activation block (the
// signed operand; vpdpbusd takes it as an embedded broadcast). Each block's sum starts from
// -128 * sum(the token's codes) and so comes out the exact integer sum; the float update per block is
// fma(float(dot), d_w * D, acc) in block order: bit for bit the other paths' results. The transpose
// costs about as much as 5 tokens' products, against one token vector of loads and 4 weight
// broadcasts per 4 rows and block saved for every token.
constexpr int64_t kLanes16 = 16;                        // weight rows per panel (lanes)
constexpr size_t kPanelBlockBytes = kSteps * 64;        // a block of a panel: 8 vectors of 16 rows x 4 codes
constexpr int kTokenTile = 8;                           // tokens whose sums stay in registers together
// Where the few-token kernel runs: from gemm_q8_0_min_tokens() to 8 tokens, and 17 to 48. Measured on
// Zen 4 (1 thread, CPU time, best of 3 interleaved runs each; 384 x 51864 q8_0 weights streamed from
// L3, as the decoder reads its weights), few-token / previous kernel ms: 5 tokens 2.49 / 2.70 (the
// matrix-vector kernels), 6: 2.22 / 2.61, 8: 2.76 / 2.71, 20: 4.90 / 7.04, 24: 5.48 / 6.25,
// 40: 7.93 / 8.79, 48: 8.87 / 9.78. At 9-16 tokens one token vector has no lane to spare and the
// transpose is pure cost (16: 4.12 / 3.20); at 32 they tie (7.04 / 6.82); past 48 the vectors fill.
bool few_tokens_win(int64_t nt) { return nt <= 8 || (nt > 16 && nt <= 48 && nt != 32); }

// While a panel is transposed, the rows of the panel this many ahead are asked into L2 (_MM_HINT_T1).
// Into L1 (T0), one panel ahead, as first written, the lines evicted the transposed codes and the
// activations the tiles were reading: measured on Zen 4 (2 threads, best of 40 calls, 51864 q8_0
// weight rows, 3 alternating runs each, a 40 MB read between calls so the weights come from memory),
// T0 one panel ahead / T1 two ahead, ms: K = 384, 5 tokens 1.08-1.60 / 0.91-0.93 and one 1.57
// (1 thread 2.9 / 1.8); K = 512, 5 tokens 1.96-2.97 / 1.22-1.23; K = 384, 8 tokens 1.93-2.08 /
// 1.34-1.37, 20: 2.72-2.97 / 2.39, 40: 4.44-4.56 / 3.85-4.19; one, three and four panels ahead in L2
// were no better than two. The matrix-vector tiles (tile_prefetch.h) were not faster with T1 (same
// runs, 1 token: 0.96-0.98 against 0.98-1.00 ms).
constexpr int64_t kPrefetchPanels = 2;

size_t scratch_bytes_few512(int64_t nb, int64_t nt) {
    return 64 + size_t(nb) * (kPanelBlockBytes + kLanes16 * sizeof(float)) + size_t(nt * nb) * sizeof(int32_t);
}

// Rows r of the panel (nr <= 16 valid; the others repeat row 0, their lanes are not stored): per block
// i, vector s holds codes 4s .. 4s+3 of row r in lane r (plus 128), at codes + i * 8 + s; the rows'
// scales as floats at dw + 16 i.
MB_TARGET_Q8_VNNI512 void pack_panel16(int64_t nb, const uint8_t* a, size_t stride, int nr, bool prefetch,
                                       __m512i* codes, float* dw) {
    const uint8_t* row[kLanes16];
    alignas(64) int32_t offsets[kLanes16];
    for (int j = 0; j < kLanes16; ++j) {
        row[j] = a + size_t(j < nr ? j : 0) * stride;
        offsets[j] = int32_t(row[j] - row[0]);
    }
    const __m512i starts = _mm512_load_si512(offsets);
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int64_t i = 0; i < nb; ++i) {
        const size_t off = size_t(i) * sizeof(BlockQ8_0);
        // Row p in the low half, row p + 8 in the high half: two 8 x 8 dword transposes side by side.
        __m512i r[8];
        for (int p = 0; p < 8; ++p) {
            const auto* b0 = reinterpret_cast<const BlockQ8_0*>(row[p] + off);
            const auto* b1 = reinterpret_cast<const BlockQ8_0*>(row[p + 8] + off);
            r[p] = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0->qs))),
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1->qs)), 1);
        }
        __m512i t[8];
        for (int p = 0; p < 4; ++p) {
            t[2 * p] = _mm512_unpacklo_epi32(r[2 * p], r[2 * p + 1]);
            t[2 * p + 1] = _mm512_unpackhi_epi32(r[2 * p], r[2 * p + 1]);
        }
        // u[c] (c < 4): per 128-bit lane, steps c | c + 4 of rows 0-3 (u[c]) and 4-7 (u[c + 4]) of its half.
        __m512i u[8];
        for (int h = 0; h < 2; ++h) {
            u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
            u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
            u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
            u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
        }
        __m512i* out = codes + i * kSteps;
        for (int c = 0; c < 4; ++c) {
            out[c] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[c], lo, u[c + 4]), flip);
            out[c + 4] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[c], hi, u[c + 4]), flip);
        }
        // The 16 scales by one gather of the dwords that start the blocks (scale, then two codes).
        const __m512i first = _mm512_i32gather_epi32(starts, row[0] + off, 1);
        _mm512_storeu_ps(dw + i * kLanes16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(first)));
        // The rows kPrefetchPanels panels on, one line per row and block, into L2 (see kPrefetchPanels).
        if (prefetch) {
            for (int j = 0; j < kLanes16; ++j) {
                _mm_prefetch(reinterpret_cast<const char*>(row[j] + off + kPrefetchPanels * kLanes16 * stride),
                             _MM_HINT_T1);
            }
        }
    }
}

// T tokens against the packed panel: out[t][lane] for the panel's rows under mask.
template <int T>
MB_TARGET_Q8_VNNI512 void few_tile_512(int64_t nb, const __m512i* codes, const float* dw,
                                       const BlockQ8Act* const* x, const int32_t* const* corr, float* const* out,
                                       __mmask16 mask) {
    // C chains per token (steps s, s + C, ..), so that few tokens still keep enough vpdpbusd in flight.
    constexpr int C = T >= 5 ? 1 : T >= 3 ? 2 : 4;
    __m512 facc[T];
    for (auto& f : facc) f = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; ++i) {
        const __m512i* w = codes + i * kSteps;
        __m512i chain[C][T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            chain[0][t] = _mm512_set1_epi32(corr[t][i]);
            for (int c = 1; c < C; ++c) chain[c][t] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int64_t s = 0; s < kSteps; ++s) {
            const __m512i ws = _mm512_load_si512(w + s);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                int32_t q;
                std::memcpy(&q, x[t][i].qs + 4 * s, 4);
                chain[s % C][t] = _mm512_dpbusd_epi32(chain[s % C][t], ws, _mm512_set1_epi32(q));
            }
        }
        __m512i acc[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            acc[t] = chain[0][t];
            for (int c = 1; c < C; ++c) acc[t] = _mm512_add_epi32(acc[t], chain[c][t]);
        }
        const __m512 d = _mm512_loadu_ps(dw + i * kLanes16);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[t]), _mm512_mul_ps(d, _mm512_set1_ps(x[t][i].d)), facc[t]);
        }
    }
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(out[t], mask, facc[t]);
}

template <int T>
MB_TARGET_Q8_VNNI512 void few_tile_512_upto(int tokens, int64_t nb, const __m512i* codes, const float* dw,
                                            const BlockQ8Act* const* x, const int32_t* const* corr,
                                            float* const* out, __mmask16 mask) {
    if constexpr (T > 1) {
        if (tokens < T) {
            few_tile_512_upto<T - 1>(tokens, nb, codes, dw, x, corr, out, mask);
            return;
        }
    }
    few_tile_512<T>(nb, codes, dw, x, corr, out, mask);
}

MB_TARGET_Q8_VNNI512 void gemm_few_vnni512(int64_t k, const uint8_t* a, size_t stride, int64_t rows,
                                           const void* const* acts, int64_t nt, float* out, int64_t ldo,
                                           uint8_t* scratch) {
    const int64_t nb = k / kBlock;
    auto* codes = reinterpret_cast<__m512i*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t(63));
    auto* dw = reinterpret_cast<float*>(codes + nb * kSteps);
    auto* corr = reinterpret_cast<int32_t*>(dw + nb * kLanes16);
    // Per token and block, -128 * sum(codes): sum(x) = sum(x + 128) - 32 * 128, the unsigned sum by vpsadbw.
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    for (int64_t t = 0; t < nt; ++t) {
        const auto* x = static_cast<const BlockQ8Act*>(acts[t]);
        for (int64_t i = 0; i < nb; ++i) {
            const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)), flip);
            const __m256i s4 = _mm256_sad_epu8(q, _mm256_setzero_si256());
            const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
            const int64_t sum = _mm_cvtsi128_si64(_mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2))) - 32 * 128;
            corr[t * nb + i] = int32_t(-128 * sum);
        }
    }
    for (int64_t r = 0; r < rows; r += kLanes16) {
        const int nr = int(std::min<int64_t>(kLanes16, rows - r));
        const auto mask = __mmask16((1u << nr) - 1u);
        pack_panel16(nb, a + size_t(r) * stride, stride, nr, r + (kPrefetchPanels + 1) * kLanes16 <= rows, codes,
                     dw);
        for (int64_t t0 = 0; t0 < nt; t0 += kTokenTile) {
            const int tokens = int(std::min<int64_t>(kTokenTile, nt - t0));
            const BlockQ8Act* x[kTokenTile];
            const int32_t* c[kTokenTile];
            float* o[kTokenTile];
            for (int t = 0; t < tokens; ++t) {
                x[t] = static_cast<const BlockQ8Act*>(acts[t0 + t]);
                c[t] = corr + (t0 + t) * nb;
                o[t] = out + (t0 + t) * ldo + r;
            }
            few_tile_512_upto<kTokenTile>(tokens, nb, codes, dw, x, c, o, mask);
        }
    }
}

#endif  // MB_SIMD_X86

}  // namespace

namespace {

// MB_INT8_FEW_TOKENS=0 turns the few-token kernel off (the before/after of benchmarks/int8_gemm.py).
bool few_tokens_on() {
    static const bool on = [] {
        const char* e = std::getenv("MB_INT8_FEW_TOKENS");
        return e == nullptr || std::strcmp(e, "0") != 0;
    }();
    return on;
}

}  // namespace

int64_t gemm_q8_0_min_tokens() {
#if defined(MB_SIMD_X86)
    return cpu_hardware_has_avx512_vnni() && few_tokens_on() ? 5 : 6;
#else
    return 0;
#endif
}

bool gemm_q8_0_built() {
#if defined(MB_SIMD_X86)
    return true;
#else
    return false;
#endif
}

size_t gemm_q8_0_scratch_bytes(int64_t k, int64_t nt) {
    const size_t nb = size_t(k / kBlock);
    const size_t avx2 = nb * size_t(n_groups(nt)) * kGroupBytes + nb * prep_block_bytes(kRows) + nb * kSumsBytes;
#if defined(MB_SIMD_X86)
    return std::max({avx2, scratch_bytes_512(int64_t(nb), nt), scratch_bytes_few512(int64_t(nb), nt)});
#else
    return avx2;
#endif
}

void gemm_q8_0(int64_t k, const uint8_t* a, size_t stride, int64_t rows, const void* const* acts, int64_t nt,
               float* out, int64_t ldo, uint8_t* scratch) {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx512_vnni() && few_tokens_win(nt) && few_tokens_on()) {
        gemm_few_vnni512(k, a, stride, rows, acts, nt, out, ldo, scratch);
        return;
    }
    if (cpu_has_avx512_vnni()) {
        gemm_vnni512(k, a, stride, rows, acts, nt, out, ldo, scratch);
        return;
    }
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
