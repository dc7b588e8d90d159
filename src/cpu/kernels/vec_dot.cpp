#include "cpu/kernels/vec_dot.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/errors.h"
#include "core/fp16.h"
#include "cpu/kernels/int8_dot_x86.h"
#include "cpu/kernels/quant_blocks_avx2.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot_k.h"

namespace mb {

namespace {

constexpr int64_t kQ8Block = 32;

// ---- activation preparation ----------------------------------------------------------------------

// One block of 32 floats -> 8-bit codes with d = amax/127. Codes are x * (127/amax) rounded to
// nearest even (what cvtps2dq does under the default rounding mode, so both paths agree bit for
// bit); the clamp only gives NaN input a defined code. A block holding a NaN gets d = s = NaN, so
// the NaN reaches the dot product as it would in float arithmetic (fmax/max_ps skip it otherwise).
void quantize_q8_block_portable(const float* x, BlockQ8Act* y) {
    float amax = 0.0f;
    bool nan = false;
    for (int i = 0; i < kQ8Block; ++i) {
        amax = std::fmax(amax, std::fabs(x[i]));
        nan |= x[i] != x[i];
    }
    const float d = amax / 127.0f;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int i = 0; i < kQ8Block; ++i) {
        const float v = std::fmin(std::fmax(std::nearbyint(x[i] * id), -127.0f), 127.0f);
        y->qs[i] = int8_t(v);
        sum += y->qs[i];
    }
    y->d = nan ? std::nanf("") : d;
    y->s = nan ? std::nanf("") : d * float(sum);
}

#if defined(MB_SIMD_X86)

MB_TARGET_AVX2 void quantize_q8_block_avx2(const float* x, BlockQ8Act* y) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    __m256 unordered = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
        v[j] = _mm256_loadu_ps(x + 8 * j);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[j]));
        unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v[j], v[j], _CMP_UNORD_Q));
    }
    const bool nan = _mm256_movemask_ps(unordered) != 0;
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m256 lo = _mm256_set1_ps(-127.0f);
    const __m256 hi = _mm256_set1_ps(127.0f);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[j], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        // vmaxps returns its second operand when either is NaN, so max(r, lo) maps NaN (NaN input, or
        // +-inf times the zero inverse scale of a block whose amax is inf) to -127 as the portable
        // path's fmax does. (max(lo, r) passed the NaN on, and its conversion wrote -128, a code
        // that the sign trick cannot negate: -(-128) wraps to -128.)
        q[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
    }
    const __m256i sum32 = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum32), _mm256_extracti128_si256(sum32, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    // The two packs work within 128-bit lanes; the permute puts the four groups back in order.
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i b = _mm256_packs_epi16(p01, p23);
    const __m256i ordered = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y->qs), ordered);
    y->d = nan ? std::nanf("") : d;
    y->s = nan ? std::nanf("") : d * float(_mm_cvtsi128_si32(s4));
}

#endif

void quantize_q8_block(const float* x, BlockQ8Act* y) {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx2_fma_f16c()) {
        quantize_q8_block_avx2(x, y);
        return;
    }
#endif
    quantize_q8_block_portable(x, y);
}

// ---- portable dot products -----------------------------------------------------------------------

inline float load_f32(const float* p, int64_t i) { return p[i]; }
inline float load_f16(const uint16_t* p, int64_t i) { return fp16_to_fp32(p[i]); }
inline float load_bf16(const uint16_t* p, int64_t i) { return bf16_to_fp32(p[i]); }

// Eight independent partial sums let the compiler vectorise without reassociating.
template <typename TA, typename TB, float (*LA)(const TA*, int64_t), float (*LB)(const TB*, int64_t)>
float dot_float_portable(int64_t k, const void* va, const void* vb) {
    const TA* a = static_cast<const TA*>(va);
    const TB* b = static_cast<const TB*>(vb);
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        for (int l = 0; l < 8; ++l) {
            acc[l] += LA(a, i + l) * LB(b, i + l);
        }
    }
    float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < k; ++i) {
        s += LA(a, i) * LB(b, i);
    }
    return s;
}

inline void nibbles(const uint8_t* qs, uint8_t* u) {
    for (int j = 0; j < 16; ++j) {
        u[j] = qs[j] & 0x0F;
        u[j + 16] = qs[j] >> 4;
    }
}

