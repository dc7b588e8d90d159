// Device-side view of ggml's element types: the quantized blocks and their quantizers (quant_blocks.h,
// shared with the host), bf16 as raw bits, conversions to f32 per element or per 16 values of a block,
// and one block quantized per thread.
//
// Element j < 16 of a block is the low nibble of qs[j] and element j + 16 its high nibble; "half" il
// of a block is its elements [16*il, 16*il + 16). bf16 is handled as bits, so these kernels need no
// bfloat support from the compiler.
// Include after <metal_stdlib>.
#pragma once

#include "quant_blocks.h"
#include "iq_grids.h"

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
        out[j] = float(int((b->qs[j] >> shift) & 0x0f) - MB_QB_ZERO_Q4_0) * d;
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
        out[j] = float(q - MB_QB_ZERO_Q5_0) * d;
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

// The k-quants: group il (0..15) of a super-block is its elements [16*il, 16*il + 16); the element
// layouts are quant_blocks.h's. The small scales are copied to thread memory for the shared helpers.
inline void dequantize16(device const block_q2_K * b, int il, thread float * out) {
    const uchar sc = b->scales[il];
    const float dl = float(b->d) * float(sc & 0xF);
    const float ml = float(b->dmin) * float(sc >> 4);
    const int shift = 2 * ((il / 2) % 4);
    device const uchar * q = b->qs + 32 * (il / 8) + 16 * (il % 2);
    for (int j = 0; j < 16; ++j) {
        out[j] = dl * float((q[j] >> shift) & 3) - ml;
    }
}

inline void dequantize16(device const block_q3_K * b, int il, thread float * out) {
    uchar s[MB_K_SCALE_SIZE];
    for (int j = 0; j < MB_K_SCALE_SIZE; ++j) {
        s[j] = b->scales[j];
    }
    const float dl = float(b->d) * float(mb_qb_k3_scale(il, s) - 32);
    const int c = (il / 2) % 4;
    const int hbit = 4 * (il / 8) + c;
    const int l0 = 16 * (il % 2);
    device const uchar * q = b->qs + 32 * (il / 8) + l0;
    for (int j = 0; j < 16; ++j) {
        const int high = (b->hmask[l0 + j] >> hbit) & 1;
        out[j] = dl * float(int((q[j] >> (2 * c)) & 3) - (high ? 0 : 4));
    }
}

// q4_K, and q5_K with its fifth bits qh.
template <typename B>
inline void dequantize16_k4(device const B * b, device const uchar * qh, int il, thread float * out) {
    uchar s[MB_K_SCALE_SIZE];
    for (int j = 0; j < MB_K_SCALE_SIZE; ++j) {
        s[j] = b->scales[j];
    }
    const int sub = il / 2;
    uchar sc;
    uchar mn;
    mb_qb_k4_scale_min(sub, s, &sc, &mn);
    const float d1 = float(b->d) * float(sc);
    const float m1 = float(b->dmin) * float(mn);
    const int shift = 4 * (sub % 2);
    const int l0 = 16 * (il % 2);
    device const uchar * q = b->qs + 32 * (sub / 2) + l0;
    for (int j = 0; j < 16; ++j) {
        int v = (q[j] >> shift) & 0xF;
        if (qh != nullptr) {
            v |= ((qh[l0 + j] >> sub) & 1) << 4;
        }
        out[j] = d1 * float(v) - m1;
    }
}

inline void dequantize16(device const block_q4_K * b, int il, thread float * out) {
    dequantize16_k4(b, nullptr, il, out);
}

inline void dequantize16(device const block_q5_K * b, int il, thread float * out) {
    dequantize16_k4(b, b->qh, il, out);
}

inline void dequantize16(device const block_q6_K * b, int il, thread float * out) {
    const float dl = float(b->d) * float(b->scales[il]);
    const int h = il / 8;
    const int c = (il / 2) % 4;
    const int l0 = 16 * (il % 2);
    device const uchar * ql = b->ql + 64 * h + 32 * (c & 1) + l0;
    device const uchar * qh = b->qh + 32 * h + l0;
    for (int j = 0; j < 16; ++j) {
        const int lo = c < 2 ? (ql[j] & 0xF) : (ql[j] >> 4);
        const int q = lo | (((qh[j] >> (2 * c)) & 3) << 4);
        out[j] = dl * float(q - 32);
    }
}

