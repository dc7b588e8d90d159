// Vector helpers shared by the element-wise, row and attention kernels: a polynomial exp (AVX2 and a
// portable twin that compilers auto-vectorise), the functions built on it, row reductions, and the
// bookkeeping of walking the rows of a strided tensor.
//
// The module is compiled for the baseline ISA, so AVX2 code lives in functions marked MB_AVX2 and is
// chosen at run time by vec_use_avx2(). Building with -DMB_NO_SIMD leaves only the portable paths
// (the native tests build both ways so both stay correct).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/tensor.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/simd.h"

// The element-wise families' names for simd.h's x86 build switch and AVX2 target.
#if defined(MB_SIMD_X86)
#define MB_VEC_AVX2 1
#define MB_AVX2 MB_TARGET_AVX2
#endif

namespace mb::vec {

inline bool use_avx2() {
#if defined(MB_VEC_AVX2)
    return cpu_has_avx2_fma_f16c();
#else
    return false;
#endif
}

// exp(x) = 2^n * exp(r) with n = round(x / ln2) and |r| <= ln2/2. ln2 is split (Cody-Waite) so that
// n*kLn2Hi is exact for every n reached; a degree-7 Taylor polynomial is within 1e-8 relative on that
// interval. 2^n is applied as two factors 2^(n/2) so that results down in the subnormals and up to
// overflow come out right without special cases: x is clamped to [-104, 89], where exp is 0 resp.
// infinite in f32 already.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kExpMin = -104.0f;
constexpr float kExpMax = 89.0f;
constexpr float kExpC2 = 1.0f / 2.0f;
constexpr float kExpC3 = 1.0f / 6.0f;
constexpr float kExpC4 = 1.0f / 24.0f;
constexpr float kExpC5 = 1.0f / 120.0f;
constexpr float kExpC6 = 1.0f / 720.0f;
constexpr float kExpC7 = 1.0f / 5040.0f;
// Adding and subtracting 1.5 * 2^23 rounds a float of magnitude < 2^22 to the nearest integer.
constexpr float kRoundMagic = 12582912.0f;

// Branch-free (NaN comes back through the final select) so loops over it auto-vectorise.
inline float exp(float x) {
    float xc = x > kExpMin ? x : kExpMin;  // NaN -> kExpMin, so the integer conversion below is defined
    xc = xc < kExpMax ? xc : kExpMax;
    const float n = (xc * kLog2e + kRoundMagic) - kRoundMagic;
    const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
    float p = kExpC7;
    p = p * r + kExpC6;
    p = p * r + kExpC5;
    p = p * r + kExpC4;
    p = p * r + kExpC3;
    p = p * r + kExpC2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t ni = static_cast<int32_t>(n);
    const int32_t n1 = ni >> 1;
    const int32_t n2 = ni - n1;
    float s1, s2;
    const uint32_t b1 = static_cast<uint32_t>(n1 + 127) << 23;
    const uint32_t b2 = static_cast<uint32_t>(n2 + 127) << 23;
    std::memcpy(&s1, &b1, 4);
    std::memcpy(&s2, &b2, 4);
    const float r2 = p * s1 * s2;
    return x != x ? x : r2;
}

// x * sigmoid(k x) = x / (1 + exp(-k x)): no cancellation anywhere, and exp overflowing to infinity
// gives the right limit (-0).
inline float x_sigmoid(float x, float k) { return x / (1.0f + vec::exp(-k * x)); }

// Below 0.3 the exp form 1 - 2/(e^2x + 1) cancels badly; the odd Taylor series to x^9 is then
// accurate to a few 1e-8 relative.
inline float tanh(float x) {
    const float ax = std::fabs(x);
    if (ax < 0.3f) {
        const float x2 = x * x;
        return x * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f + x2 * (62.0f / 2835.0f)))));
    }
    const float t = 1.0f - 2.0f / (vec::exp(2.0f * ax) + 1.0f);
    return std::copysign(t, x);
}

constexpr float kGeluC = 0.7978845608f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;
constexpr float kGeluQuick = 1.702f;

// 0.5 x (1 + tanh(u)) = x * sigmoid(2u).
inline float gelu(float x) { return x / (1.0f + vec::exp(-2.0f * kGeluC * x * (1.0f + kGeluA * x * x))); }

