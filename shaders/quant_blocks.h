// ggml's quantized blocks, stated once for the host and the kernels: the block structs (ggml's byte
// layout) and the rules that quantize 32 floats into one block. The host reads this through
// src/core/types.h (structs in namespace mb, scales as IEEE half bits in uint16_t, converted by
// core/fp16.h); the kernels through shaders/quants.h (scales as half). The same lines compile on
// both sides, so a field or a rounding rule cannot drift apart between them.
//
// Layout: element j < 16 of a block is the low nibble of qs[j], element j + 16 its high nibble; for
// the 5-bit types bit j of qh (read as a little-endian u32) is the fifth bit of element j.
//
// Quantizing: ggml's reference quantizers, each step in the reference's order and rounding (x*id
// then + offset are two roundings, so includers compile this without floating-point contraction;
// divisions are correctly rounded on both sides). A block holding a NaN stores the quiet half NaN
// 0x7E00 as its scale, so every value of the block reads back as NaN (ggml leaves that undefined).
#pragma once

#if defined(__METAL_VERSION__) || defined(MB_MSL_SHIM)

#define MB_QB_HALF half
#define MB_QB_THREAD thread
#define MB_QB_BEGIN
#define MB_QB_END

#else

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#define MB_QB_HALF uint16_t
#define MB_QB_THREAD
#define MB_QB_BEGIN namespace mb {
#define MB_QB_END }

#endif

// Elements per block of every quantized type.
#define MB_QK 32

// The code that stands for 0 in the symmetric 4- and 5-bit types: value = (code - zero) * d. (q8_0's
// codes are signed, value = code * d; q4_1 and q5_1 have value = code * d + m.)
#define MB_QB_ZERO_Q4_0 8
#define MB_QB_ZERO_Q5_0 16

// The scale of a block that held a NaN: the quiet half NaN, as bits.
#define MB_QB_NAN_SCALE_BITS 0x7E00u

MB_QB_BEGIN

typedef struct {
    MB_QB_HALF d;
    uint8_t qs[MB_QK / 2];
} block_q4_0;

typedef struct {
    MB_QB_HALF d;
    MB_QB_HALF m;
    uint8_t qs[MB_QK / 2];
} block_q4_1;

typedef struct {
    MB_QB_HALF d;
    uint8_t qh[4];
    uint8_t qs[MB_QK / 2];
} block_q5_0;

typedef struct {
    MB_QB_HALF d;
    MB_QB_HALF m;
    uint8_t qh[4];
    uint8_t qs[MB_QK / 2];
} block_q5_1;

typedef struct {
    MB_QB_HALF d;
    int8_t qs[MB_QK];
} block_q8_0;

// ggml's sizes (type_size in its type table; model files are read with them).
static_assert(sizeof(block_q4_0) == 18, "q4_0 block must match ggml");
static_assert(sizeof(block_q4_1) == 20, "q4_1 block must match ggml");
static_assert(sizeof(block_q5_0) == 22, "q5_0 block must match ggml");
static_assert(sizeof(block_q5_1) == 24, "q5_1 block must match ggml");
static_assert(sizeof(block_q8_0) == 34, "q8_0 block must match ggml");

#if !defined(__METAL_VERSION__)
// ggml's field offsets (MSL has no offsetof; there the sizes above and the shared field types pin it).
static_assert(offsetof(block_q4_0, qs) == 2, "q4_0 layout must match ggml");
static_assert(offsetof(block_q4_1, m) == 2 && offsetof(block_q4_1, qs) == 4, "q4_1 layout must match ggml");
static_assert(offsetof(block_q5_0, qh) == 2 && offsetof(block_q5_0, qs) == 6, "q5_0 layout must match ggml");
static_assert(offsetof(block_q5_1, m) == 2 && offsetof(block_q5_1, qh) == 4 && offsetof(block_q5_1, qs) == 8,
              "q5_1 layout must match ggml");
static_assert(offsetof(block_q8_0, qs) == 2, "q8_0 layout must match ggml");
#endif