// The table types: half il of an iq4_nl / mxfp4 block, group il (0..15) of an iq4_xs block.
inline void dequantize16(device const block_iq4_nl * b, int il, thread float * out) {
    const float d = float(b->d);
    const int shift = il * 4;
    for (int j = 0; j < 16; ++j) {
        out[j] = d * float(mb_kvalues_iq4nl[(b->qs[j] >> shift) & 0x0f]);
    }
}

inline void dequantize16(device const block_mxfp4 * b, int il, thread float * out) {
    const float d = mb_qb_e8m0_half(b->e);
    const int shift = il * 4;
    for (int j = 0; j < 16; ++j) {
        out[j] = float(mb_kvalues_mxfp4[(b->qs[j] >> shift) & 0x0f]) * d;
    }
}

inline void dequantize16(device const block_iq4_xs * b, int il, thread float * out) {
    const int sub = il / 2;
    uchar sl[MB_QK_K / 64];
    for (int j = 0; j < MB_QK_K / 64; ++j) {
        sl[j] = b->scales_l[j];
    }
    const float dl = float(b->d) * float(mb_qb_iq4xs_scale(sub, uint(b->scales_h), sl) - 32);
    device const uchar * qs = b->qs + 16 * sub;
    const int shift = 4 * (il % 2);
    for (int j = 0; j < 16; ++j) {
        out[j] = dl * float(mb_kvalues_iq4nl[(qs[j] >> shift) & 0x0f]);
    }
}

// The grid types (iq_grids.h): group il (0..15) of a super-block is its values [16 il, 16 il + 16),
// two rows of 8 grid values (or four of 4). Each value is an exact f32 product, so any order of the
// factors gives ggml's (and gguf-py's) bits.
inline void mb_grid8(ulong row, uint signs, float db, thread float * out) {
    for (int j = 0; j < 8; ++j) {
        const float v = float(uint(row >> (8 * j)) & 0xFFu);
        out[j] = db * ((signs >> j) & 1u ? -v : v);
    }
}

inline void mb_grid4(uint row, uint signs, float db, thread float * out) {
    for (int j = 0; j < 4; ++j) {
        const float v = float((row >> (8 * j)) & 0xFFu);
        out[j] = db * ((signs >> j) & 1u ? -v : v);
    }
}

// The -1/0/1 grid of the iq1 types, plus delta, times dl.
inline void mb_grid8_iq1(ulong row, float dl, float delta, thread float * out) {
    for (int j = 0; j < 8; ++j) {
        const int v = int(uint(row >> (8 * j)) & 0xFFu);
        out[j] = dl * (float(v > 127 ? v - 256 : v) + delta);
    }
}

inline void dequantize16(device const block_iq2_xxs * b, int il, thread float * out) {
    const int ib = il / 2;
    device const ushort * q = b->qs + 4 * ib;
    const uint codes = uint(q[0]) | (uint(q[1]) << 16);
    const uint aux = uint(q[2]) | (uint(q[3]) << 16);
    const float db = float(b->d) * (0.5f + float(aux >> 28)) * 0.25f;
    for (int e = 0; e < 2; ++e) {
        const int l = 2 * (il % 2) + e;
        mb_grid8(mb_iq2xxs_grid[(codes >> (8 * l)) & 0xFFu], mb_ksigns_iq2xs[(aux >> (7 * l)) & 127u], db,
                 out + 8 * e);
    }
}

inline void dequantize16(device const block_iq2_xs * b, int il, thread float * out) {
    const int ib = il / 2;
    const uint sc = (uint(b->scales[ib]) >> (4 * (il % 2))) & 0xFu;
    const float db = float(b->d) * (0.5f + float(sc)) * 0.25f;
    for (int e = 0; e < 2; ++e) {
        const uint c = b->qs[4 * ib + 2 * (il % 2) + e];
        mb_grid8(mb_iq2xs_grid[c & 511u], mb_ksigns_iq2xs[c >> 9], db, out + 8 * e);
    }
}