// erfc(z) for z >= 0 as t*exp(-z^2 + P(t)), t = 1/(1 + z/2): the Chebyshev fit published in Numerical
// Recipes, with relative error below 1.2e-7 everywhere. GELU is written through erfc on both sides of
// zero so no 1 + erf(x) cancels for negative x.
constexpr float kErfcC[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                              0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
constexpr float kSqrtHalf = 0.70710678118654752f;

inline float erfc_pos(float z) {
    const float t = 1.0f / (1.0f + 0.5f * z);
    float p = kErfcC[9];
    for (int i = 8; i >= 0; --i) p = p * t + kErfcC[i];
    return t * vec::exp(p - z * z);
}

inline float gelu_erf(float x) {
    const float c = erfc_pos(std::fabs(x) * kSqrtHalf);
    return x >= 0.0f ? x * (1.0f - 0.5f * c) : 0.5f * x * c;
}

// Sums in four interleaved partials, which both keeps the error growth low and lets the compiler
// overlap the additions.
inline float sum_portable(const float* x, int64_t n) {
    float s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) s[k] += x[i + k];
    }
    for (; i < n; ++i) s[0] += x[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

#if defined(MB_VEC_AVX2)

MB_AVX2 inline __m256 exp8(__m256 x) {
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
    __m256 p = _mm256_set1_ps(kExpC7);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpC2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    const __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    // min/max return their second operand for NaN, so NaN inputs are put back explicitly.
    return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

MB_AVX2 inline __m256 x_sigmoid8(__m256 x, float k) {
    const __m256 e = exp8(_mm256_mul_ps(x, _mm256_set1_ps(-k)));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

MB_AVX2 inline __m256 abs8(__m256 x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }

MB_AVX2 inline __m256 tanh8(__m256 x) {
    const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const __m256 ax = abs8(x);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = exp8(_mm256_add_ps(ax, ax));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    const __m256 x2 = _mm256_mul_ps(x, x);
    __m256 q = _mm256_set1_ps(62.0f / 2835.0f);
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-17.0f / 315.0f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(2.0f / 15.0f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.0f / 3.0f));
    q = _mm256_fmadd_ps(q, x2, one);
    const __m256 small = _mm256_mul_ps(x, q);
    const __m256 is_small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.3f), _CMP_LT_OQ);
    const __m256 res = _mm256_blendv_ps(_mm256_or_ps(big, sign), small, is_small);
    return _mm256_blendv_ps(res, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

MB_AVX2 inline __m256 gelu8(__m256 x) {
    const __m256 x2 = _mm256_mul_ps(x, x);
    const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(kGeluA), x2, _mm256_set1_ps(1.0f));
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(-2.0f * kGeluC)), inner);
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(u)));
}

MB_AVX2 inline __m256 gelu_erf8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 half = _mm256_set1_ps(0.5f);
    const __m256 z = _mm256_mul_ps(abs8(x), _mm256_set1_ps(kSqrtHalf));
    const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(half, z, one));
    __m256 p = _mm256_set1_ps(kErfcC[9]);
    for (int i = 8; i >= 0; --i) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(kErfcC[i]));
    const __m256 c = _mm256_mul_ps(t, exp8(_mm256_fnmadd_ps(z, z, p)));
    const __m256 pos = _mm256_mul_ps(x, _mm256_fnmadd_ps(half, c, one));
    const __m256 neg = _mm256_mul_ps(_mm256_mul_ps(half, x), c);
    return _mm256_blendv_ps(pos, neg, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}

// exp8's and gelu_erf8's algorithms (same clamp, Cody-Waite split and polynomials, one operation per
// operation, and a scaling with the same rounding, so the same bits) in 16 lanes, for AVX-512 kernels.
MB_TARGET_AVX512 inline __m512 exp16(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpMin)), _mm512_set1_ps(kExpMax));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kExpC7);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpC2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    // p * 2^n in one vscalefps: exp8's p * 2^n1 * 2^n2 (n1 = n >> 1, n2 = n - n1) is exact in its first
    // product (p in [0.7, 1.5], 2^n1 in [2^-75, 2^64]) and rounds once in its second, so both are p * 2^n
    // rounded once: the same bits, denormal results and overflow to infinity included, in one
    // instruction instead of nine (the flash softmax, GELU and log_softmax_rows run on this).
    const __m512 res = _mm512_scalef_ps(p, n);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), res, x);
}

