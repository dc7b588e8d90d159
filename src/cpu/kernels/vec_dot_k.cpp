// Each weight super-block is read as: 256 unsigned codes u (element order), 16 integer scales, one
// per 16 elements (the 32-element sub-blocks of q4_K and q5_K give both halves the same one), a zero
// point z that every code has taken off (q3_K 4, q6_K 32, else 0), and for q2_K q4_K q5_K 16 integer
// minimums. With the activation codes y, their sums per 16 (bsums) and scale dy:
//   dot = d*dy * sum_s sc[s] * (sum_l u*y - z * bsum[s])  -  dmin*dy * sum_s mn[s] * bsum[s]
// The sums are exact int32 (bounded well below 2^31 by the code and scale widths); the two float
// terms are added with std::fma in this order on every path.
#include "cpu/kernels/vec_dot_k.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/errors.h"
#include "core/fp16.h"
#include "core/quants_k.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"
#include "cpu/kernels/vec_dot_grid.h"
#include "cpu/kernels/vec_dot_k_avx2.h"
#include "cpu/kernels/vec_dot_table_simd.h"

namespace mb {

namespace {

constexpr int kQK = MB_QK_K;

struct KScales {
    int32_t sc[16];
    int32_t mn[16];
    float d;
    float dmin;
};

// ---- per-type reading of a super-block: scales (shared by both paths) and codes (portable)

inline void scales_of(const block_q2_K& b, KScales& s) {
    for (int j = 0; j < 16; ++j) {
        s.sc[j] = b.scales[j] & 0xF;
        s.mn[j] = b.scales[j] >> 4;
    }
    s.d = fp16_to_fp32(b.d);
    s.dmin = fp16_to_fp32(b.dmin);
}

inline void scales_of(const block_q3_K& b, KScales& s) {
    for (int j = 0; j < 16; ++j) {
        s.sc[j] = mb_qb_k3_scale(j, b.scales) - 32;
        s.mn[j] = 0;
    }
    s.d = fp16_to_fp32(b.d);
    s.dmin = 0.0f;
}

template <class Block>
inline void scales_of_k4(const Block& b, KScales& s) {
    for (int j = 0; j < 8; ++j) {
        uint8_t sc;
        uint8_t mn;
        mb_qb_k4_scale_min(j, b.scales, &sc, &mn);
        s.sc[2 * j] = s.sc[2 * j + 1] = sc;
        s.mn[2 * j] = s.mn[2 * j + 1] = mn;
    }
    s.d = fp16_to_fp32(b.d);
    s.dmin = fp16_to_fp32(b.dmin);
}

inline void scales_of(const block_q4_K& b, KScales& s) { scales_of_k4(b, s); }
inline void scales_of(const block_q5_K& b, KScales& s) { scales_of_k4(b, s); }

inline void scales_of(const block_q6_K& b, KScales& s) {
    for (int j = 0; j < 16; ++j) {
        s.sc[j] = b.scales[j];
        s.mn[j] = 0;
    }
    s.d = fp16_to_fp32(b.d);
    s.dmin = 0.0f;
}

template <class Block> constexpr int kZero = 0;
template <> constexpr int kZero<block_q3_K> = 4;
template <> constexpr int kZero<block_q6_K> = 32;
template <class Block> constexpr bool kHasMin = true;
template <> constexpr bool kHasMin<block_q3_K> = false;
template <> constexpr bool kHasMin<block_q6_K> = false;

// Codes of element e = 128h + 32c + l (groups of 32 as the layouts put them, quant_blocks.h).
inline void codes_of(const block_q2_K& b, uint8_t* u) {
    for (int e = 0; e < kQK; ++e) u[e] = uint8_t((b.qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3);
}

inline void codes_of(const block_q3_K& b, uint8_t* u) {
    for (int e = 0; e < kQK; ++e) {
        const int h = e / 128, c = (e / 32) % 4, l = e % 32;
        const int q = (b.qs[32 * h + l] >> (2 * c)) & 3;
        u[e] = uint8_t(q | (((b.hmask[l] >> (4 * h + c)) & 1) << 2));
    }
}

inline void codes_of(const block_q4_K& b, uint8_t* u) {
    for (int e = 0; e < kQK; ++e) u[e] = uint8_t((b.qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF);
}

inline void codes_of(const block_q5_K& b, uint8_t* u) {
    for (int e = 0; e < kQK; ++e) {
        const int lo = (b.qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF;
        u[e] = uint8_t(lo | (((b.qh[e % 32] >> (e / 32)) & 1) << 4));
    }
}

inline void codes_of(const block_q6_K& b, uint8_t* u) {
    for (int e = 0; e < kQK; ++e) {
        const int h = e / 128, c = (e / 32) % 4, l = e % 32;
        const uint8_t lo = b.ql[64 * h + l + 32 * (c & 1)];
        const int low4 = c < 2 ? (lo & 0xF) : (lo >> 4);
        u[e] = uint8_t(low4 | (((b.qh[32 * h + l] >> (2 * c)) & 3) << 4));
    }
}

// The float part (k_block_add, the same on every path).
template <class Block>
inline float add_block(float acc, const KScales& s, const block_q8_K& y, int32_t isum) {
    int32_t zsum = 0;
    int32_t msum = 0;
    for (int j = 0; j < 16; ++j) {
        zsum += s.sc[j] * y.bsums[j];
        msum += s.mn[j] * y.bsums[j];
    }
    return k_block_add(acc, s.d, s.dmin, y.d, isum - kZero<Block> * zsum, msum, kHasMin<Block>);
}

template <class Block>
float dot_k_portable(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const Block*>(va);
    const auto* b = static_cast<const block_q8_K*>(vb);
    float acc = 0.0f;
    for (int64_t i = 0; i < k / kQK; ++i) {
        KScales s;
        scales_of(a[i], s);
        uint8_t u[kQK];
        codes_of(a[i], u);
        int32_t isum = 0;
        for (int j = 0; j < 16; ++j) {
            int32_t part = 0;
            for (int l = 0; l < 16; ++l) part += int32_t(u[16 * j + l]) * b[i].qs[16 * j + l];
            isum += s.sc[j] * part;
        }
        acc = add_block<Block>(acc, s, b[i], isum);
    }
    return acc;
}

// ---- the table types

inline int32_t table_dot32(const uint8_t* qs, const int8_t* table, const int8_t* y) {
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) {
        s += int32_t(table[qs[j] & 0xF]) * y[j] + int32_t(table[qs[j] >> 4]) * y[j + 16];
    }
    return s;
}

inline float block_scale(const block_iq4_nl& b) { return fp16_to_fp32(b.d); }
inline float block_scale(const block_mxfp4& b) { return mb_qb_e8m0_half(b.e); }
inline const int8_t* table_of(const block_iq4_nl&) { return mb_kvalues_iq4nl; }
inline const int8_t* table_of(const block_mxfp4&) { return mb_kvalues_mxfp4; }

// Block i goes to accumulator i % 8 (so the SIMD kernels can add eight blocks in one vector), then
// the eight are added in a fixed tree (vec_dot_table_simd.h).
template <class Block>
float dot_table32(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const Block*>(va);
    const auto* b = static_cast<const BlockQ8Act*>(vb);
    float acc[8] = {};
    for (int64_t i = 0; i < k / MB_QK; ++i) {
        acc[i % 8] = std::fma(block_scale(a[i]) * b[i].d, float(table_dot32(a[i].qs, table_of(a[i]), b[i].qs)),
                              acc[i % 8]);
    }
    return table_acc_sum(acc);
}

float dot_iq4_xs(int64_t k, const void* va, const void* vb) {
    const auto* a = static_cast<const block_iq4_xs*>(va);
    const auto* b = static_cast<const block_q8_K*>(vb);
    float acc = 0.0f;
    for (int64_t i = 0; i < k / kQK; ++i) {
        int32_t isum = 0;
        for (int s = 0; s < kQK / 32; ++s) {
            const int32_t ls = mb_qb_iq4xs_scale(s, a[i].scales_h, a[i].scales_l) - 32;
            isum += ls * table_dot32(a[i].qs + 16 * s, mb_kvalues_iq4nl, b[i].qs + 32 * s);
        }
        acc = std::fma(fp16_to_fp32(a[i].d) * b[i].d, float(isum), acc);
    }
    return acc;
}

}  // namespace

VecDotKFn vec_dot_table_portable_fn(Type t) {
    switch (t) {
        case Type::IQ4_NL: return dot_table32<block_iq4_nl>;
        case Type::MXFP4: return dot_table32<block_mxfp4>;
        case Type::IQ4_XS: return dot_iq4_xs;
        default: return nullptr;
    }
}

VecDotKFn vec_dot_table_fn(Type t) {
    if (VecDotKFn f = vec_dot_table_simd_fn(t)) return f;  // the same bits, faster
    return vec_dot_table_portable_fn(t);
}

bool is_k_quant(Type t) {
    if (type_traits(t).is_grid) return true;  // the grid types are paired with q8_K activations too
    switch (t) {
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
        case Type::IQ4_XS:  // also paired with q8_K activations
            return true;
        default:
            return false;
    }
}

void quantize_row_q8_K_act(const float* x, block_q8_K* y, int64_t k) {
    for (int64_t i = 0; i < k / kQK; ++i) {
        const float* xb = x + i * kQK;
#if defined(MB_SIMD_X86)
        if (cpu_has_avx2_fma_f16c() && quantize_q8_K_act_block_avx2(xb, y + i)) continue;
#endif
        quantize_q8_K(xb, y + i, 1);
        bool finite = true;
        for (int j = 0; j < kQK; ++j) finite = finite && std::isfinite(xb[j]);
        if (!finite) y[i].d = std::nanf("");
    }
}

VecDotKFn vec_dot_k_portable_fn(Type t) {
    if (VecDotKFn f = vec_dot_table_portable_fn(t)) return f;
    if (VecDotKFn f = vec_dot_grid_fn(t)) return f;
    switch (t) {
        case Type::Q2_K: return dot_k_portable<block_q2_K>;
        case Type::Q3_K: return dot_k_portable<block_q3_K>;
        case Type::Q4_K: return dot_k_portable<block_q4_K>;
        case Type::Q5_K: return dot_k_portable<block_q5_K>;
        case Type::Q6_K: return dot_k_portable<block_q6_K>;
        default: break;
    }
    fail<UnsupportedOpError>("vec_dot_k_fn", "no q8_K dot product for ", type_traits(t).name, " weights");
}

VecDotKFn vec_dot_k_fn(Type t) {
#if defined(MB_SIMD_X86)
    if (cpu_has_avx2_fma_f16c()) {
        if (VecDotKFn f = vec_dot_k_avx2_fn(t)) return f;  // q2_K .. q6_K and iq4_xs
    }
#endif
    if (VecDotKFn f = vec_dot_table_fn(t)) return f;
    if (VecDotKFn f = vec_dot_grid_fn(t)) return f;
    return vec_dot_k_portable_fn(t);
}

}  // namespace mb
