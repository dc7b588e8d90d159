// The table types' SIMD dot products (vec_dot_table_simd.h).
#include "cpu/kernels/vec_dot_table_simd.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/fp16.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"
#include "quant_blocks.h"

#if defined(MB_SIMD_X86)
#include <type_traits>

#include "cpu/kernels/int8_dot_x86.h"
#include "cpu/kernels/tile_prefetch.h"
#endif

namespace mb {

#if defined(MB_SIMD_X86)

namespace {

MB_TARGET_AVX2 inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

// The 16-entry table in both 128-bit lanes.
MB_TARGET_AVX2 inline __m256i table256(const int8_t* table) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table));
    return _mm256_broadcastsi128_si256(t);
}

// The 32 table values of 16 code bytes (element j < 16 the low nibble of qs[j], j + 16 its high one).
MB_TARGET_AVX2 inline __m256i values32(__m256i table, const uint8_t* qs) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i lo = _mm_and_si128(q, _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0F));
    return _mm256_shuffle_epi8(table, _mm256_set_m128i(hi, lo));
}

// sum_j v[j] * y[j] over 32 signed bytes, exactly: |y| (unsigned, so an activation code of -128, which
// the AVX2 activation quantizer writes for -inf, reads as 128) against v with y's sign moved onto it
// (|v| <= 127, so the negation cannot overflow; pairs stay at most 2 * 128 * 127).
template <typename Dot>
MB_TARGET_AVX2 inline __m256i dot32(__m256i acc, __m256i v, const int8_t* y) {
    const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y));
    return Dot::lanes(acc, _mm256_sign_epi8(yv, yv), _mm256_sign_epi8(v, yv));
}

inline float block_scale(const block_iq4_nl& b) { return fp16_to_fp32(b.d); }
inline float block_scale(const block_mxfp4& b) { return mb_qb_e8m0_half(b.e); }
inline const int8_t* table_of(const block_iq4_nl&) { return mb_kvalues_iq4nl; }
inline const int8_t* table_of(const block_mxfp4&) { return mb_kvalues_mxfp4; }

// The sums of the 8 lanes of each of s[0..7], as the 8 lanes of one vector (in order).
MB_TARGET_AVX2 inline __m256i hsum8(const __m256i* s) {
    const __m256i u0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    const __m256i u1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

// The f32 weight scales of 8 consecutive blocks (exact conversions, as block_scale's).
MB_TARGET_AVX2 inline __m256 scales8(const block_iq4_nl* a) {
    alignas(16) uint16_t h[8];
    for (int j = 0; j < 8; ++j) h[j] = a[j].d;
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}
MB_TARGET_AVX2 inline __m256 scales8(const block_mxfp4* a) {
    // mb_qb_e8m0_half's bits, lane by lane: (e - 1) << 23, or 0x00200000 << e for e < 2.
    const __m256i e = _mm256_setr_epi32(a[0].e, a[1].e, a[2].e, a[3].e, a[4].e, a[5].e, a[6].e, a[7].e);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, one), 23);
    const __m256i small = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, small, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
}

template <class Block, typename Dot>
MB_TARGET_AVX2 float dot_table32_x86(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const Block*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    const __m256i table = table256(table_of(a[0]));
    const int64_t nb = k / MB_QK;
    __m256 accv = _mm256_setzero_ps();
    int64_t i = 0;
    // Eight blocks at a time: lane j of accv is the portable kernel's accumulator j (block i + j).
    for (; i + 8 <= nb; i += 8) {
        __m256i s[8];
        alignas(32) float dy[8];
        for (int j = 0; j < 8; ++j) {
            s[j] = dot32<Dot>(_mm256_setzero_si256(), values32(table, a[i + j].qs), b[i + j].qs);
            dy[j] = b[i + j].d;
        }
        const __m256 sc = _mm256_mul_ps(scales8(a + i), _mm256_load_ps(dy));
        accv = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(hsum8(s)), accv);
    }
    alignas(32) float acc[8];
    _mm256_store_ps(acc, accv);
    for (; i < nb; ++i) {
        const int32_t s = hsum_i32(dot32<Dot>(_mm256_setzero_si256(), values32(table, a[i].qs), b[i].qs));
        acc[i % 8] = std::fma(block_scale(a[i]) * b[i].d, float(s), acc[i % 8]);
    }
    return table_acc_sum(acc);
}