inline void add_fifth_bits(const uint8_t* qh, uint8_t* u) {
    const uint32_t h = load_qh(qh);
    for (int j = 0; j < kQ8Block; ++j) {
        u[j] |= uint8_t(((h >> j) & 1u) << 4);
    }
}

// The m that the _1 types add to d * c.
inline float scalar_m(const BlockQ4_1& x) { return fp16_to_fp32(x.m); }
inline float scalar_m(const BlockQ5_1& x) { return fp16_to_fp32(x.m); }

// A block's unsigned codes in element order.
inline void scalar_codes(const BlockQ4_0& x, uint8_t* u) { nibbles(x.qs, u); }
inline void scalar_codes(const BlockQ4_1& x, uint8_t* u) { nibbles(x.qs, u); }
inline void scalar_codes(const BlockQ5_0& x, uint8_t* u) {
    nibbles(x.qs, u);
    add_fifth_bits(x.qh, u);
}
inline void scalar_codes(const BlockQ5_1& x, uint8_t* u) {
    nibbles(x.qs, u);
    add_fifth_bits(x.qh, u);
}

// What q4_0 and q5_0 take off every code (their values are d * (c - zero)); the _1 types add m instead.
template <typename Block> constexpr int kZeroPoint = 0;
template <> constexpr int kZeroPoint<BlockQ4_0> = MB_QB_ZERO_Q4_0;  // quant_blocks.h
template <> constexpr int kZeroPoint<BlockQ5_0> = MB_QB_ZERO_Q5_0;

// The portable twin of the x86 kernels, in their order (int8_dot_x86.h): 8 lanes of four products
// per block, each scaled into its own accumulator with a fused multiply-add, then the pairwise lane
// sum. std::fma keeps the portable path bit-identical to the SIMD ones (a library call on CPUs
// without an FMA unit, which only pre-2013 x86 CPUs lack).
struct LaneSums {
    float acc[8] = {};

    void add(const int32_t* w, const int8_t* q, float scale) {
        for (int j = 0; j < 8; ++j) {
            const int32_t lane = w[4 * j] * q[4 * j] + w[4 * j + 1] * q[4 * j + 1] + w[4 * j + 2] * q[4 * j + 2] +
                                 w[4 * j + 3] * q[4 * j + 3];
            acc[j] = std::fma(float(lane), scale, acc[j]);
        }
    }

    float total() const { return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])); }
};

template <typename Block>
float dot_quant_portable(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const Block*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    constexpr int kZero = kZeroPoint<Block>;
    LaneSums sums;
    float off = 0.0f;
    for (int64_t i = 0; i < k / kQ8Block; ++i) {
        uint8_t u[kQ8Block];
        scalar_codes(a[i], u);
        int32_t w[kQ8Block];
        for (int j = 0; j < kQ8Block; ++j) w[j] = int32_t(u[j]) - kZero;
        const float d = fp16_to_fp32(a[i].d);
        sums.add(w, b[i].qs, d * b[i].d);
        if constexpr (kZero == 0) off = std::fma(scalar_m(a[i]), b[i].s, off);
    }
    return kZero == 0 ? sums.total() + off : sums.total();
}

float dot_q8_0_portable(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const BlockQ8_0*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    LaneSums sums;
    for (int64_t i = 0; i < k / kQ8Block; ++i) {
        int32_t w[kQ8Block];
        for (int j = 0; j < kQ8Block; ++j) w[j] = a[i].qs[j];
        sums.add(w, b[i].qs, fp16_to_fp32(a[i].d) * b[i].d);
    }
    return sums.total();
}

// ---- AVX2 dot products ---------------------------------------------------------------------------

#if defined(MB_SIMD_X86)

