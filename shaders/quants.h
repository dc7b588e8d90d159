// Device-side view of ggml's element types: the quantized block structs (laid out byte for byte as
// src/core/types.h), bf16 as raw bits, conversions to f32 per element or per 16 values of a block, and
// the reference quantizers of src/core/types.cpp rewritten for one block per thread.
//
// Element j < 16 of a block is the low nibble of qs[j] and element j + 16 its high nibble; "half" il
// of a block is its elements [16*il, 16*il + 16). bf16 is handled as bits, so these kernels need no
// bfloat support from the compiler.
//
// The quantizers must give ggml's bytes: divisions use precise::divide (fast-math division is not
// correctly rounded) and every step mirrors the reference's operation order.
// Include after <metal_stdlib>.
#pragma once

#define MB_QK 32

typedef struct {
    half d;
    uchar qs[MB_QK / 2];
} block_q4_0;

typedef struct {
    half d;
    half m;
    uchar qs[MB_QK / 2];
} block_q4_1;

typedef struct {
    half d;
    uchar qh[4];
    uchar qs[MB_QK / 2];
} block_q5_0;

typedef struct {
    half d;
    half m;
    uchar qh[4];
    uchar qs[MB_QK / 2];
} block_q5_1;

typedef struct {
    half d;
    char qs[MB_QK];
} block_q8_0;

// A bf16 element: the upper 16 bits of an f32.
typedef struct {
    ushort bits;
} mb_bf16;

// ---------------------------------------------------------------- plain elements to and from f32

inline float mb_to_float(float x) {
    return x;
}

inline float mb_to_float(half x) {
    return float(x);
}

inline float mb_to_float(mb_bf16 x) {
    return metal::as_type<float>(uint(x.bits) << 16);
}

inline float mb_to_float(int x) {
    return float(x);
}

