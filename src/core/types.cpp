// ggml's reference quantizers compute x*id and then add the rounding offset as two separately
// rounded f32 operations; a fused multiply-add changes a few codes near the rounding points, so
// contraction is switched off for this file (before any include, so every function in it agrees).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "core/types.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "core/fp16.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(MB_NO_SIMD)
#define MB_TYPES_X86_SIMD 1
#include <immintrin.h>
#endif

namespace mb {

namespace {

constexpr TypeTraits kTraitsF32{"f32", 1, 4, false};
constexpr TypeTraits kTraitsF16{"f16", 1, 2, false};
constexpr TypeTraits kTraitsBF16{"bf16", 1, 2, false};
constexpr TypeTraits kTraitsI32{"i32", 1, 4, false};
constexpr TypeTraits kTraitsQ4_0{"q4_0", kQK4_0, sizeof(BlockQ4_0), true};
constexpr TypeTraits kTraitsQ4_1{"q4_1", kQK4_1, sizeof(BlockQ4_1), true};
constexpr TypeTraits kTraitsQ5_0{"q5_0", kQK5_0, sizeof(BlockQ5_0), true};
constexpr TypeTraits kTraitsQ5_1{"q5_1", kQK5_1, sizeof(BlockQ5_1), true};
constexpr TypeTraits kTraitsQ8_0{"q8_0", kQK8_0, sizeof(BlockQ8_0), true};

const TypeTraits* find_traits(int32_t id) {
    switch (static_cast<Type>(id)) {
        case Type::F32: return &kTraitsF32;
        case Type::F16: return &kTraitsF16;
        case Type::BF16: return &kTraitsBF16;
        case Type::I32: return &kTraitsI32;
        case Type::Q4_0: return &kTraitsQ4_0;
        case Type::Q4_1: return &kTraitsQ4_1;
        case Type::Q5_0: return &kTraitsQ5_0;
        case Type::Q5_1: return &kTraitsQ5_1;
        case Type::Q8_0: return &kTraitsQ8_0;
    }
    return nullptr;
}

// Number of blocks in n elements of t; n must be a non-negative multiple of the block size.
int64_t block_count(const char* who, Type t, int64_t n) {
    const TypeTraits& tr = type_traits(t);
    if (n < 0 || n % tr.block_size != 0) {
        fail<InvalidArgumentError>(who, "element count ", n, " is not a non-negative multiple of the ", tr.name,
                                   " block size ", tr.block_size);
    }
    return n / tr.block_size;
}

// ggml truncates x*id + offset to an integer and clips it to the top code. For finite input that
// value lies in [0, top + 1); the clamps only give NaN and overflow (infinite input) a defined code.
inline int truncated_code(float v, int top) {
    if (!(v >= 0.0f)) {
        return 0;
    }
    if (v >= float(top)) {
        return top;
    }
    return int(v);
}

// roundf (halves away from zero), inlined so the loop needs no libm call; |v| <= 127 here.
inline int rounded_code(float v) {
    if (!(v > -128.0f && v < 128.0f)) {
        return v >= 128.0f ? 127 : (v <= -128.0f ? -127 : 0);
    }
    int q = int(v);
    const float frac = v - float(q);
    if (frac >= 0.5f) {
        ++q;
    } else if (frac <= -0.5f) {
        --q;
    }
    return q < -127 ? -127 : (q > 127 ? 127 : q);
}

// The value with the largest magnitude, the first one on ties; +0 when all are zero.
inline float signed_absmax(const float* x, int64_t n) {
    float amax = 0.0f;
    float vmax = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
        const float a = std::fabs(x[j]);
        if (amax < a) {
            amax = a;
            vmax = x[j];
        }
    }
    return vmax;
}

inline void min_max(const float* x, int64_t n, float& vmin, float& vmax) {
    vmin = FLT_MAX;
    vmax = -FLT_MAX;
    for (int64_t j = 0; j < n; ++j) {
        if (x[j] < vmin) {
            vmin = x[j];
        }
        if (x[j] > vmax) {
            vmax = x[j];
        }
    }
}

// A NaN among a block's values: ggml's reference converts NaN * id to an integer code, which is
// undefined in C (x86 gives code 0, so the NaN silently became 0 or the block's offset value). Here a
// block holding a NaN stores the f16 quiet NaN 0x7E00 as its scale, so all of its 32 values read back
// as NaN and the NaN reaches every result computed from the block (as an infinite input already
// does through an infinite scale). Blocks of finite values are unaffected: their bytes are ggml's.
constexpr uint16_t kBlockNaNScale = 0x7E00u;

inline bool has_nan(const float* x, int64_t n) {
    bool nan = false;
    for (int64_t j = 0; j < n; ++j) {
        nan |= x[j] != x[j];
    }
    return nan;
}

inline float inverse_or_zero(float d) {
    return d != 0.0f ? 1.0f / d : 0.0f;
}

void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
    constexpr int64_t half = kQK4_0 / 2;
    for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
        const float d = signed_absmax(x, kQK4_0) / -8.0f;
        const float id = inverse_or_zero(d);
        y[i].d = fp32_to_fp16(d);
        for (int64_t j = 0; j < half; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[j + half] * id;
            const int q0 = truncated_code(x0 + 8.5f, 15);
            const int q1 = truncated_code(x1 + 8.5f, 15);
            y[i].qs[j] = uint8_t(q0 | (q1 << 4));
        }
        if (has_nan(x, kQK4_0)) {
            y[i].d = kBlockNaNScale;
        }
    }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
    constexpr int64_t half = kQK4_1 / 2;
    for (int64_t i = 0; i < nb; ++i, x += kQK4_1) {
        float vmin, vmax;
        min_max(x, kQK4_1, vmin, vmax);
        const float d = (vmax - vmin) / 15.0f;
        const float id = inverse_or_zero(d);
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(vmin);
        for (int64_t j = 0; j < half; ++j) {
            const float x0 = (x[j] - vmin) * id;
            const float x1 = (x[j + half] - vmin) * id;
            const int q0 = truncated_code(x0 + 0.5f, 15);
            const int q1 = truncated_code(x1 + 0.5f, 15);
            y[i].qs[j] = uint8_t(q0 | (q1 << 4));
        }
        if (has_nan(x, kQK4_1)) {
            y[i].d = kBlockNaNScale;
        }
    }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
    constexpr int64_t half = kQK5_0 / 2;
    for (int64_t i = 0; i < nb; ++i, x += kQK5_0) {
        const float d = signed_absmax(x, kQK5_0) / -16.0f;
        const float id = inverse_or_zero(d);
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int64_t j = 0; j < half; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[j + half] * id;
            const uint32_t q0 = uint32_t(truncated_code(x0 + 16.5f, 31));
            const uint32_t q1 = uint32_t(truncated_code(x1 + 16.5f, 31));
            y[i].qs[j] = uint8_t((q0 & 0x0Fu) | ((q1 & 0x0Fu) << 4));
            qh |= ((q0 >> 4) & 1u) << j;
            qh |= ((q1 >> 4) & 1u) << (j + half);
        }
        for (int k = 0; k < 4; ++k) {
            y[i].qh[k] = uint8_t(qh >> (8 * k));
        }
        if (has_nan(x, kQK5_0)) {
            y[i].d = kBlockNaNScale;
        }
    }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
    constexpr int64_t half = kQK5_1 / 2;
    for (int64_t i = 0; i < nb; ++i, x += kQK5_1) {
        float vmin, vmax;
        min_max(x, kQK5_1, vmin, vmax);
        const float d = (vmax - vmin) / 31.0f;
        const float id = inverse_or_zero(d);
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(vmin);
        uint32_t qh = 0;
        for (int64_t j = 0; j < half; ++j) {
            const float x0 = (x[j] - vmin) * id;
            const float x1 = (x[j + half] - vmin) * id;
            const uint32_t q0 = uint32_t(truncated_code(x0 + 0.5f, 31));
            const uint32_t q1 = uint32_t(truncated_code(x1 + 0.5f, 31));
            y[i].qs[j] = uint8_t((q0 & 0x0Fu) | ((q1 & 0x0Fu) << 4));
            qh |= ((q0 >> 4) & 1u) << j;
            qh |= ((q1 >> 4) & 1u) << (j + half);
        }
        for (int k = 0; k < 4; ++k) {
            y[i].qh[k] = uint8_t(qh >> (8 * k));
        }
        if (has_nan(x, kQK5_1)) {
            y[i].d = kBlockNaNScale;
        }
    }
}