// Four accumulators hide the FMA latency; loads are 8 wide for every element format.
#define MB_DOT_FLOAT_AVX2(NAME, TA, TB, LOADA, LOADB, SCALARA, SCALARB)                        \
    MB_TARGET_AVX2 float NAME(int64_t k, const void* va, const void* vb) {                   \
        const TA* a = static_cast<const TA*>(va);                                              \
        const TB* b = static_cast<const TB*>(vb);                                              \
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                         \
        __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();                         \
        int64_t i = 0;                                                                         \
        for (; i + 32 <= k; i += 32) {                                                         \
            acc0 = _mm256_fmadd_ps(LOADA(a + i), LOADB(b + i), acc0);                          \
            acc1 = _mm256_fmadd_ps(LOADA(a + i + 8), LOADB(b + i + 8), acc1);                  \
            acc2 = _mm256_fmadd_ps(LOADA(a + i + 16), LOADB(b + i + 16), acc2);                \
            acc3 = _mm256_fmadd_ps(LOADA(a + i + 24), LOADB(b + i + 24), acc3);                \
        }                                                                                      \
        for (; i + 8 <= k; i += 8) {                                                           \
            acc0 = _mm256_fmadd_ps(LOADA(a + i), LOADB(b + i), acc0);                          \
        }                                                                                      \
        float s = hsum256(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3))); \
        for (; i < k; ++i) {                                                                   \
            s += SCALARA(a[i]) * SCALARB(b[i]);                                                \
        }                                                                                      \
        return s;                                                                              \
    }

inline float as_f32(float x) { return x; }

MB_DOT_FLOAT_AVX2(dot_f32_f32_avx2, float, float, _mm256_loadu_ps, _mm256_loadu_ps, as_f32, as_f32)
MB_DOT_FLOAT_AVX2(dot_f16_f32_avx2, uint16_t, float, load_f16x8, _mm256_loadu_ps, fp16_to_fp32, as_f32)
MB_DOT_FLOAT_AVX2(dot_bf16_f32_avx2, uint16_t, float, load_bf16x8, _mm256_loadu_ps, bf16_to_fp32, as_f32)
MB_DOT_FLOAT_AVX2(dot_f16_f16_avx2, uint16_t, uint16_t, load_f16x8, load_f16x8, fp16_to_fp32, fp16_to_fp32)

#undef MB_DOT_FLOAT_AVX2

// The 4- and 5-bit types in the order of int8_dot_x86.h, the lanes through Dot (AVX2, AVX512-VNNI or
// AVX-VNNI). One accumulator chain: the multi-row kernels (vec_dot_rows.cpp) carry one per row and
// token, and every path has to add the blocks in the same order.
template <typename Dot, typename Block>
MB_TARGET_AVX2 float dot_quant_x86(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const Block*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    constexpr int kZero = kZeroPoint<Block>;
    __m256 acc = _mm256_setzero_ps();
    float off = 0.0f;
    for (int64_t i = 0; i < k / kQ8Block; ++i) {
        const Block& x = a[i];
        const __m256i q = load_codes32(b[i].qs);
        const __m256i lanes = Dot::lanes(zero_point_lanes<Dot, kZero>(q), block_codes(x), q);
        const float d = _cvtsh_ss(x.d);
        acc = scale_add(lanes, d * b[i].d, acc);
        if constexpr (kZero == 0) off = fma1(block_m(x), b[i].s, off);
    }
    return kZero == 0 ? lane_sum(acc) + off : lane_sum(acc);
}

// dot_quant_x86 for one block type, by Dot (for dot_pair's table).
template <typename Block>
struct dot_quant_x86_for {
    template <typename Dot>
    static constexpr VecDotFn with = dot_quant_x86<Dot, Block>;
};

// Signed weight codes: |a| times b with a's sign moved onto b, so the unsigned-by-signed byte product
// applies (|-128| reads as 128 unsigned, which is still exact).
template <typename Dot>
MB_TARGET_AVX2 float dot_q8_0_x86(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const BlockQ8_0*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < k / kQ8Block; ++i) {
        const __m256i x = load_codes32(a[i].qs);
        const __m256i lanes =
            Dot::lanes(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(load_codes32(b[i].qs), x));
        acc = scale_add(lanes, _cvtsh_ss(a[i].d) * b[i].d, acc);
    }
    return lane_sum(acc);
}

#endif  // MB_SIMD_X86

// ---- NEON dot products ---------------------------------------------------------------------------

#if defined(MB_SIMD_NEON)

