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

// ---------------------------------------------------------------- super-block types (k-quants)
//
// The k-quants group 256 values into a super-block of 8 sub-blocks of 32 (q4_K, q5_K) or 16 of 16
// (q2_K, q3_K, q6_K), each with a small integer scale (and for q2_K q4_K q5_K a minimum) that
// multiplies the super-block's half scales d (and dmin). q8_K is the 8-bit activation type their dot
// products pair with: a float scale, the codes, and the sums of each 16 codes.
//   q2_K  value = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q = 2 bits, s = element / 16;
//         q of element 128*h + 32*c + l (l < 32) is bits 2c..2c+1 of qs[32*h + l].
//   q3_K  value = d * (scale6[s] - 32) * (q - (hmask bit ? 0 : 4)), q as for q2_K, the high bit of
//         element 128*h + 32*c + l is bit 4h + c of hmask[l]; 6-bit scales packed in 12 bytes
//         (low nibbles in bytes 0..7, 2-bit high parts in bytes 8..11).
//   q4_K  value = d * sc[b] * q - dmin * mn[b], b = element / 32, q = 4 bits: element 64*p + l is the
//         low nibble of qs[32*p + l], element 64*p + 32 + l its high nibble; sc/mn 6 bits packed in 12
//         bytes (mb_qb_k4_scale_min).
//   q5_K  as q4_K with a fifth bit: element 64*p + l has bit 2p of qh[l], element 64*p + 32 + l bit 2p+1.
//   q6_K  value = d * scales[s] * (q - 32), s = element / 16, q = 6 bits: element 128*h + 32*c + l takes
//         its low nibble from ql[64*h + l + 32*(c&1)] (c < 2 low nibble, else high) and bits 2c..2c+1
//         of qh[32*h + l] as bits 4..5.
#define MB_QK_K 256
#define MB_K_SCALE_SIZE 12

typedef struct {
    uint8_t scales[MB_QK_K / 16];
    uint8_t qs[MB_QK_K / 4];
    MB_QB_HALF d;
    MB_QB_HALF dmin;
} block_q2_K;

typedef struct {
    uint8_t hmask[MB_QK_K / 8];
    uint8_t qs[MB_QK_K / 4];
    uint8_t scales[MB_K_SCALE_SIZE];
    MB_QB_HALF d;
} block_q3_K;

typedef struct {
    MB_QB_HALF d;
    MB_QB_HALF dmin;
    uint8_t scales[MB_K_SCALE_SIZE];
    uint8_t qs[MB_QK_K / 2];
} block_q4_K;

typedef struct {
    MB_QB_HALF d;
    MB_QB_HALF dmin;
    uint8_t scales[MB_K_SCALE_SIZE];
    uint8_t qh[MB_QK_K / 8];
    uint8_t qs[MB_QK_K / 2];
} block_q5_K;

typedef struct {
    uint8_t ql[MB_QK_K / 2];
    uint8_t qh[MB_QK_K / 4];
    int8_t scales[MB_QK_K / 16];
    MB_QB_HALF d;
} block_q6_K;

typedef struct {
    float d;
    int8_t qs[MB_QK_K];
    int16_t bsums[MB_QK_K / 16];
} block_q8_K;

static_assert(sizeof(block_q2_K) == 84, "q2_K block must match ggml");
static_assert(sizeof(block_q3_K) == 110, "q3_K block must match ggml");
static_assert(sizeof(block_q4_K) == 144, "q4_K block must match ggml");
static_assert(sizeof(block_q5_K) == 176, "q5_K block must match ggml");
static_assert(sizeof(block_q6_K) == 210, "q6_K block must match ggml");
static_assert(sizeof(block_q8_K) == 292, "q8_K block must match ggml");

#if !defined(__METAL_VERSION__)
static_assert(offsetof(block_q2_K, qs) == 16 && offsetof(block_q2_K, d) == 80 && offsetof(block_q2_K, dmin) == 82,
              "q2_K layout must match ggml");