// ---- four-row tiles (vec_dot.h's VecDotRowsFn): each row and token gets dot_table32_x86's bits (the
// same integer block sums, the same eight-lane fused multiply-adds, the same table_acc_sum at the end).
// A block's 16 code bytes are loaded once into both 128-bit halves (a load-port broadcast), the high
// half shifted down by four bits with one vpsrlvq, masked and looked up: element j < 16 in the low
// half, j + 16 in the high one, the activation codes' own order. The activation work is shared by the
// four rows. Per row and block, AVX2's form moves the activation's sign onto the table value
// (vpsignb) against |y|; the VNNI forms look up table + 128 (unsigned, at most 241) instead and
// start each block's lanes at -128 * y (one vpdpbusd per token and block for the four rows), which
// saves the vpsignb: vpdpbusd does not saturate, so both sums are exact and equal.

// The 32 codes of one block (16 bytes at qs), element j in byte j, unsigned nibbles.
MB_TARGET_AVX2 inline __m256i codes32(const uint8_t* qs) {
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0F));
}

// The lane sums of four blocks' lanes: low half [s0, s1, s2, s3] over their low halves, high half the
// same over their high halves (hsum8 is two of these added).
MB_TARGET_AVX2 inline __m256i hsum4(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
}

// Eight blocks of four rows and NT tokens into acc: x[r] is row r's first block of the eight, y[t] token t's.
template <class Block, typename Dot, int NT>
MB_TARGET_AVX2 inline void tile_step8(const Block* const* x, const BlockQ8Act* const* y, __m256i table,
                                      __m256 (&acc)[4][NT]) {
    constexpr bool kOffset = !std::is_same<Dot, DotAvx2>::value;
    // Per token and block: AVX2 |y|, VNNI the lanes of -128 * y.
    alignas(32) __m256i pre[NT][8];
    __m256 dy[NT];
#pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) {
        const BlockQ8Act* yt = y[t];
        dy[t] = _mm256_setr_ps(yt[0].d, yt[1].d, yt[2].d, yt[3].d, yt[4].d, yt[5].d, yt[6].d, yt[7].d);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
            const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yt[j].qs));
            const __m256i zero = _mm256_setzero_si256();
            pre[t][j] = kOffset ? _mm256_sub_epi32(zero, Dot::lanes(zero, _mm256_set1_epi8(char(0x80)), yv))
                                : _mm256_sign_epi8(yv, yv);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
        const Block* xr = x[r];
        __m256i half[NT][2];
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            __m256i s[NT][4];
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const __m256i v = _mm256_shuffle_epi8(table, codes32(xr[4 * h + j].qs));
#pragma GCC unroll 2
                for (int t = 0; t < NT; ++t) {
                    const int8_t* yq = y[t][4 * h + j].qs;
                    const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq));
                    const __m256i p = pre[t][4 * h + j];
                    s[t][j] = kOffset ? Dot::lanes(p, v, yv)
                                      : Dot::lanes(_mm256_setzero_si256(), p, _mm256_sign_epi8(v, yv));
                }
            }
#pragma GCC unroll 2
            for (int t = 0; t < NT; ++t) half[t][h] = hsum4(s[t][0], s[t][1], s[t][2], s[t][3]);
        }
        const __m256 w = scales8(xr);
#pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) {
            const __m256i u0 = half[t][0], u1 = half[t][1];
            const __m256i sums = _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
                                                  _mm256_permute2x128_si256(u0, u1, 0x31));
            acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(w, dy[t]), _mm256_cvtepi32_ps(sums), acc[r][t]);
        }
    }
}

// Four blocks of four rows and NT tokens into lanes 0-3 of acc (tile_step8's first half): lanes 4-7 take
// fused multiply-adds of 0 by 0, which add +0 and keep their bits (a lane that started at +0 and only took
// fused multiply-adds is never -0).
template <class Block, typename Dot, int NT>
MB_TARGET_AVX2 inline void tile_step4(const Block* const* x, const BlockQ8Act* const* y, __m256i table,
                                      __m256 (&acc)[4][NT]) {
    constexpr bool kOffset = !std::is_same<Dot, DotAvx2>::value;
    __m256i pre[NT][4];
    __m128 dy[NT];
    for (int t = 0; t < NT; ++t) {
        const BlockQ8Act* yt = y[t];
        dy[t] = _mm_setr_ps(yt[0].d, yt[1].d, yt[2].d, yt[3].d);
        for (int j = 0; j < 4; ++j) {
            const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yt[j].qs));
            const __m256i zero = _mm256_setzero_si256();
            pre[t][j] = kOffset ? _mm256_sub_epi32(zero, Dot::lanes(zero, _mm256_set1_epi8(char(0x80)), yv))
                                : _mm256_sign_epi8(yv, yv);
        }
    }
    for (int r = 0; r < 4; ++r) {
        const Block* xr = x[r];
        __m256i s[NT][4];
        for (int j = 0; j < 4; ++j) {
            const __m256i v = _mm256_shuffle_epi8(table, codes32(xr[j].qs));
            for (int t = 0; t < NT; ++t) {
                const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][j].qs));
                s[t][j] = kOffset ? Dot::lanes(pre[t][j], v, yv)
                                  : Dot::lanes(_mm256_setzero_si256(), pre[t][j], _mm256_sign_epi8(v, yv));
            }
        }
        const __m128 w = _mm_setr_ps(block_scale(xr[0]), block_scale(xr[1]), block_scale(xr[2]), block_scale(xr[3]));
        for (int t = 0; t < NT; ++t) {
            const __m256i u = hsum4(s[t][0], s[t][1], s[t][2], s[t][3]);
            const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
            const __m256 wd = _mm256_insertf128_ps(_mm256_setzero_ps(), _mm_mul_ps(w, dy[t]), 0);
            const __m256 sf = _mm256_insertf128_ps(_mm256_setzero_ps(), _mm_cvtepi32_ps(sums), 0);
            acc[r][t] = _mm256_fmadd_ps(wd, sf, acc[r][t]);
        }
    }
}