inline float32x4_t load4_f32(const float* p) { return vld1q_f32(p); }
inline float32x4_t load4_f16(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
inline float32x4_t load4_bf16(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }

template <typename TA, typename TB, float32x4_t (*LA)(const TA*), float32x4_t (*LB)(const TB*),
          float (*SA)(const TA*, int64_t), float (*SB)(const TB*, int64_t)>
float dot_float_neon(int64_t k, const void* va, const void* vb) {
    const TA* a = static_cast<const TA*>(va);
    const TB* b = static_cast<const TB*>(vb);
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f), acc2 = vdupq_n_f32(0.0f), acc3 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        acc0 = vfmaq_f32(acc0, LA(a + i), LB(b + i));
        acc1 = vfmaq_f32(acc1, LA(a + i + 4), LB(b + i + 4));
        acc2 = vfmaq_f32(acc2, LA(a + i + 8), LB(b + i + 8));
        acc3 = vfmaq_f32(acc3, LA(a + i + 12), LB(b + i + 12));
    }
    for (; i + 4 <= k; i += 4) {
        acc0 = vfmaq_f32(acc0, LA(a + i), LB(b + i));
    }
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
    for (; i < k; ++i) {
        s += SA(a, i) * SB(b, i);
    }
    return s;
}

// sum of lo[j]*blo[j] + hi[j]*bhi[j] over 16 lanes each; every code fits a signed byte.
inline int32_t dot32_neon(int8x16_t lo, int8x16_t hi, const int8_t* b) {
    const int8x16_t blo = vld1q_s8(b), bhi = vld1q_s8(b + 16);
#if defined(__ARM_FEATURE_DOTPROD)
    return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, blo), hi, bhi));
#else
    // Two products of |code| <= 128 and |b| <= 127 stay below 2^15, so each pair fits an int16.
    const int16x8_t p0 = vmlal_s8(vmull_s8(vget_low_s8(lo), vget_low_s8(blo)), vget_high_s8(lo), vget_high_s8(blo));
    const int16x8_t p1 = vmlal_s8(vmull_s8(vget_low_s8(hi), vget_low_s8(bhi)), vget_high_s8(hi), vget_high_s8(bhi));
    return vaddvq_s32(vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)));
#endif
}

inline void nibbles_neon(const uint8_t* qs, int8x16_t& lo, int8x16_t& hi) {
    const uint8x16_t q = vld1q_u8(qs);
    lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F)));
    hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
}