static_assert(offsetof(block_q3_K, qs) == 32 && offsetof(block_q3_K, scales) == 96 && offsetof(block_q3_K, d) == 108,
              "q3_K layout must match ggml");
static_assert(offsetof(block_q4_K, dmin) == 2 && offsetof(block_q4_K, scales) == 4 && offsetof(block_q4_K, qs) == 16,
              "q4_K layout must match ggml");
static_assert(offsetof(block_q5_K, scales) == 4 && offsetof(block_q5_K, qh) == 16 && offsetof(block_q5_K, qs) == 48,
              "q5_K layout must match ggml");
static_assert(offsetof(block_q6_K, qh) == 128 && offsetof(block_q6_K, scales) == 192 && offsetof(block_q6_K, d) == 208,
              "q6_K layout must match ggml");
static_assert(offsetof(block_q8_K, qs) == 4 && offsetof(block_q8_K, bsums) == 260, "q8_K layout must match ggml");
#endif

// The 6-bit scale and minimum of sub-block j (0..7) of a q4_K / q5_K block: for j < 4 the low 6 bits
// of bytes j and j + 4; above, a nibble of byte j + 4 with the top two bits of bytes j - 4 and j.
static inline void mb_qb_k4_scale_min(int j, MB_QB_THREAD const uint8_t * q, MB_QB_THREAD uint8_t * sc,
                                      MB_QB_THREAD uint8_t * mn) {
    if (j < 4) {
        *sc = uint8_t(q[j] & 63);
        *mn = uint8_t(q[j + 4] & 63);
    } else {
        *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *mn = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// The 6-bit scale (0..63, stored with +32) of sub-block j (0..15) of a q3_K block.
static inline int mb_qb_k3_scale(int j, MB_QB_THREAD const uint8_t * s) {
    const int lo = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return lo | (hi << 4);
}

// ---------------------------------------------------------------- non-linear 4-bit types
//
// The code picks a value from a 16-entry table instead of standing for itself.
//   iq4_nl  32 values: value = d * kvalues_iq4nl[q], q as q4_0's nibbles (element j < 16 low nibble of
//           qs[j], element j + 16 its high nibble).
//   iq4_xs  256 values in 8 sub-blocks of 32: value = d * (ls - 32) * kvalues_iq4nl[q], ls the 6-bit
//           sub-block scale (low nibble from scales_l[b / 2], bits 2b..2b+1 of scales_h on top); each
//           sub-block's codes laid out as iq4_nl's in qs[16 b .. 16 b + 15].
//   mxfp4   32 values: value = kvalues_mxfp4[q] * 2^(e - 128) (e an E8M0 exponent; the table holds twice
//           the E2M1 values), codes as iq4_nl's.
#if defined(__METAL_VERSION__)
#define MB_QB_TABLE constant
#else
#define MB_QB_TABLE static const
#endif

MB_QB_TABLE int8_t mb_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
MB_QB_TABLE int8_t mb_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

typedef struct {
    MB_QB_HALF d;
    uint8_t qs[MB_QK / 2];
} block_iq4_nl;

typedef struct {
    MB_QB_HALF d;
    uint16_t scales_h;
    uint8_t scales_l[MB_QK_K / 64];
    uint8_t qs[MB_QK_K / 2];
} block_iq4_xs;

typedef struct {
    uint8_t e;
    uint8_t qs[MB_QK / 2];
} block_mxfp4;

static_assert(sizeof(block_iq4_nl) == 18, "iq4_nl block must match ggml");
static_assert(sizeof(block_iq4_xs) == 136, "iq4_xs block must match ggml");
static_assert(sizeof(block_mxfp4) == 17, "mxfp4 block must match ggml");
#if !defined(__METAL_VERSION__)
static_assert(offsetof(block_iq4_nl, qs) == 2, "iq4_nl layout must match ggml");
static_assert(offsetof(block_iq4_xs, scales_h) == 2 && offsetof(block_iq4_xs, scales_l) == 4 &&
                  offsetof(block_iq4_xs, qs) == 8,
              "iq4_xs layout must match ggml");
static_assert(offsetof(block_mxfp4, qs) == 1, "mxfp4 layout must match ggml");
#endif

// The 6-bit scale (stored with +32) of sub-block b (0..7) of an iq4_xs block.
static inline int mb_qb_iq4xs_scale(int b, uint32_t scales_h, MB_QB_THREAD const uint8_t * scales_l) {
    return int(((scales_l[b / 2] >> (4 * (b % 2))) & 0xF) | (((scales_h >> (2 * b)) & 3u) << 4));
}

// 2^(e - 128): mxfp4's scale (half the E8M0 value, as the table holds twice the E2M1 values).
static inline float mb_qb_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23);
#if defined(__METAL_VERSION__) || defined(MB_MSL_SHIM)
    return metal::as_type<float>(bits);
#else
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
#endif
}