inline void dequantize16(device const block_iq2_s * b, int il, thread float * out) {
    const int ib = il / 2;
    const uint sc = (uint(b->scales[ib]) >> (4 * (il % 2))) & 0xFu;
    const float db = float(b->d) * (0.5f + float(sc)) * 0.25f;
    for (int e = 0; e < 2; ++e) {
        const int l = 2 * (il % 2) + e;
        const uint code = uint(b->qs[4 * ib + l]) | (((uint(b->qh[ib]) >> (2 * l)) & 3u) << 8);
        mb_grid8(mb_iq2s_grid[code], b->qs[MB_QK_K / 8 + 4 * ib + l], db, out + 8 * e);
    }
}

inline void dequantize16(device const block_iq3_xxs * b, int il, thread float * out) {
    const int ib = il / 2;
    device const uchar * ss = b->qs + MB_QK_K / 4 + 4 * ib;
    const uint aux = uint(ss[0]) | (uint(ss[1]) << 8) | (uint(ss[2]) << 16) | (uint(ss[3]) << 24);
    const float db = float(b->d) * (0.5f + float(aux >> 28)) * 0.5f;
    for (int e = 0; e < 2; ++e) {
        const int l = 2 * (il % 2) + e;
        const uint s = mb_ksigns_iq2xs[(aux >> (7 * l)) & 127u];
        mb_grid4(mb_iq3xxs_grid[b->qs[8 * ib + 2 * l]], s, db, out + 8 * e);
        mb_grid4(mb_iq3xxs_grid[b->qs[8 * ib + 2 * l + 1]], s >> 4, db, out + 8 * e + 4);
    }
}

inline void dequantize16(device const block_iq3_s * b, int il, thread float * out) {
    const int ib = il / 2;
    const uint sc = (uint(b->scales[ib / 2]) >> (4 * (ib % 2))) & 0xFu;
    const float db = float(b->d) * float(1u + 2u * sc);
    const uint qh = b->qh[ib];
    for (int e = 0; e < 2; ++e) {
        const int l = 2 * (il % 2) + e;
        const uint s = b->signs[4 * ib + l];
        const uint c0 = uint(b->qs[8 * ib + 2 * l]) | (((qh >> (2 * l)) & 1u) << 8);
        const uint c1 = uint(b->qs[8 * ib + 2 * l + 1]) | (((qh >> (2 * l + 1)) & 1u) << 8);
        mb_grid4(mb_iq3s_grid[c0], s, db, out + 8 * e);
        mb_grid4(mb_iq3s_grid[c1], s >> 4, db, out + 8 * e + 4);
    }
}

inline void dequantize16(device const block_iq1_s * b, int il, thread float * out) {
    const int ib = il / 2;
    const uint qh = b->qh[ib];
    const float dl = float(b->d) * float(2u * ((qh >> 12) & 7u) + 1u);
    const float delta = (qh & 0x8000u) != 0 ? -MB_IQ1S_DELTA : MB_IQ1S_DELTA;
    for (int e = 0; e < 2; ++e) {
        const int l = 2 * (il % 2) + e;
        const uint code = uint(b->qs[4 * ib + l]) | (((qh >> (3 * l)) & 7u) << 8);
        mb_grid8_iq1(mb_iq1s_grid[code], dl, delta, out + 8 * e);
    }
}

inline void dequantize16(device const block_iq1_m * b, int il, thread float * out) {
    uchar sc[MB_QK_K / 32];
    for (int j = 0; j < MB_QK_K / 32; ++j) {
        sc[j] = b->scales[j];
    }
    const float d = float(metal::as_type<half>(mb_qb_iq1m_scale_bits(sc)));
    const float dl = d * float(2 * mb_qb_iq1m_sub_scale(il, sc) + 1);
    const uint qh = b->qh[il];  // values 16 il .. 16 il + 15: qh[2 ib + il % 2]
    for (int e = 0; e < 2; ++e) {
        const uint h = qh >> (4 * e);
        const float delta = (h & 8u) != 0 ? -MB_IQ1M_DELTA : MB_IQ1M_DELTA;
        const uint code = uint(b->qs[2 * il + e]) | ((h & 7u) << 8);
        mb_grid8_iq1(mb_iq1s_grid[code], dl, delta, out + 8 * e);
    }
}