void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
        // ggml's MAX(a, b) is a > b ? a : b: a NaN makes amax NaN until the next larger value.
        float amax = 0.0f;
        bool nan = false;
        for (int64_t j = 0; j < kQK8_0; ++j) {
            const float a = std::fabs(x[j]);
            amax = amax > a ? amax : a;
            nan |= x[j] != x[j];
        }
        const float d = amax / 127.0f;
        const float id = inverse_or_zero(d);
        y[i].d = nan ? kBlockNaNScale : fp32_to_fp16(d);
        for (int64_t j = 0; j < kQK8_0; ++j) {
            const float x0 = x[j] * id;
            y[i].qs[j] = int8_t(rounded_code(x0));
        }
    }
}

void f32_to_i32(const float* x, int32_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        if (!(v == v)) {
            y[i] = 0;
        } else if (v >= 2147483648.0f) {
            y[i] = INT32_MAX;
        } else if (v <= -2147483648.0f) {
            y[i] = INT32_MIN;
        } else {
            y[i] = int32_t(v);
        }
    }
}

// Portable dequantizers, written so compilers vectorise the inner loops: each block's codes are
// copied to locals first, since stores through y could otherwise alias the uint8_t inputs.

void dequantize_q4_0_portable(const BlockQ4_0* x, float* y, int64_t nb) {
    constexpr int64_t half = kQK4_0 / 2;
    for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
        const float d = fp16_to_fp32(x[i].d);
        uint8_t qs[half];
        std::memcpy(qs, x[i].qs, sizeof qs);
        for (int64_t j = 0; j < half; ++j) {
            y[j] = float(int(qs[j] & 0x0F) - 8) * d;
        }
        for (int64_t j = 0; j < half; ++j) {
            y[j + half] = float(int(qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_q4_1_portable(const BlockQ4_1* x, float* y, int64_t nb) {
    constexpr int64_t half = kQK4_1 / 2;
    for (int64_t i = 0; i < nb; ++i, y += kQK4_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        uint8_t qs[half];
        std::memcpy(qs, x[i].qs, sizeof qs);
        for (int64_t j = 0; j < half; ++j) {
            y[j] = float(qs[j] & 0x0F) * d + m;
        }
        for (int64_t j = 0; j < half; ++j) {
            y[j + half] = float(qs[j] >> 4) * d + m;
        }
    }
}

// The 32 codes of a 5-bit block, in element order. Bits are picked with a table of masks rather
// than shifts by j, which would need per-lane shift counts that SSE2 lacks.
inline void unpack_q5(const uint8_t* qs_in, const uint8_t* qh_in, uint8_t* q) {
    constexpr int64_t half = 16;
    static constexpr uint8_t kBit[8] = {1, 2, 4, 8, 16, 32, 64, 128};
    uint8_t qs[half];
    uint8_t qh[4];
    std::memcpy(qs, qs_in, sizeof qs);
    std::memcpy(qh, qh_in, sizeof qh);
    for (int64_t j = 0; j < half; ++j) {
        const uint8_t lo_bit = (qh[j / 8] & kBit[j % 8]) != 0 ? 0x10 : 0;
        const uint8_t hi_bit = (qh[2 + j / 8] & kBit[j % 8]) != 0 ? 0x10 : 0;
        q[j] = uint8_t((qs[j] & 0x0Fu) | lo_bit);
        q[j + half] = uint8_t((qs[j] >> 4) | hi_bit);
    }
}

void dequantize_q5_0_portable(const BlockQ5_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
        const float d = fp16_to_fp32(x[i].d);
        uint8_t q[kQK5_0];
        unpack_q5(x[i].qs, x[i].qh, q);
        for (int64_t j = 0; j < kQK5_0; ++j) {
            y[j] = float(int(q[j]) - 16) * d;
        }
    }
}

void dequantize_q5_1_portable(const BlockQ5_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK5_1) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        uint8_t q[kQK5_1];
        unpack_q5(x[i].qs, x[i].qh, q);
        for (int64_t j = 0; j < kQK5_1; ++j) {
            y[j] = float(q[j]) * d + m;
        }
    }
}

void dequantize_q8_0_portable(const BlockQ8_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK8_0) {
        const float d = fp16_to_fp32(x[i].d);
        int8_t qs[kQK8_0];
        std::memcpy(qs, x[i].qs, sizeof qs);
        for (int64_t j = 0; j < kQK8_0; ++j) {
            y[j] = float(qs[j]) * d;
        }
    }
}