// Round to nearest even; a NaN keeps its sign and top payload bits and is made quiet.
inline mb_bf16 mb_bf16_from_float(float f) {
    const uint u = metal::as_type<uint>(f);
    mb_bf16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.bits = ushort((u >> 16) | 0x40u);
    } else {
        r.bits = ushort((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    return r;
}

// Truncation toward zero, saturating; NaN gives 0 (as src/core/types.cpp).
inline int mb_int_from_float(float v) {
    if (!(v == v)) {
        return 0;
    }
    if (v >= 2147483648.0f) {
        return INT_MAX;
    }
    if (v <= -2147483648.0f) {
        return INT_MIN;
    }
    return int(v);
}

// ---------------------------------------------------------------- 16 values of a block to f32

inline uint mb_load_qh(device const uchar * qh) {
    return uint(qh[0]) | (uint(qh[1]) << 8) | (uint(qh[2]) << 16) | (uint(qh[3]) << 24);
}

inline void dequantize16(device const block_q4_0 * b, int il, thread float * out) {
    const float d = float(b->d);
    const int shift = il * 4;
    for (int j = 0; j < 16; ++j) {
        out[j] = float(int((b->qs[j] >> shift) & 0x0f) - 8) * d;
    }
}

inline void dequantize16(device const block_q4_1 * b, int il, thread float * out) {
    const float d = float(b->d);
    const float m = float(b->m);
    const int shift = il * 4;
    for (int j = 0; j < 16; ++j) {
        out[j] = float((b->qs[j] >> shift) & 0x0f) * d + m;
    }
}

inline void dequantize16(device const block_q5_0 * b, int il, thread float * out) {
    const float d = float(b->d);
    const uint qh = mb_load_qh(b->qh) >> (il * 16);
    const int shift = il * 4;
    for (int j = 0; j < 16; ++j) {
        const int q = int(((b->qs[j] >> shift) & 0x0f) | (((qh >> j) & 1u) << 4));
        out[j] = float(q - 16) * d;
    }
}

inline void dequantize16(device const block_q5_1 * b, int il, thread float * out) {
    const float d = float(b->d);
    const float m = float(b->m);
    const uint qh = mb_load_qh(b->qh) >> (il * 16);
    const int shift = il * 4;
    for (int j = 0; j < 16; ++j) {
        const uint q = ((b->qs[j] >> shift) & 0x0f) | (((qh >> j) & 1u) << 4);
        out[j] = float(q) * d + m;
    }
}

inline void dequantize16(device const block_q8_0 * b, int il, thread float * out) {
    const float d = float(b->d);
    for (int j = 0; j < 16; ++j) {
        out[j] = float(b->qs[il * 16 + j]) * d;
    }
}

// ---------------------------------------------------------------- 32 f32 values to one block

// ggml truncates x*id + offset and clips it to the top code; NaN and overflow get a defined code.
inline int mb_truncated_code(float v, int top) {
    if (!(v >= 0.0f)) {
        return 0;
    }
    if (v >= float(top)) {
        return top;
    }
    return int(v);
}

// Rounds halves away from zero (roundf), clipped to [-127, 127]; NaN gives 0.
inline int mb_rounded_code(float v) {
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
inline float mb_signed_absmax(thread const float * x) {
    float amax = 0.0f;
    float vmax = 0.0f;
    for (int j = 0; j < MB_QK; ++j) {
        const float a = metal::fabs(x[j]);
        if (amax < a) {
            amax = a;
            vmax = x[j];
        }
    }
    return vmax;
}

inline float mb_inverse_or_zero(float d) {
    return d != 0.0f ? metal::precise::divide(1.0f, d) : 0.0f;
}

// A block holding a NaN stores the quiet NaN 0x7E00 as its scale, as src/core/types.cpp does, so
// the NaN reaches every value of the block. Tested on the bits: fast math may fold x != x to false.
inline bool mb_block_has_nan(thread const float * x) {
    bool nan = false;
    for (int j = 0; j < MB_QK; ++j) {
        nan = nan || (metal::as_type<uint>(x[j]) & 0x7fffffffu) > 0x7f800000u;
    }
    return nan;
}

inline half mb_nan_scale() {
    return metal::as_type<half>(ushort(0x7e00));
}

inline void quantize32(thread const float * x, device block_q4_0 * y) {
    const float d = metal::precise::divide(mb_signed_absmax(x), -8.0f);
    const float id = mb_inverse_or_zero(d);
    y->d = half(d);
    for (int j = 0; j < MB_QK / 2; ++j) {
        const float x0 = x[j] * id;
        const float x1 = x[j + MB_QK / 2] * id;
        const int q0 = mb_truncated_code(x0 + 8.5f, 15);
        const int q1 = mb_truncated_code(x1 + 8.5f, 15);
        y->qs[j] = uchar(q0 | (q1 << 4));
    }
    if (mb_block_has_nan(x)) {
        y->d = mb_nan_scale();
    }
}

inline void mb_min_max(thread const float * x, thread float & vmin, thread float & vmax) {
    vmin = FLT_MAX;
    vmax = -FLT_MAX;
    for (int j = 0; j < MB_QK; ++j) {
        if (x[j] < vmin) {
            vmin = x[j];
        }
        if (x[j] > vmax) {
            vmax = x[j];
        }
    }
}

inline void quantize32(thread const float * x, device block_q4_1 * y) {
    float vmin;
    float vmax;
    mb_min_max(x, vmin, vmax);
    const float d = metal::precise::divide(vmax - vmin, 15.0f);
    const float id = mb_inverse_or_zero(d);
    y->d = half(d);
    y->m = half(vmin);
    for (int j = 0; j < MB_QK / 2; ++j) {
        const float x0 = (x[j] - vmin) * id;
        const float x1 = (x[j + MB_QK / 2] - vmin) * id;
        const int q0 = mb_truncated_code(x0 + 0.5f, 15);
        const int q1 = mb_truncated_code(x1 + 0.5f, 15);
        y->qs[j] = uchar(q0 | (q1 << 4));
    }
    if (mb_block_has_nan(x)) {
        y->d = mb_nan_scale();
    }
}

inline void mb_store_qh(device uchar * qh, uint bits) {
    for (int k = 0; k < 4; ++k) {
        qh[k] = uchar(bits >> (8 * k));
    }
}

inline void quantize32(thread const float * x, device block_q5_0 * y) {
    const float d = metal::precise::divide(mb_signed_absmax(x), -16.0f);
    const float id = mb_inverse_or_zero(d);
    y->d = half(d);
    uint qh = 0;
    for (int j = 0; j < MB_QK / 2; ++j) {
        const float x0 = x[j] * id;
        const float x1 = x[j + MB_QK / 2] * id;
        const uint q0 = uint(mb_truncated_code(x0 + 16.5f, 31));
        const uint q1 = uint(mb_truncated_code(x1 + 16.5f, 31));
        y->qs[j] = uchar((q0 & 0x0fu) | ((q1 & 0x0fu) << 4));
        qh |= ((q0 >> 4) & 1u) << j;
        qh |= ((q1 >> 4) & 1u) << (j + MB_QK / 2);
    }
    mb_store_qh(y->qh, qh);
    if (mb_block_has_nan(x)) {
        y->d = mb_nan_scale();
    }
}

inline void quantize32(thread const float * x, device block_q5_1 * y) {
    float vmin;
    float vmax;
    mb_min_max(x, vmin, vmax);
    const float d = metal::precise::divide(vmax - vmin, 31.0f);
    const float id = mb_inverse_or_zero(d);
    y->d = half(d);
    y->m = half(vmin);
    uint qh = 0;
    for (int j = 0; j < MB_QK / 2; ++j) {
        const float x0 = (x[j] - vmin) * id;
        const float x1 = (x[j + MB_QK / 2] - vmin) * id;
        const uint q0 = uint(mb_truncated_code(x0 + 0.5f, 31));
        const uint q1 = uint(mb_truncated_code(x1 + 0.5f, 31));
        y->qs[j] = uchar((q0 & 0x0fu) | ((q1 & 0x0fu) << 4));
        qh |= ((q0 >> 4) & 1u) << j;
        qh |= ((q1 >> 4) & 1u) << (j + MB_QK / 2);
    }
    mb_store_qh(y->qh, qh);
    if (mb_block_has_nan(x)) {
        y->d = mb_nan_scale();
    }
}

inline void quantize32(thread const float * x, device block_q8_0 * y) {
    // ggml's MAX(a, b) is a > b ? a : b, so a NaN input carries into amax.
    float amax = 0.0f;
    for (int j = 0; j < MB_QK; ++j) {
        const float a = metal::fabs(x[j]);
        amax = amax > a ? amax : a;
    }
    const float d = metal::precise::divide(amax, 127.0f);
    const float id = mb_inverse_or_zero(d);
    y->d = half(d);
    for (int j = 0; j < MB_QK; ++j) {
        y->qs[j] = char(mb_rounded_code(x[j] * id));
    }
    if (mb_block_has_nan(x)) {
        y->d = mb_nan_scale();
    }
}

// ---------------------------------------------------------------- rows of any type

// 16 values of a packed row from element k (a multiple of 16) on, as f32: plain types read up to
// element K and give 0 past it; blocks always hold whole halves (K is a multiple of 32).
template <typename T>
inline void load16(device const T * p, int k, int K, thread float * out) {
    if (k + 16 <= K) {
        for (int j = 0; j < 16; ++j) {
            out[j] = mb_to_float(p[k + j]);
        }
    } else {
        for (int j = 0; j < 16; ++j) {
            out[j] = k + j < K ? mb_to_float(p[k + j]) : 0.0f;
        }
    }
}

inline void load16(device const block_q4_0 * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK, (k / 16) % 2, out);
}

inline void load16(device const block_q4_1 * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK, (k / 16) % 2, out);
}

inline void load16(device const block_q5_0 * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK, (k / 16) % 2, out);
}

inline void load16(device const block_q5_1 * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK, (k / 16) % 2, out);
}

inline void load16(device const block_q8_0 * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK, (k / 16) % 2, out);
}

// f32 stored as a plain type.
inline void mb_store(device float * p, float v) {
    *p = v;
}

inline void mb_store(device half * p, float v) {
    *p = half(v);
}

inline void mb_store(device mb_bf16 * p, float v) {
    *p = mb_bf16_from_float(v);
}

inline void mb_store(device int * p, float v) {
    *p = mb_int_from_float(v);
}
