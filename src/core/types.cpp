// ggml's reference quantizers compute x*id and then add the rounding offset as two separately
// rounded f32 operations; a fused multiply-add changes a few codes near the rounding points, so
// contraction is switched off for this file (before any include, so every function in it agrees).
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "core/types.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "core/fp16.h"
#include "core/isa.h"
#include "core/quants_grid.h"
#include "core/quants_iq.h"
#include "core/quants_k.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(MB_NO_SIMD)
#define MB_TYPES_X86_SIMD 1
#include <immintrin.h>
#endif

namespace mb {

namespace {

constexpr TypeTraits kTraitsF32{"f32", 1, 4, false, false};
constexpr TypeTraits kTraitsF16{"f16", 1, 2, false, false};
constexpr TypeTraits kTraitsBF16{"bf16", 1, 2, false, false};
constexpr TypeTraits kTraitsI32{"i32", 1, 4, false, false};
constexpr TypeTraits kTraitsQ4_0{"q4_0", kQK4_0, sizeof(BlockQ4_0), true, false};
constexpr TypeTraits kTraitsQ4_1{"q4_1", kQK4_1, sizeof(BlockQ4_1), true, false};
constexpr TypeTraits kTraitsQ5_0{"q5_0", kQK5_0, sizeof(BlockQ5_0), true, false};
constexpr TypeTraits kTraitsQ5_1{"q5_1", kQK5_1, sizeof(BlockQ5_1), true, false};
constexpr TypeTraits kTraitsQ8_0{"q8_0", kQK8_0, sizeof(BlockQ8_0), true, false};
constexpr TypeTraits kTraitsQ2_K{"q2_K", kQK_K, sizeof(block_q2_K), true, false};
constexpr TypeTraits kTraitsQ3_K{"q3_K", kQK_K, sizeof(block_q3_K), true, false};
constexpr TypeTraits kTraitsQ4_K{"q4_K", kQK_K, sizeof(block_q4_K), true, false};
constexpr TypeTraits kTraitsQ5_K{"q5_K", kQK_K, sizeof(block_q5_K), true, false};
constexpr TypeTraits kTraitsQ6_K{"q6_K", kQK_K, sizeof(block_q6_K), true, false};
constexpr TypeTraits kTraitsQ8_K{"q8_K", kQK_K, sizeof(block_q8_K), true, false};
constexpr TypeTraits kTraitsIQ4_NL{"iq4_nl", MB_QK, sizeof(block_iq4_nl), true, false};
constexpr TypeTraits kTraitsIQ4_XS{"iq4_xs", kQK_K, sizeof(block_iq4_xs), true, false};
constexpr TypeTraits kTraitsMXFP4{"mxfp4", MB_QK, sizeof(block_mxfp4), true, false};
constexpr TypeTraits kTraitsIQ2_XXS{"iq2_xxs", kQK_K, sizeof(block_iq2_xxs), true, true};
constexpr TypeTraits kTraitsIQ2_XS{"iq2_xs", kQK_K, sizeof(block_iq2_xs), true, true};
constexpr TypeTraits kTraitsIQ2_S{"iq2_s", kQK_K, sizeof(block_iq2_s), true, true};
constexpr TypeTraits kTraitsIQ3_XXS{"iq3_xxs", kQK_K, sizeof(block_iq3_xxs), true, true};
constexpr TypeTraits kTraitsIQ3_S{"iq3_s", kQK_K, sizeof(block_iq3_s), true, true};
constexpr TypeTraits kTraitsIQ1_S{"iq1_s", kQK_K, sizeof(block_iq1_s), true, true};
constexpr TypeTraits kTraitsIQ1_M{"iq1_m", kQK_K, sizeof(block_iq1_m), true, true};

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
        case Type::Q2_K: return &kTraitsQ2_K;
        case Type::Q3_K: return &kTraitsQ3_K;
        case Type::Q4_K: return &kTraitsQ4_K;
        case Type::Q5_K: return &kTraitsQ5_K;
        case Type::Q6_K: return &kTraitsQ6_K;
        case Type::Q8_K: return &kTraitsQ8_K;
        case Type::IQ4_NL: return &kTraitsIQ4_NL;
        case Type::IQ4_XS: return &kTraitsIQ4_XS;
        case Type::MXFP4: return &kTraitsMXFP4;
        case Type::IQ2_XXS: return &kTraitsIQ2_XXS;
        case Type::IQ2_XS: return &kTraitsIQ2_XS;
        case Type::IQ2_S: return &kTraitsIQ2_S;
        case Type::IQ3_XXS: return &kTraitsIQ3_XXS;
        case Type::IQ3_S: return &kTraitsIQ3_S;
        case Type::IQ1_S: return &kTraitsIQ1_S;
        case Type::IQ1_M: return &kTraitsIQ1_M;
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

// The block quantizers are shaders/quant_blocks.h's (the Metal kernels run the same ones); here the
// scales they return are stored as half bits.
inline uint16_t scale_bits(const mb_qb_scales& s) {
    return s.nan ? uint16_t(MB_QB_NAN_SCALE_BITS) : fp32_to_fp16(s.d);
}

inline void quantize_block(const float* x, BlockQ4_0& y) {
    y.d = scale_bits(mb_qb_quantize_q4_0(x, y.qs));
}

inline void quantize_block(const float* x, BlockQ4_1& y) {
    const mb_qb_scales s = mb_qb_quantize_q4_1(x, y.qs);
    y.d = scale_bits(s);
    y.m = fp32_to_fp16(s.m);
}

inline void quantize_block(const float* x, BlockQ5_0& y) {
    y.d = scale_bits(mb_qb_quantize_q5_0(x, y.qs, y.qh));
}

inline void quantize_block(const float* x, BlockQ5_1& y) {
    const mb_qb_scales s = mb_qb_quantize_q5_1(x, y.qs, y.qh);
    y.d = scale_bits(s);
    y.m = fp32_to_fp16(s.m);
}

inline void quantize_block(const float* x, BlockQ8_0& y) {
    y.d = scale_bits(mb_qb_quantize_q8_0(x, y.qs));
}

template <class Block>
void quantize_blocks(const float* x, void* dst, int64_t nb) {
    auto* y = static_cast<Block*>(dst);
    for (int64_t i = 0; i < nb; ++i) {
        quantize_block(x + i * MB_QK, y[i]);
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
            y[j] = float(int(qs[j] & 0x0F) - MB_QB_ZERO_Q4_0) * d;
        }
        for (int64_t j = 0; j < half; ++j) {
            y[j + half] = float(int(qs[j] >> 4) - MB_QB_ZERO_Q4_0) * d;
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
            y[j] = float(int(q[j]) - MB_QB_ZERO_Q5_0) * d;
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

// The hardware has them and the process-wide cap (core/isa.h, the CPU device's "max_isa") allows
// AVX2: read at every call, so the cap applies from the next conversion on.
bool use_avx2() {
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    return has && cpu_isa_cap() >= CpuIsa::Avx2;
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
    const __m128i zero = _mm_set1_epi8(MB_QB_ZERO_Q4_0);
    for (int64_t i = 0; i < nb; ++i, y += kQK4_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d));
        __m128i lo, hi;
        unpack_nibbles(x[i].qs, lo, hi);
        store16_signed(y, _mm_sub_epi8(lo, zero), d);
        store16_signed(y + 16, _mm_sub_epi8(hi, zero), d);
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
    const __m128i zero = _mm_set1_epi8(MB_QB_ZERO_Q5_0);
    for (int64_t i = 0; i < nb; ++i, y += kQK5_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(x[i].d));
        const uint32_t qh = load_qh(x[i].qh);
        __m128i lo, hi;
        unpack_nibbles(x[i].qs, lo, hi);
        store16_signed(y, _mm_sub_epi8(_mm_or_si128(lo, fifth_bits(qh & 0xFFFFu)), zero), d);
        store16_signed(y + 16, _mm_sub_epi8(_mm_or_si128(hi, fifth_bits(qh >> 16)), zero), d);
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
        if (use_avx2()) {                   \
            name##_avx2(__VA_ARGS__);       \
        } else {                            \
            name##_portable(__VA_ARGS__);   \
        }                                   \
    } while (0)

#else

#define MB_DISPATCH(name, ...) name##_portable(__VA_ARGS__)

bool use_avx2() {
    return false;
}

#endif

}  // namespace

CpuIsa conversions_isa() {
    return use_avx2() ? CpuIsa::Avx2 : CpuIsa::Portable;
}

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
                                   " (known: 0 f32, 1 f16, 2 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 8 q8_0, "
                                   "10 q2_K, 11 q3_K, 12 q4_K, "
                                   "13 q5_K, 14 q6_K, 15 q8_K, 16 iq2_xxs, 17 iq2_xs, 18 iq3_xxs, 19 iq1_s, 20 iq4_nl, "
                                   "21 iq3_s, 22 iq2_s, 23 iq4_xs, 26 i32, 29 iq1_m, 30 bf16, 39 mxfp4)");
    }
    return static_cast<Type>(id);
}