void f16_to_f32_portable(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = fp16_to_fp32(x[i]);
    }
}

void f32_to_f16_portable(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = fp32_to_fp16(x[i]);
    }
}

void bf16_to_f32_portable(const uint16_t* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = bf16_to_fp32(x[i]);
    }
}

#if defined(MB_TYPES_X86_SIMD)

// AVX2 + F16C versions, chosen at run time because the package is built for baseline x86-64.
// Each computes exactly what the portable version computes (products are not fused).
#define MB_AVX2 __attribute__((target("avx2,f16c")))

bool cpu_has_avx2_f16c() {
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    return has;
}

MB_AVX2 inline void store_scaled(float* y, __m256i q, __m256 d) {
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
}

MB_AVX2 inline void store_scaled_offset(float* y, __m256i q, __m256 d, __m256 m) {
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(q), d), m));
}

// 16 signed byte codes -> 16 floats q*d.
MB_AVX2 inline void store16_signed(float* y, __m128i q, __m256 d) {
    store_scaled(y, _mm256_cvtepi8_epi32(q), d);
    store_scaled(y + 8, _mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)), d);
}

// 16 unsigned byte codes -> 16 floats q*d + m.
MB_AVX2 inline void store16_offset(float* y, __m128i q, __m256 d, __m256 m) {
    store_scaled_offset(y, _mm256_cvtepu8_epi32(q), d, m);
    store_scaled_offset(y + 8, _mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)), d, m);
}