template <class Block, typename Dot, int NT>
MB_TARGET_AVX2 void tile_table(int64_t k, const uint8_t* a, size_t stride, const void* const* vb, float* out) {
    constexpr bool kOffset = !std::is_same<Dot, DotAvx2>::value;
    constexpr size_t bs = sizeof(Block);
    const int64_t nb = k / MB_QK;
    const uint8_t* rows[4];
    for (int r = 0; r < 4; ++r) rows[r] = a + size_t(r) * stride;
    const BlockQ8Act* b[NT];
    for (int t = 0; t < NT; ++t) b[t] = static_cast<const BlockQ8Act*>(vb[t]);
    const __m256i table0 = table256(table_of(Block{}));
    const __m256i table = kOffset ? _mm256_add_epi8(table0, _mm256_set1_epi8(char(0x80))) : table0;
    __m256 acc[4][NT];
    for (auto& row : acc)
        for (auto& v : row) v = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        prefetch_tile_ahead(rows, size_t(i) * bs, 8 * bs, size_t(nb) * bs, stride);
        const Block* x[4];
        for (int r = 0; r < 4; ++r) x[r] = reinterpret_cast<const Block*>(rows[r]) + i;
        const BlockQ8Act* y[NT];
        for (int t = 0; t < NT; ++t) y[t] = b[t] + i;
        tile_step8<Block, Dot, NT>(x, y, table, acc);
    }
    if (i + 4 <= nb) {  // four more blocks: lanes 0-3 (i is a multiple of 8 here), lanes 4-7 add exactly +0
        const Block* x[4];
        for (int r = 0; r < 4; ++r) x[r] = reinterpret_cast<const Block*>(rows[r]) + i;
        const BlockQ8Act* y[NT];
        for (int t = 0; t < NT; ++t) y[t] = b[t] + i;
        tile_step4<Block, Dot, NT>(x, y, table, acc);
        i += 4;
    }
    if (i == nb) {  // lane_sums4 adds each row's lanes in table_acc_sum's order
#pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) {
            _mm_storeu_ps(out + 4 * t, lane_sums4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
        }
        return;
    }
    for (int t = 0; t < NT; ++t) {  // the last 1-3 blocks, one row and block at a time
        for (int r = 0; r < 4; ++r) {
            alignas(32) float lanes[8];
            _mm256_store_ps(lanes, acc[r][t]);
            const Block* x = reinterpret_cast<const Block*>(rows[r]);
            for (int64_t j = i; j < nb; ++j) {
                const __m256i lanes_j = dot32<Dot>(_mm256_setzero_si256(), values32(table0, x[j].qs), b[t][j].qs);
                const int32_t s = hsum_i32(lanes_j);
                lanes[j % 8] = std::fma(block_scale(x[j]) * b[t][j].d, float(s), lanes[j % 8]);
            }
            out[4 * t + r] = table_acc_sum(lanes);
        }
    }
}

template <class Block, typename Dot>
void rows_table(int64_t k, const uint8_t* a, size_t stride, const void* const* b, int nt, float* out) {
    (nt == 2 ? tile_table<Block, Dot, 2> : tile_table<Block, Dot, 1>)(k, a, stride, b, out);
}

template <typename Dot>
VecDotRowsFn table_rows_fn(Type t) {
    static_assert(kVecDotRows == 4 && kVecDotTokens == 2, "tile_table computes four rows and up to two tokens");
    switch (t) {
        case Type::IQ4_NL: return rows_table<block_iq4_nl, Dot>;
        case Type::MXFP4: return rows_table<block_mxfp4, Dot>;
        default: return nullptr;
    }
}

template <typename Dot>
VecDotKFn table_fn(Type t) {
    switch (t) {
        case Type::IQ4_NL: return dot_table32_x86<block_iq4_nl, Dot>;
        case Type::MXFP4: return dot_table32_x86<block_mxfp4, Dot>;
        // iq4_xs: vec_dot_k_avx2.h (vpmaddwd by the sub-block scales)
        default: return nullptr;
    }
}

}  // namespace