// ---------------------------------------------------------------- grid types
//
// Super-blocks of 256 values; a code indexes a grid of 4 or 8 values (iq_grids.h), one sign bit per
// value (iq2/iq3; a 7-bit sign code names 8 signs through mb_ksigns_iq2xs, the eighth making the
// count even), scales per 32 or 16 values:
//   iq2_xxs  per 32 values (ib): u32 a = qs[4ib] | qs[4ib+1] << 16 holds 4 grid codes (its bytes),
//            u32 b = qs[4ib+2] | qs[4ib+3] << 16 holds 4 sign codes (bits 7l..7l+6) and the scale
//            b >> 28; value = d * (0.5 + s) * 0.25 * grid * sign.
//   iq2_xs   qs[4ib+l]: 9-bit grid code, 7-bit sign code on top; scale nibble ib (low: l < 2).
//   iq2_s    codes qs[4ib+l] | bits 2l..2l+1 of qh[ib] << 8 (10 bits), signs one byte per 8 values in
//            qs[32 + 4ib + l]; scales as iq2_xs.
//   iq3_xxs  qs[0..63] 8-bit codes of 4-value groups; qs[64 + 4ib..] a u32 as iq2_xxs's b;
//            value = d * (0.5 + s) * 0.5 * grid * sign.
//   iq3_s    codes qs[8ib+k] | bit k of qh[ib] << 8; signs[4ib + l] for values 8l..8l+7 of ib;
//            scale nibble ib of scales (per 32, low nibble for even ib); value = d * (1 + 2s) * grid * sign.
//   iq1_s    qs[4ib+l] | bits 3l..3l+2 of qh[ib] << 8 (11 bits) into the -1/0/1 grid; qh[ib] bits
//            12..14 the scale, bit 15 the delta's sign; value = d * (2s + 1) * (grid + delta),
//            delta = +-1/8.
//   iq1_m    no d field: the f16 scale is the top nibbles of the four u16 words of scales; the
//            3-bit scales of 16 values are the low 12 bits of those words; codes qs[k] | bits of
//            nibble k % 2 of qh[k / 2] (its bit 3 the delta's sign of those 8 values).
// The grids themselves are in iq_grids.h, included by the code that reads them (shaders/quants.h,
// core/quants_grid.cpp), not here: every host source includes this header through core/types.h.

#define MB_IQ1S_DELTA 0.125f
#define MB_IQ1M_DELTA 0.125f

typedef struct {
    MB_QB_HALF d;
    uint16_t qs[MB_QK_K / 8];
} block_iq2_xxs;

typedef struct {
    MB_QB_HALF d;
    uint16_t qs[MB_QK_K / 8];
    uint8_t scales[MB_QK_K / 32];
} block_iq2_xs;

typedef struct {
    MB_QB_HALF d;
    uint8_t qs[MB_QK_K / 4];
    uint8_t qh[MB_QK_K / 32];
    uint8_t scales[MB_QK_K / 32];
} block_iq2_s;