// Bit j of bits16 becomes 0x10 in byte j.
inline int8x16_t fifth_bits16_neon(uint32_t bits16) {
    static const uint8_t kSelect[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bytes = vcombine_u8(vdup_n_u8(uint8_t(bits16 & 0xFF)), vdup_n_u8(uint8_t(bits16 >> 8)));
    const uint8x16_t set = vtstq_u8(bytes, vld1q_u8(kSelect));
    return vreinterpretq_s8_u8(vandq_u8(set, vdupq_n_u8(0x10)));
}

// A block's unsigned codes as two halves of 16 bytes (elements 0..15, 16..31).
inline void neon_codes(const BlockQ4_0& x, int8x16_t& lo, int8x16_t& hi) { nibbles_neon(x.qs, lo, hi); }
inline void neon_codes(const BlockQ4_1& x, int8x16_t& lo, int8x16_t& hi) { nibbles_neon(x.qs, lo, hi); }
template <typename Block5>
inline void neon_codes5(const Block5& x, int8x16_t& lo, int8x16_t& hi) {
    nibbles_neon(x.qs, lo, hi);
    const uint32_t qh = load_qh(x.qh);
    lo = vorrq_s8(lo, fifth_bits16_neon(qh & 0xFFFFu));
    hi = vorrq_s8(hi, fifth_bits16_neon(qh >> 16));
}
inline void neon_codes(const BlockQ5_0& x, int8x16_t& lo, int8x16_t& hi) { neon_codes5(x, lo, hi); }
inline void neon_codes(const BlockQ5_1& x, int8x16_t& lo, int8x16_t& hi) { neon_codes5(x, lo, hi); }

// value = d*c + offset: -8 d or -16 d for the _0 types, m for the _1 types.
inline float scalar_offset(const BlockQ4_0&, float d) { return -float(MB_QB_ZERO_Q4_0) * d; }
inline float scalar_offset(const BlockQ5_0&, float d) { return -float(MB_QB_ZERO_Q5_0) * d; }
inline float scalar_offset(const BlockQ4_1& x, float) { return fp16_to_fp32(x.m); }
inline float scalar_offset(const BlockQ5_1& x, float) { return fp16_to_fp32(x.m); }

template <typename Block>
float dot_quant_neon(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const Block*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    float sum = 0.0f;
    for (int64_t i = 0; i < k / kQ8Block; ++i) {
        int8x16_t lo, hi;
        neon_codes(a[i], lo, hi);
        const float d = fp16_to_fp32(a[i].d);
        sum += d * b[i].d * float(dot32_neon(lo, hi, b[i].qs)) + scalar_offset(a[i], d) * b[i].s;
    }
    return sum;
}

float dot_q8_0_neon(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const BlockQ8_0*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    float sum = 0.0f;
    for (int64_t i = 0; i < k / kQ8Block; ++i) {
        const int8x16_t lo = vld1q_s8(a[i].qs), hi = vld1q_s8(a[i].qs + 16);
        sum += fp16_to_fp32(a[i].d) * b[i].d * float(dot32_neon(lo, hi, b[i].qs));
    }
    return sum;
}

#endif  // MB_SIMD_NEON

struct DotPair {
    VecDotFn portable;
    VecDotFn simd;  // AVX2 (used when the CPU has it) or NEON; null where neither is built
    VecDotFn vnni;      // the AVX2 kernel with AVX512-VNNI byte dot products; null where there is none
    VecDotFn avx_vnni;  // the same with AVX-VNNI's; null where there is none
};

bool simd_usable() {
#if defined(MB_SIMD_X86)
    return cpu_has_avx2_fma_f16c();
#elif defined(MB_SIMD_NEON)
    return true;
#else
    return false;
#endif
}

DotPair dot_pair(Type a, VecType vt) {
#if defined(MB_SIMD_X86)
#define MB_PAIR(P, A, N) DotPair{P, A, nullptr, nullptr}
#define MB_QUANT(P, X86, N) DotPair{P, X86<DotAvx2>, X86<DotVnni>, X86<DotAvxVnni>}
#elif defined(MB_SIMD_NEON)
#define MB_PAIR(P, A, N) DotPair{P, N, nullptr, nullptr}
#define MB_QUANT(P, X86, N) DotPair{P, N, nullptr, nullptr}
#else
#define MB_PAIR(P, A, N) DotPair{P, nullptr, nullptr, nullptr}
#define MB_QUANT(P, X86, N) DotPair{P, nullptr, nullptr, nullptr}
#endif
    if (vt == VecType::F32) {
        switch (a) {
            case Type::F32:
                return MB_PAIR((dot_float_portable<float, float, load_f32, load_f32>), dot_f32_f32_avx2,
                               (dot_float_neon<float, float, load4_f32, load4_f32, load_f32, load_f32>));
            case Type::F16:
                return MB_PAIR((dot_float_portable<uint16_t, float, load_f16, load_f32>), dot_f16_f32_avx2,
                               (dot_float_neon<uint16_t, float, load4_f16, load4_f32, load_f16, load_f32>));
            case Type::BF16:
                return MB_PAIR((dot_float_portable<uint16_t, float, load_bf16, load_f32>), dot_bf16_f32_avx2,
                               (dot_float_neon<uint16_t, float, load4_bf16, load4_f32, load_bf16, load_f32>));
            default:
                break;
        }
    } else if (vt == VecType::F16) {
        if (a == Type::F16) {
            return MB_PAIR((dot_float_portable<uint16_t, uint16_t, load_f16, load_f16>), dot_f16_f16_avx2,
                           (dot_float_neon<uint16_t, uint16_t, load4_f16, load4_f16, load_f16, load_f16>));
        }
    } else {
        switch (a) {
            case Type::Q4_0:
                return MB_QUANT(dot_quant_portable<BlockQ4_0>, dot_quant_x86_for<BlockQ4_0>::with,
                                dot_quant_neon<BlockQ4_0>);
            case Type::Q4_1:
                return MB_QUANT(dot_quant_portable<BlockQ4_1>, dot_quant_x86_for<BlockQ4_1>::with,
                                dot_quant_neon<BlockQ4_1>);
            case Type::Q5_0:
                return MB_QUANT(dot_quant_portable<BlockQ5_0>, dot_quant_x86_for<BlockQ5_0>::with,
                                dot_quant_neon<BlockQ5_0>);
            case Type::Q5_1:
                return MB_QUANT(dot_quant_portable<BlockQ5_1>, dot_quant_x86_for<BlockQ5_1>::with,
                                dot_quant_neon<BlockQ5_1>);
            case Type::Q8_0:
                return MB_QUANT(dot_q8_0_portable, dot_q8_0_x86, dot_q8_0_neon);
            default:
                break;
        }
    }
#undef MB_PAIR
#undef MB_QUANT
    fail<UnsupportedOpError>("vec_dot_fn", "no dot product for ", type_traits(a).name,
                             " weights with this activation form");
}

}  // namespace

