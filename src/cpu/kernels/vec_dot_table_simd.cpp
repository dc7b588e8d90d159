// The table types' SIMD dot products (vec_dot_table_simd.h).
#include "cpu/kernels/vec_dot_table_simd.h"

#include <cmath>
#include <cstdint>

#include "core/fp16.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"
#include "quant_blocks.h"

#if defined(MB_SIMD_X86)
#include "cpu/kernels/int8_dot_x86.h"
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

}  // namespace mb