typedef struct {
    MB_QB_HALF d;
    uint8_t qs[3 * MB_QK_K / 8];
} block_iq3_xxs;

typedef struct {
    MB_QB_HALF d;
    uint8_t qs[MB_QK_K / 4];
    uint8_t qh[MB_QK_K / 32];
    uint8_t signs[MB_QK_K / 8];
    uint8_t scales[MB_QK_K / 64];
} block_iq3_s;

typedef struct {
    MB_QB_HALF d;
    uint8_t qs[MB_QK_K / 8];
    uint16_t qh[MB_QK_K / 32];
} block_iq1_s;

typedef struct {
    uint8_t qs[MB_QK_K / 8];
    uint8_t qh[MB_QK_K / 16];
    uint8_t scales[MB_QK_K / 32];
} block_iq1_m;

static_assert(sizeof(block_iq2_xxs) == 66, "iq2_xxs block must match ggml");
static_assert(sizeof(block_iq2_xs) == 74, "iq2_xs block must match ggml");
static_assert(sizeof(block_iq2_s) == 82, "iq2_s block must match ggml");
static_assert(sizeof(block_iq3_xxs) == 98, "iq3_xxs block must match ggml");
static_assert(sizeof(block_iq3_s) == 110, "iq3_s block must match ggml");
static_assert(sizeof(block_iq1_s) == 50, "iq1_s block must match ggml");
static_assert(sizeof(block_iq1_m) == 56, "iq1_m block must match ggml");
#if !defined(__METAL_VERSION__)
static_assert(offsetof(block_iq2_xxs, qs) == 2, "iq2_xxs layout must match ggml");
static_assert(offsetof(block_iq2_xs, qs) == 2 && offsetof(block_iq2_xs, scales) == 66,
              "iq2_xs layout must match ggml");
static_assert(offsetof(block_iq2_s, qs) == 2 && offsetof(block_iq2_s, qh) == 66 &&
                  offsetof(block_iq2_s, scales) == 74,
              "iq2_s layout must match ggml");
static_assert(offsetof(block_iq3_xxs, qs) == 2, "iq3_xxs layout must match ggml");
static_assert(offsetof(block_iq3_s, qs) == 2 && offsetof(block_iq3_s, qh) == 66 &&
                  offsetof(block_iq3_s, signs) == 74 && offsetof(block_iq3_s, scales) == 106,
              "iq3_s layout must match ggml");
static_assert(offsetof(block_iq1_s, qs) == 2 && offsetof(block_iq1_s, qh) == 34, "iq1_s layout must match ggml");
static_assert(offsetof(block_iq1_m, qh) == 32 && offsetof(block_iq1_m, scales) == 48,
              "iq1_m layout must match ggml");
#endif

// iq1_m's f16 scale, as bits, from its four scale words (little-endian u16 in scales[0..7]).
static inline uint16_t mb_qb_iq1m_scale_bits(MB_QB_THREAD const uint8_t * sc) {
    const uint16_t w0 = uint16_t(sc[0] | (sc[1] << 8)), w1 = uint16_t(sc[2] | (sc[3] << 8));
    const uint16_t w2 = uint16_t(sc[4] | (sc[5] << 8)), w3 = uint16_t(sc[6] | (sc[7] << 8));
    return uint16_t((w0 >> 12) | ((w1 >> 8) & 0x00F0) | ((w2 >> 4) & 0x0F00) | (w3 & 0xF000));
}

// iq1_m's 3-bit scale of values 16 s .. 16 s + 15 (s = 0..15).
static inline int mb_qb_iq1m_sub_scale(int s, MB_QB_THREAD const uint8_t * sc) {
    const uint32_t w = uint32_t(sc[2 * (s / 4)] | (sc[2 * (s / 4) + 1] << 8));
    return int((w >> (3 * (s % 4))) & 7u);
}

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