// ---------------------------------------------------------------- 32 f32 values to one block

// The scale a quantizer found, as stored: a block that held a NaN gets the quiet NaN.
inline half mb_scale(mb_qb_scales s) {
    return s.nan ? metal::as_type<half>(ushort(MB_QB_NAN_SCALE_BITS)) : half(s.d);
}

// Each block is built in thread memory (the shared quantizers take thread pointers) and stored whole.
inline void quantize32(thread const float * x, device block_q4_0 * y) {
    block_q4_0 b;
    b.d = mb_scale(mb_qb_quantize_q4_0(x, b.qs));
    *y = b;
}

inline void quantize32(thread const float * x, device block_q4_1 * y) {
    block_q4_1 b;
    const mb_qb_scales s = mb_qb_quantize_q4_1(x, b.qs);
    b.d = mb_scale(s);
    b.m = half(s.m);
    *y = b;
}

inline void quantize32(thread const float * x, device block_q5_0 * y) {
    block_q5_0 b;
    b.d = mb_scale(mb_qb_quantize_q5_0(x, b.qs, b.qh));
    *y = b;
}

inline void quantize32(thread const float * x, device block_q5_1 * y) {
    block_q5_1 b;
    const mb_qb_scales s = mb_qb_quantize_q5_1(x, b.qs, b.qh);
    b.d = mb_scale(s);
    b.m = half(s.m);
    *y = b;
}

inline void quantize32(thread const float * x, device block_q8_0 * y) {
    block_q8_0 b;
    b.d = mb_scale(mb_qb_quantize_q8_0(x, b.qs));
    *y = b;
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

inline void load16(device const block_q2_K * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline void load16(device const block_q3_K * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline void load16(device const block_q4_K * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline void load16(device const block_q5_K * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline void load16(device const block_q6_K * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline void load16(device const block_iq4_nl * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK, (k / 16) % 2, out);
}

inline void load16(device const block_mxfp4 * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK, (k / 16) % 2, out);
}

inline void load16(device const block_iq4_xs * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline int mb_qk(device const block_iq4_xs * p) {
    return MB_QK_K;
}

inline void load16(device const block_iq2_xxs * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline int mb_qk(device const block_iq2_xxs * p) {
    return MB_QK_K;
}

inline void load16(device const block_iq2_xs * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline int mb_qk(device const block_iq2_xs * p) {
    return MB_QK_K;
}

inline void load16(device const block_iq2_s * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline int mb_qk(device const block_iq2_s * p) {
    return MB_QK_K;
}

inline void load16(device const block_iq3_xxs * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline int mb_qk(device const block_iq3_xxs * p) {
    return MB_QK_K;
}

inline void load16(device const block_iq3_s * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline int mb_qk(device const block_iq3_s * p) {
    return MB_QK_K;
}

inline void load16(device const block_iq1_s * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline int mb_qk(device const block_iq1_s * p) {
    return MB_QK_K;
}

inline void load16(device const block_iq1_m * p, int k, int K, thread float * out) {
    dequantize16(p + k / MB_QK_K, (k / 16) % 16, out);
}

inline int mb_qk(device const block_iq1_m * p) {
    return MB_QK_K;
}

// Values per block of a block type.
template <typename B>
inline int mb_qk(device const B * p) {
    return MB_QK;
}

inline int mb_qk(device const block_q2_K * p) {
    return MB_QK_K;
}

inline int mb_qk(device const block_q3_K * p) {
    return MB_QK_K;
}

inline int mb_qk(device const block_q4_K * p) {
    return MB_QK_K;
}

inline int mb_qk(device const block_q5_K * p) {
    return MB_QK_K;
}

inline int mb_qk(device const block_q6_K * p) {
    return MB_QK_K;
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