VecType vec_type_for(Type a, Type b) {
    if (is_k_quant(a)) {
        return VecType::Q8K;
    }
    if (type_traits(a).is_quantized) {
        return VecType::Q8;
    }
    return a == Type::F16 && b == Type::F16 ? VecType::F16 : VecType::F32;
}

size_t vec_row_bytes(VecType vt, int64_t k) {
    switch (vt) {
        case VecType::F32: return size_t(k) * sizeof(float);
        case VecType::F16: return size_t(k) * sizeof(uint16_t);
        case VecType::Q8: return size_t(k / kQ8Block) * sizeof(BlockQ8Act);
        case VecType::Q8K: return size_t(k / MB_QK_K) * sizeof(block_q8_K);
    }
    return 0;
}

void load_row_f32(Type src, const uint8_t* x, size_t stride, int64_t k, float* out) {
    if (src == Type::F32) {
        if (stride == sizeof(float)) {
            std::memcpy(out, x, size_t(k) * sizeof(float));
            return;
        }
        for (int64_t i = 0; i < k; ++i) {
            std::memcpy(&out[i], x + size_t(i) * stride, sizeof(float));
        }
        return;
    }
    if (stride == sizeof(uint16_t)) {
        dequantize_row(Type::F16, x, out, k);
        return;
    }
    for (int64_t i = 0; i < k; ++i) {
        uint16_t h;
        std::memcpy(&h, x + size_t(i) * stride, sizeof h);
        out[i] = fp16_to_fp32(h);
    }
}

void vec_prepare_row(VecType vt, Type src, const uint8_t* x, size_t stride, int64_t k, void* out) {
    switch (vt) {
        case VecType::F32:
            load_row_f32(src, x, stride, k, static_cast<float*>(out));
            return;
        case VecType::F16: {
            auto* y = static_cast<uint8_t*>(out);
            if (stride == sizeof(uint16_t)) {
                std::memcpy(y, x, size_t(k) * sizeof(uint16_t));
                return;
            }
            for (int64_t i = 0; i < k; ++i) {
                std::memcpy(y + 2 * i, x + size_t(i) * stride, sizeof(uint16_t));
            }
            return;
        }
        case VecType::Q8: {
            auto* y = static_cast<BlockQ8Act*>(out);
            for (int64_t ib = 0; ib < k / kQ8Block; ++ib) {
                const uint8_t* xb = x + size_t(ib * kQ8Block) * stride;
                if (src == Type::F32 && stride == sizeof(float)) {
                    quantize_q8_block(reinterpret_cast<const float*>(xb), &y[ib]);
                } else {
                    float tmp[kQ8Block];
                    load_row_f32(src, xb, stride, kQ8Block, tmp);
                    quantize_q8_block(tmp, &y[ib]);
                }
            }
            return;
        }
        case VecType::Q8K: {
            auto* y = static_cast<block_q8_K*>(out);
            for (int64_t ib = 0; ib < k / MB_QK_K; ++ib) {
                float tmp[MB_QK_K];
                load_row_f32(src, x + size_t(ib * MB_QK_K) * stride, stride, MB_QK_K, tmp);
                quantize_row_q8_K_act(tmp, &y[ib], MB_QK_K);
            }
            return;
        }
    }
}

VecDotFn vec_dot_fn(Type a, VecType vt) {
    if (vt == VecType::Q8K) {
        return vec_dot_k_fn(a);
    }
    if (VecDotFn f = vt == VecType::Q8 ? vec_dot_table_fn(a) : nullptr) {
        return f;
    }
    const DotPair p = dot_pair(a, vt);
#if defined(MB_SIMD_X86)
    if (p.vnni != nullptr && simd_usable()) {
        return by_byte_dot(p.simd, p.avx_vnni, p.vnni);
    }
#endif
    if (p.simd != nullptr && simd_usable()) {
        return p.simd;
    }
    return p.portable;
}

}  // namespace mb