MB_TARGET_AVX512 inline __m512 gelu_erf16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 half = _mm512_set1_ps(0.5f);
    const __m512 ax = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
    const __m512 z = _mm512_mul_ps(ax, _mm512_set1_ps(kSqrtHalf));
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(half, z, one));
    __m512 p = _mm512_set1_ps(kErfcC[9]);
    for (int i = 8; i >= 0; --i) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(kErfcC[i]));
    const __m512 c = _mm512_mul_ps(t, exp16(_mm512_fnmadd_ps(z, z, p)));
    const __m512 pos = _mm512_mul_ps(x, _mm512_fnmadd_ps(half, c, one));
    const __m512 neg = _mm512_mul_ps(_mm512_mul_ps(half, x), c);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), pos, neg);
}

MB_AVX2 inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

MB_AVX2 inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Lanes [0, n) of a mask for the tail of a row (n in 0..8).
MB_AVX2 inline __m256i tail_mask8(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

MB_AVX2 inline float sum_avx2(const float* x, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    if (i < n) a1 = _mm256_add_ps(a1, _mm256_maskload_ps(x + i, tail_mask8(n - i)));
    return hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

#endif  // MB_VEC_AVX2

inline float sum(const float* x, int64_t n) {
#if defined(MB_VEC_AVX2)
    if (use_avx2()) return sum_avx2(x, n);
#endif
    return sum_portable(x, n);
}

// ALiBi: heads below the largest power of two n_head_log2 <= n_head get m0^(h+1), the rest
// m1^(2(h - n_head_log2) + 1).
inline float alibi_slope(float max_bias, int64_t head, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    const int64_t n_head_log2 = int64_t(1) << int64_t(std::floor(std::log2(double(std::max<int64_t>(n_head, 1)))));
    const float m0 = std::pow(2.0f, -max_bias / float(n_head_log2));
    const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / float(n_head_log2));
    return head < n_head_log2 ? std::pow(m0, float(head + 1)) : std::pow(m1, float(2 * (head - n_head_log2) + 1));
}

// Row r (0-based, over dims 1..3) of t, as its indices.
struct RowIndex {
    int64_t i1, i2, i3;
};

inline RowIndex row_index(const Tensor& t, int64_t r) {
    RowIndex ix;
    ix.i1 = r % t.ne[1];
    r /= t.ne[1];
    ix.i2 = r % t.ne[2];
    ix.i3 = r / t.ne[2];
    return ix;
}

inline uint8_t* row_ptr(const Tensor& t, const RowIndex& ix) {
    return host_data(t) + ix.i1 * t.nb[1] + ix.i2 * t.nb[2] + ix.i3 * t.nb[3];
}

inline size_t elem_size(const Tensor& t) { return type_traits(t.type).type_size; }

// Whether t's rows may be read as packed element runs (quantized rows always are, by block).
inline bool packed_rows(const Tensor& t) { return t.nb[0] == elem_size(t); }

inline bool same_shape(const Tensor& a, const Tensor& b) {
    return a.ne[0] == b.ne[0] && a.ne[1] == b.ne[1] && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3];
}

// Copies n strided f32 values into a packed buffer.
inline void gather_f32(const uint8_t* src, size_t stride, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(&out[i], src + size_t(i) * stride, sizeof(float));
}

inline void scatter_f32(const float* in, int64_t n, uint8_t* dst, size_t stride) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + size_t(i) * stride, &in[i], sizeof(float));
}

// Copies n elements of esize bytes between strided runs (packed runs in one move).
inline void copy_elems(const uint8_t* src, size_t sstride, uint8_t* dst, size_t dstride, int64_t n, size_t esize) {
    if (sstride == esize && dstride == esize) {
        std::memmove(dst, src, size_t(n) * esize);
        return;
    }
    // Constant sizes let memcpy become one load and one store.
    switch (esize) {
        case 2:
            for (int64_t i = 0; i < n; ++i) std::memcpy(dst + size_t(i) * dstride, src + size_t(i) * sstride, 2);
            return;
        case 4:
            for (int64_t i = 0; i < n; ++i) std::memcpy(dst + size_t(i) * dstride, src + size_t(i) * sstride, 4);
            return;
        default:
            for (int64_t i = 0; i < n; ++i) {
                std::memcpy(dst + size_t(i) * dstride, src + size_t(i) * sstride, esize);
            }
            return;
    }
}

inline void zero_elems(uint8_t* dst, size_t dstride, int64_t n, size_t esize) {
    if (dstride == esize) {
        std::memset(dst, 0, size_t(n) * esize);
        return;
    }
    for (int64_t i = 0; i < n; ++i) std::memset(dst + size_t(i) * dstride, 0, esize);
}

// Elements handled per step when a row has to go through a packed buffer; a multiple of every block
// size so quantized rows split on block boundaries.
constexpr int64_t kChunk = 1024;

}  // namespace mb::vec