VecDotKFn vec_dot_table_simd_fn(Type t) {
    if (!cpu_has_avx2_fma_f16c()) return nullptr;
    return by_byte_dot(table_fn<DotAvx2>(t), table_fn<DotAvxVnni>(t), table_fn<DotVnni>(t));
}

VecDotRowsFn vec_dot_table_rows_fn(Type t, ByteDot form) {
    switch (form) {
        case ByteDot::Avx512Vnni: return table_rows_fn<DotVnni>(t);
        case ByteDot::AvxVnni: return table_rows_fn<DotAvxVnni>(t);
        case ByteDot::Avx2: break;
    }
    return table_rows_fn<DotAvx2>(t);
}

VecDotRowsFn vec_dot_table_rows_fn(Type t) {
    if (!cpu_has_avx2_fma_f16c()) return nullptr;
    return vec_dot_table_rows_fn(t, byte_dot_in_use());
}

#elif defined(MB_SIMD_NEON)

namespace {

// The 32 table values of 16 code bytes, as two halves (elements 0..15 and 16..31).
inline void values32_neon(int8x16_t table, const uint8_t* qs, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(qs);
    lo = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(0x0F)));
    hi = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
}

// sum_j v[j] * y[j] over 32 signed bytes, exactly.
inline int32_t dot32_neon(int8x16_t lo, int8x16_t hi, const int8_t* y) {
    const int8x16_t ylo = vld1q_s8(y), yhi = vld1q_s8(y + 16);
#if defined(__ARM_FEATURE_DOTPROD)
    return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, ylo), hi, yhi));
#else
    const int16x8_t p0 = vmlal_s8(vmull_s8(vget_low_s8(lo), vget_low_s8(ylo)), vget_high_s8(lo), vget_high_s8(ylo));
    const int16x8_t p1 = vmlal_s8(vmull_s8(vget_low_s8(hi), vget_low_s8(yhi)), vget_high_s8(hi), vget_high_s8(yhi));
    return vaddvq_s32(vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
#endif
}

inline float block_scale(const block_iq4_nl& b) { return fp16_to_fp32(b.d); }
inline float block_scale(const block_mxfp4& b) { return mb_qb_e8m0_half(b.e); }
inline const int8_t* table_of(const block_iq4_nl&) { return mb_kvalues_iq4nl; }
inline const int8_t* table_of(const block_mxfp4&) { return mb_kvalues_mxfp4; }

template <class Block>
float dot_table32_neon(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const Block*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    const int8x16_t table = vld1q_s8(table_of(a[0]));
    float acc[8] = {};
    for (int64_t i = 0; i < k / MB_QK; ++i) {
        int8x16_t lo, hi;
        values32_neon(table, a[i].qs, lo, hi);
        acc[i % 8] = std::fma(block_scale(a[i]) * b[i].d, float(dot32_neon(lo, hi, b[i].qs)), acc[i % 8]);
    }
    return table_acc_sum(acc);
}

float dot_iq4_xs_neon(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const block_iq4_xs*>(va);
    const auto* b = static_cast<const block_q8_K*>(vb);
    const int8x16_t table = vld1q_s8(mb_kvalues_iq4nl);
    float acc = 0.0f;
    for (int64_t i = 0; i < k / MB_QK_K; ++i) {
        int32_t isum = 0;
        for (int s = 0; s < MB_QK_K / 32; ++s) {
            int8x16_t lo, hi;
            values32_neon(table, a[i].qs + 16 * s, lo, hi);
            const int32_t ls = mb_qb_iq4xs_scale(s, a[i].scales_h, a[i].scales_l) - 32;
            isum += ls * dot32_neon(lo, hi, b[i].qs + 32 * s);
        }
        acc = std::fma(fp16_to_fp32(a[i].d) * b[i].d, float(isum), acc);
    }
    return acc;
}

}  // namespace

VecDotKFn vec_dot_table_simd_fn(Type t) {
    switch (t) {
        case Type::IQ4_NL: return dot_table32_neon<block_iq4_nl>;
        case Type::MXFP4: return dot_table32_neon<block_mxfp4>;
        case Type::IQ4_XS: return dot_iq4_xs_neon;
        default: return nullptr;
    }
}

#else

VecDotKFn vec_dot_table_simd_fn(Type) { return nullptr; }

#endif

#if !defined(MB_SIMD_X86)
VecDotRowsFn vec_dot_table_rows_fn(Type, ByteDot) { return nullptr; }
VecDotRowsFn vec_dot_table_rows_fn(Type) { return nullptr; }
#endif

}  // namespace mb