const std::vector<Type>& all_types() {
    static const std::vector<Type> types{Type::F32,  Type::F16,  Type::BF16, Type::I32,  Type::Q4_0,
                                         Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q8_0, Type::Q2_K,
                                         Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K, Type::Q8_K,
                                         Type::IQ4_NL, Type::IQ4_XS, Type::MXFP4, Type::IQ2_XXS,
                                         Type::IQ2_XS, Type::IQ2_S, Type::IQ3_XXS, Type::IQ3_S,
                                         Type::IQ1_S, Type::IQ1_M};
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
            quantize_blocks<BlockQ4_0>(src, dst, nb);
            return;
        case Type::Q4_1:
            quantize_blocks<BlockQ4_1>(src, dst, nb);
            return;
        case Type::Q5_0:
            quantize_blocks<BlockQ5_0>(src, dst, nb);
            return;
        case Type::Q5_1:
            quantize_blocks<BlockQ5_1>(src, dst, nb);
            return;
        case Type::Q8_0:
            quantize_blocks<BlockQ8_0>(src, dst, nb);
            return;
        case Type::Q2_K:
            quantize_q2_K(src, static_cast<block_q2_K*>(dst), nb);
            return;
        case Type::Q3_K:
            quantize_q3_K(src, static_cast<block_q3_K*>(dst), nb);
            return;
        case Type::Q4_K:
            quantize_q4_K(src, static_cast<block_q4_K*>(dst), nb);
            return;
        case Type::Q5_K:
            quantize_q5_K(src, static_cast<block_q5_K*>(dst), nb);
            return;
        case Type::Q6_K:
            quantize_q6_K(src, static_cast<block_q6_K*>(dst), nb);
            return;
        case Type::Q8_K:
            quantize_q8_K(src, static_cast<block_q8_K*>(dst), nb);
            return;
        case Type::IQ4_NL:
            quantize_iq4_nl(src, static_cast<block_iq4_nl*>(dst), nb);
            return;
        case Type::IQ4_XS:
            quantize_iq4_xs(src, static_cast<block_iq4_xs*>(dst), nb);
            return;
        case Type::MXFP4:
            quantize_mxfp4(src, static_cast<block_mxfp4*>(dst), nb);
            return;
        case Type::IQ2_XXS:
        case Type::IQ2_XS:
        case Type::IQ2_S:
        case Type::IQ3_XXS:
        case Type::IQ3_S:
        case Type::IQ1_S:
        case Type::IQ1_M:
            fail<InvalidArgumentError>("quantize_row", "cannot quantize to ", type_traits(t).name, ": ",
                                   grid_type_quantize_refusal(t));
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
        case Type::Q2_K:
            dequantize_q2_K(static_cast<const block_q2_K*>(src), dst, nb);
            return;
        case Type::Q3_K:
            dequantize_q3_K(static_cast<const block_q3_K*>(src), dst, nb);
            return;
        case Type::Q4_K:
            dequantize_q4_K(static_cast<const block_q4_K*>(src), dst, nb);
            return;
        case Type::Q5_K:
            dequantize_q5_K(static_cast<const block_q5_K*>(src), dst, nb);
            return;
        case Type::Q6_K:
            dequantize_q6_K(static_cast<const block_q6_K*>(src), dst, nb);
            return;
        case Type::Q8_K:
            dequantize_q8_K(static_cast<const block_q8_K*>(src), dst, nb);
            return;
        case Type::IQ4_NL:
            dequantize_iq4_nl(static_cast<const block_iq4_nl*>(src), dst, nb);
            return;
        case Type::IQ4_XS:
            dequantize_iq4_xs(static_cast<const block_iq4_xs*>(src), dst, nb);
            return;
        case Type::MXFP4:
            dequantize_mxfp4(static_cast<const block_mxfp4*>(src), dst, nb);
            return;
        case Type::IQ2_XXS:
        case Type::IQ2_XS:
        case Type::IQ2_S:
        case Type::IQ3_XXS:
        case Type::IQ3_S:
        case Type::IQ1_S:
        case Type::IQ1_M:
            dequantize_grid(t, src, dst, nb);
            return;
    }
}

}  // namespace mb