// The codes of a 4-bit block as bytes: lo holds elements 0..15, hi elements 16..31.
MB_AVX2 inline void unpack_nibbles(const uint8_t* qs, __m128i& lo, __m128i& hi) {
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    lo = _mm_and_si128(q, mask);
    hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
}

// Bit k of bits16 becomes 0x10 in byte k (the fifth bit of a 5-bit code), 0 otherwise.
MB_AVX2 inline __m128i fifth_bits(uint32_t bits16) {
    const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m128i select = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    const __m128i bytes = _mm_shuffle_epi8(_mm_cvtsi32_si128(int(bits16)), spread);
    const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(bytes, select), select);
    return _mm_and_si128(set, _mm_set1_epi8(0x10));
}

MB_AVX2 void dequantize_q4_0_avx2(const BlockQ4_0* x, float* y, int64_t nb) {
    const __m128i eight = _mm_set1_epi8(8);
    for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d));
        __m128i lo, hi;
        unpack_nibbles(x[i].qs, lo, hi);
        store16_signed(y, _mm_sub_epi8(lo, eight), d);
        store16_signed(y + 16, _mm_sub_epi8(hi, eight), d);
    }
}

MB_AVX2 void dequantize_q4_1_avx2(const BlockQ4_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK4_1) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d));
        const __m256 m = _mm256_set1_ps(_cvtsh_ss(x[i].m));
        __m128i lo, hi;
        unpack_nibbles(x[i].qs, lo, hi);
        store16_offset(y, lo, d, m);
        store16_offset(y + 16, hi, d, m);
    }
}

MB_AVX2 void dequantize_q5_0_avx2(const BlockQ5_0* x, float* y, int64_t nb) {
    const __m128i sixteen = _mm_set1_epi8(16);
    for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d));
        const uint32_t qh = load_qh(x[i].qh);
        __m128i lo, hi;
        unpack_nibbles(x[i].qs, lo, hi);
        store16_signed(y, _mm_sub_epi8(_mm_or_si128(lo, fifth_bits(qh & 0xFFFFu)), sixteen), d);
        store16_signed(y + 16, _mm_sub_epi8(_mm_or_si128(hi, fifth_bits(qh >> 16)), sixteen), d);
    }
}

MB_AVX2 void dequantize_q5_1_avx2(const BlockQ5_1* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK5_1) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d));
        const __m256 m = _mm256_set1_ps(_cvtsh_ss(x[i].m));
        const uint32_t qh = load_qh(x[i].qh);
        __m128i lo, hi;
        unpack_nibbles(x[i].qs, lo, hi);
        store16_offset(y, _mm_or_si128(lo, fifth_bits(qh & 0xFFFFu)), d, m);
        store16_offset(y + 16, _mm_or_si128(hi, fifth_bits(qh >> 16)), d, m);
    }
}

MB_AVX2 void dequantize_q8_0_avx2(const BlockQ8_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += kQK8_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d));
        const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs));
        const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs + 16));
        store16_signed(y, q0, d);
        store16_signed(y + 16, q1, d);
    }
}

MB_AVX2 void f16_to_f32_avx2(const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; ++i) {
        y[i] = _cvtsh_ss(x[i]);
    }
}