// ---------------------------------------------------------------- quantizing 32 floats into a block

#if defined(__METAL_VERSION__) || defined(MB_MSL_SHIM)
static inline uint32_t mb_qb_bits(float x) {
    return metal::as_type<uint32_t>(x);
}
// Fast-math division is not correctly rounded; ggml's quantizers divide exactly.
static inline float mb_qb_div(float a, float b) {
    return metal::precise::divide(a, b);
}
static inline float mb_qb_fabs(float x) {
    return metal::fabs(x);
}
#else
static inline uint32_t mb_qb_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}
static inline float mb_qb_div(float a, float b) {
    return a / b;
}
static inline float mb_qb_fabs(float x) {
    return std::fabs(x);
}
#endif

// ggml truncates x*id + offset to an integer and clips it to the top code. For finite input that
// value lies in [0, top + 1); the clamps only give NaN and overflow (infinite input) a defined code.
static inline uint32_t mb_qb_truncated_code(float v, int top) {
    if (!(v >= 0.0f)) {
        return 0;
    }
    if (v >= float(top)) {
        return uint32_t(top);
    }
    return uint32_t(int(v));
}

// roundf (halves away from zero) clipped to [-127, 127], without a libm call; NaN gives 0.
static inline int mb_qb_rounded_code(float v) {
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

static inline float mb_qb_inverse_or_zero(float d) {
    return d != 0.0f ? mb_qb_div(1.0f, d) : 0.0f;
}

// The value with the largest magnitude, the first one on ties; +0 when all are zero.
static inline float mb_qb_signed_absmax(MB_QB_THREAD const float * x) {
    float amax = 0.0f;
    float vmax = 0.0f;
    for (int j = 0; j < MB_QK; ++j) {
        const float a = mb_qb_fabs(x[j]);
        if (amax < a) {
            amax = a;
            vmax = x[j];
        }
    }
    return vmax;
}

// Tested on the bits: fast math may fold x != x to false.
static inline bool mb_qb_has_nan(MB_QB_THREAD const float * x) {
    bool nan = false;
    for (int j = 0; j < MB_QK; ++j) {
        nan = nan || (mb_qb_bits(x[j]) & 0x7fffffffu) > 0x7f800000u;
    }
    return nan;
}

// What quantizing a block gives besides its codes: the scale d and the minimum m (0 for the
// symmetric types) as floats, which each side stores as half its own way, and whether a value was
// NaN (then the scale stored is MB_QB_NAN_SCALE_BITS).
typedef struct {
    float d;
    float m;
    bool nan;
} mb_qb_scales;

// The scales of a symmetric type (q4_0, q5_0): d = (the value of largest magnitude) / -zero.
static inline mb_qb_scales mb_qb_symmetric(MB_QB_THREAD const float * x, float zero) {
    mb_qb_scales s;
    s.d = mb_qb_div(mb_qb_signed_absmax(x), -zero);
    s.m = 0.0f;
    s.nan = mb_qb_has_nan(x);
    return s;
}

// The scales of a type with an offset (q4_1, q5_1): m = the minimum, d = (max - min) / top code.
static inline mb_qb_scales mb_qb_min_max(MB_QB_THREAD const float * x, float top) {
    float vmin = FLT_MAX;
    float vmax = -FLT_MAX;
    for (int j = 0; j < MB_QK; ++j) {
        if (x[j] < vmin) {
            vmin = x[j];
        }
        if (x[j] > vmax) {
            vmax = x[j];
        }
    }
    mb_qb_scales s;
    s.d = mb_qb_div(vmax - vmin, top);
    s.m = vmin;
    s.nan = mb_qb_has_nan(x);
    return s;
}

// The 32 codes of a 4- or 5-bit type, code = trunc((x - m) * id + offset) clipped to the top code:
// the low nibbles go to qs (elements j and j + 16 share byte j); returns the fifth bits (bit j of
// element j), which the 5-bit types store in qh.
static inline uint32_t mb_qb_pack(MB_QB_THREAD const float * x, mb_qb_scales s, float offset, int top,
                                  MB_QB_THREAD uint8_t * qs) {
    const float id = mb_qb_inverse_or_zero(s.d);
    uint32_t fifth = 0;
    for (int j = 0; j < MB_QK / 2; ++j) {
        const float x0 = (x[j] - s.m) * id;
        const float x1 = (x[j + MB_QK / 2] - s.m) * id;
        const uint32_t q0 = mb_qb_truncated_code(x0 + offset, top);
        const uint32_t q1 = mb_qb_truncated_code(x1 + offset, top);
        qs[j] = uint8_t((q0 & 0x0fu) | ((q1 & 0x0fu) << 4));
        fifth |= ((q0 >> 4) & 1u) << j;
        fifth |= ((q1 >> 4) & 1u) << (j + MB_QK / 2);
    }
    return fifth;
}

static inline void mb_qb_store_qh(MB_QB_THREAD uint8_t * qh, uint32_t fifth) {
    for (int k = 0; k < 4; ++k) {
        qh[k] = uint8_t(fifth >> (8 * k));
    }
}

// The block quantizers: 32 floats x to the block's codes; the scales are returned for the caller
// to store (as half, or MB_QB_NAN_SCALE_BITS when s.nan).
static inline mb_qb_scales mb_qb_quantize_q4_0(MB_QB_THREAD const float * x, MB_QB_THREAD uint8_t * qs) {
    const mb_qb_scales s = mb_qb_symmetric(x, float(MB_QB_ZERO_Q4_0));
    mb_qb_pack(x, s, float(MB_QB_ZERO_Q4_0) + 0.5f, 2 * MB_QB_ZERO_Q4_0 - 1, qs);
    return s;
}

static inline mb_qb_scales mb_qb_quantize_q4_1(MB_QB_THREAD const float * x, MB_QB_THREAD uint8_t * qs) {
    const mb_qb_scales s = mb_qb_min_max(x, 15.0f);
    mb_qb_pack(x, s, 0.5f, 15, qs);
    return s;
}

static inline mb_qb_scales mb_qb_quantize_q5_0(MB_QB_THREAD const float * x, MB_QB_THREAD uint8_t * qs,
                                               MB_QB_THREAD uint8_t * qh) {
    const mb_qb_scales s = mb_qb_symmetric(x, float(MB_QB_ZERO_Q5_0));
    mb_qb_store_qh(qh, mb_qb_pack(x, s, float(MB_QB_ZERO_Q5_0) + 0.5f, 2 * MB_QB_ZERO_Q5_0 - 1, qs));
    return s;
}

static inline mb_qb_scales mb_qb_quantize_q5_1(MB_QB_THREAD const float * x, MB_QB_THREAD uint8_t * qs,
                                               MB_QB_THREAD uint8_t * qh) {
    const mb_qb_scales s = mb_qb_min_max(x, 31.0f);
    mb_qb_store_qh(qh, mb_qb_pack(x, s, 0.5f, 31, qs));
    return s;
}

// d = max |x| / 127, codes round(x / d). ggml's MAX(a, b) is a > b ? a : b, so a NaN carries into
// the maximum until a larger value comes (the NaN rule above overrides the scale anyway).
static inline mb_qb_scales mb_qb_quantize_q8_0(MB_QB_THREAD const float * x, MB_QB_THREAD int8_t * qs) {
    float amax = 0.0f;
    for (int j = 0; j < MB_QK; ++j) {
        const float a = mb_qb_fabs(x[j]);
        amax = amax > a ? amax : a;
    }
    mb_qb_scales s;
    s.d = mb_qb_div(amax, 127.0f);
    s.m = 0.0f;
    s.nan = mb_qb_has_nan(x);
    const float id = mb_qb_inverse_or_zero(s.d);
    for (int j = 0; j < MB_QK; ++j) {
        qs[j] = int8_t(mb_qb_rounded_code(x[j] * id));
    }
    return s;
}

MB_QB_END