MB_AVX2 void f32_to_f16_avx2(const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
    }
    for (; i < n; ++i) {
        y[i] = fp32_to_fp16(x[i]);
    }
}

MB_AVX2 void bf16_to_f32_avx2(const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
        const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(w));
    }
    for (; i < n; ++i) {
        y[i] = bf16_to_fp32(x[i]);
    }
}

#undef MB_AVX2

#define MB_DISPATCH(name, ...)              \
    do {                                    \
        if (cpu_has_avx2_f16c()) {          \
            name##_avx2(__VA_ARGS__);       \
        } else {                            \
            name##_portable(__VA_ARGS__);   \
        }                                   \
    } while (0)

#else

#define MB_DISPATCH(name, ...) name##_portable(__VA_ARGS__)

#endif

}  // namespace

const TypeTraits& type_traits(Type t) {
    const TypeTraits* tr = find_traits(static_cast<int32_t>(t));
    if (tr == nullptr) {
        fail<InvalidArgumentError>("type_traits", "unknown type id ", static_cast<int32_t>(t));
    }
    return *tr;
}

Type type_from_id(int32_t id) {
    if (find_traits(id) == nullptr) {
        fail<InvalidArgumentError>("type_from_id", "unknown type id ", id,
                                   " (known: 0 f32, 1 f16, 2 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 8 q8_0, 26 i32, 30 bf16)");
    }
    return static_cast<Type>(id);
}

const std::vector<Type>& all_types() {
    static const std::vector<Type> types{Type::F32,  Type::F16,  Type::BF16, Type::I32, Type::Q4_0,
                                         Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q8_0};
    return types;
}

size_t row_size(Type t, int64_t ne0) {
    return size_t(block_count("row_size", t, ne0)) * type_traits(t).type_size;
}

void quantize_row(Type t, const float* src, void* dst, int64_t n) {
    const int64_t nb = block_count("quantize_row", t, n);
    if (n == 0) {
        return;  // an empty row may come with null pointers
    }
    switch (t) {
        case Type::F32:
            std::memmove(dst, src, size_t(n) * sizeof(float));
            return;
        case Type::F16:
            MB_DISPATCH(f32_to_f16, src, static_cast<uint16_t*>(dst), n);
            return;
        case Type::BF16: {
            auto* y = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) {
                y[i] = fp32_to_bf16(src[i]);
            }
            return;
        }
        case Type::I32:
            f32_to_i32(src, static_cast<int32_t*>(dst), n);
            return;
        case Type::Q4_0:
            quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
            return;
        case Type::Q4_1:
            quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
            return;
        case Type::Q5_0:
            quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
            return;
        case Type::Q5_1:
            quantize_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
            return;
        case Type::Q8_0:
            quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
            return;
    }
}

void dequantize_row(Type t, const void* src, float* dst, int64_t n) {
    const int64_t nb = block_count("dequantize_row", t, n);
    if (n == 0) {
        return;  // an empty row may come with null pointers
    }
    switch (t) {
        case Type::F32:
            std::memmove(dst, src, size_t(n) * sizeof(float));
            return;
        case Type::F16:
            MB_DISPATCH(f16_to_f32, static_cast<const uint16_t*>(src), dst, n);
            return;
        case Type::BF16:
            MB_DISPATCH(bf16_to_f32, static_cast<const uint16_t*>(src), dst, n);
            return;
        case Type::I32: {
            const auto* x = static_cast<const int32_t*>(src);
            for (int64_t i = 0; i < n; ++i) {
                dst[i] = float(x[i]);
            }
            return;
        }
        case Type::Q4_0:
            MB_DISPATCH(dequantize_q4_0, static_cast<const BlockQ4_0*>(src), dst, nb);
            return;
        case Type::Q4_1:
            MB_DISPATCH(dequantize_q4_1, static_cast<const BlockQ4_1*>(src), dst, nb);
            return;
        case Type::Q5_0:
            MB_DISPATCH(dequantize_q5_0, static_cast<const BlockQ5_0*>(src), dst, nb);
            return;
        case Type::Q5_1:
            MB_DISPATCH(dequantize_q5_1, static_cast<const BlockQ5_1*>(src), dst, nb);
            return;
        case Type::Q8_0:
            MB_DISPATCH(dequantize_q8_0, static_cast<const BlockQ8_0*>(src), dst, nb);
            return;
    }
}

}  // namespace mb
