// ggml's grid types: one decoder per type from a sub-block of 32 values to signed grid values and
// integer scales (GridGroup), used by dequantizing here and by the CPU dot products
// (cpu/kernels/vec_dot_grid.cpp). Layouts: shaders/quant_blocks.h; grids: shaders/iq_grids.h.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "core/quants_grid.h"

#include <cstdint>
#include <cstring>

#include "core/errors.h"
#include "core/fp16.h"
#include "iq_grids.h"

namespace mb {

namespace {

constexpr int kQK = MB_QK_K;

inline uint32_t u32_of(const uint16_t* p) { return uint32_t(p[0]) | (uint32_t(p[1]) << 16); }
inline uint32_t u32_of(const uint8_t* p) {
    return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// Element j of a grid row (byte j).
inline int grid_byte(uint64_t row, int j) { return int(int8_t(uint8_t(row >> (8 * j)))); }

// Eight values of grid row `row` (8 wide) into q with the signs of sign byte s (bit j negates value j).
inline void put8(int8_t* q, uint64_t row, uint32_t s) {
    for (int j = 0; j < 8; ++j) {
        const int v = grid_byte(row, j);
        q[j] = int8_t((s >> j) & 1u ? -v : v);
    }
}

// Four values of a 4-wide grid row with sign bits s (bit j negates value j).
inline void put4(int8_t* q, uint32_t row, uint32_t s) {
    for (int j = 0; j < 4; ++j) {
        const int v = int((row >> (8 * j)) & 0xFF);
        q[j] = int8_t((s >> j) & 1u ? -v : v);
    }
}

float group_iq2_xxs(const block_iq2_xxs& b, int ib, GridGroup& g) {
    const uint32_t codes = u32_of(b.qs + 4 * ib);
    const uint32_t aux = u32_of(b.qs + 4 * ib + 2);
    for (int l = 0; l < 4; ++l) {
        put8(g.q + 8 * l, mb_iq2xxs_grid[(codes >> (8 * l)) & 0xFF], mb_ksigns_iq2xs[(aux >> (7 * l)) & 127]);
    }
    g.ls[0] = g.ls[1] = int32_t(2 * (aux >> 28) + 1);
    return fp16_to_fp32(b.d);
}

float group_iq2_xs(const block_iq2_xs& b, int ib, GridGroup& g) {
    for (int l = 0; l < 4; ++l) {
        const uint16_t c = b.qs[4 * ib + l];
        put8(g.q + 8 * l, mb_iq2xs_grid[c & 511], mb_ksigns_iq2xs[c >> 9]);
    }
    g.ls[0] = 2 * (b.scales[ib] & 0xF) + 1;
    g.ls[1] = 2 * (b.scales[ib] >> 4) + 1;
    return fp16_to_fp32(b.d);
}

float group_iq2_s(const block_iq2_s& b, int ib, GridGroup& g) {
    const uint8_t* signs = b.qs + kQK / 8;
    for (int l = 0; l < 4; ++l) {
        const int code = b.qs[4 * ib + l] | (((b.qh[ib] >> (2 * l)) & 3) << 8);
        put8(g.q + 8 * l, mb_iq2s_grid[code], signs[4 * ib + l]);
    }
    g.ls[0] = 2 * (b.scales[ib] & 0xF) + 1;
    g.ls[1] = 2 * (b.scales[ib] >> 4) + 1;
    return fp16_to_fp32(b.d);
}

float group_iq3_xxs(const block_iq3_xxs& b, int ib, GridGroup& g) {
    const uint8_t* codes = b.qs + 8 * ib;
    const uint32_t aux = u32_of(b.qs + kQK / 4 + 4 * ib);
    for (int l = 0; l < 4; ++l) {
        const uint32_t s = mb_ksigns_iq2xs[(aux >> (7 * l)) & 127];
        put4(g.q + 8 * l, mb_iq3xxs_grid[codes[2 * l]], s);
        put4(g.q + 8 * l + 4, mb_iq3xxs_grid[codes[2 * l + 1]], s >> 4);
    }
    g.ls[0] = g.ls[1] = int32_t(2 * (aux >> 28) + 1);
    return fp16_to_fp32(b.d);
}

float group_iq3_s(const block_iq3_s& b, int ib, GridGroup& g) {
    const uint8_t* codes = b.qs + 8 * ib;
    for (int l = 0; l < 4; ++l) {
        const uint32_t s = b.signs[4 * ib + l];
        const int c0 = codes[2 * l] | (((b.qh[ib] >> (2 * l)) & 1) << 8);
        const int c1 = codes[2 * l + 1] | (((b.qh[ib] >> (2 * l + 1)) & 1) << 8);
        put4(g.q + 8 * l, mb_iq3s_grid[c0], s);
        put4(g.q + 8 * l + 4, mb_iq3s_grid[c1], s >> 4);
    }
    const int sc = (b.scales[ib / 2] >> (4 * (ib % 2))) & 0xF;
    g.ls[0] = g.ls[1] = 2 * sc + 1;
    return fp16_to_fp32(b.d);
}

float group_iq1_s(const block_iq1_s& b, int ib, GridGroup& g) {
    const uint16_t qh = b.qh[ib];
    for (int l = 0; l < 4; ++l) {
        put8(g.q + 8 * l, mb_iq1s_grid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)], 0);
        g.neg[l] = (qh & 0x8000) != 0;
    }
    g.ls[0] = g.ls[1] = 2 * ((qh >> 12) & 7) + 1;
    return fp16_to_fp32(b.d);
}

float group_iq1_m(const block_iq1_m& b, int ib, GridGroup& g) {
    for (int l = 0; l < 4; ++l) {
        const int h = b.qh[2 * ib + l / 2] >> (4 * (l % 2));
        put8(g.q + 8 * l, mb_iq1s_grid[b.qs[4 * ib + l] | ((h & 7) << 8)], 0);
        g.neg[l] = (h & 8) != 0;
    }
    g.ls[0] = 2 * mb_qb_iq1m_sub_scale(2 * ib, b.scales) + 1;
    g.ls[1] = 2 * mb_qb_iq1m_sub_scale(2 * ib + 1, b.scales) + 1;
    return fp16_to_fp32(mb_qb_iq1m_scale_bits(b.scales));
}

}  // namespace

const char* grid_type_quantize_refusal(Type t) {
    switch (t) {
        case Type::IQ2_XXS:
        case Type::IQ2_XS:
        case Type::IQ1_S:
        case Type::IQ1_M:
            return "ggml quantizes to it only with an importance matrix (a per-column weighting from "
                   "calibration data), which mb.quantize does not take; quantize with llama.cpp's "
                   "llama-quantize --imatrix and load the GGUF file";
        default:
            return "ggml's quantizer for it is a search over the grid's neighbour tables that mb does not "
                   "implement; quantize with ggml (ggml_quantize_chunk or llama-quantize) and load the GGUF "
                   "file";
    }
}

float grid_scale_factor(Type t) {
    switch (t) {
        case Type::IQ2_XXS:
        case Type::IQ2_XS:
        case Type::IQ2_S:
            return 0.125f;
        case Type::IQ3_XXS:
            return 0.25f;
        default:
            return 1.0f;
    }
}

float grid_group(Type t, const void* block, int ib, GridGroup& g) {
    switch (t) {
        case Type::IQ2_XXS: return group_iq2_xxs(*static_cast<const block_iq2_xxs*>(block), ib, g);
        case Type::IQ2_XS: return group_iq2_xs(*static_cast<const block_iq2_xs*>(block), ib, g);
        case Type::IQ2_S: return group_iq2_s(*static_cast<const block_iq2_s*>(block), ib, g);
        case Type::IQ3_XXS: return group_iq3_xxs(*static_cast<const block_iq3_xxs*>(block), ib, g);
        case Type::IQ3_S: return group_iq3_s(*static_cast<const block_iq3_s*>(block), ib, g);
        case Type::IQ1_S: return group_iq1_s(*static_cast<const block_iq1_s*>(block), ib, g);
        case Type::IQ1_M: return group_iq1_m(*static_cast<const block_iq1_m*>(block), ib, g);
        default: fail<InvalidArgumentError>("grid_group", type_traits(t).name, " is not a grid type");
    }
}

void dequantize_grid(Type t, const void* x, float* y, int64_t nb) {
    const size_t size = type_traits(t).type_size;
    const bool iq1 = t == Type::IQ1_S || t == Type::IQ1_M;
    const float factor = grid_scale_factor(t);
    GridGroup g{};
    for (int64_t i = 0; i < nb; ++i) {
        const void* block = static_cast<const uint8_t*>(x) + size_t(i) * size;
        for (int ib = 0; ib < kQK / 32; ++ib, y += 32) {
            const float d = grid_group(t, block, ib, g);
            for (int j = 0; j < 32; ++j) {
                const int32_t ls = g.ls[j / 16];
                if (iq1) {
                    // gguf-py's and ggml's order: (d * ls) * (grid + delta).
                    const float delta = g.neg[j / 8] ? -MB_IQ1S_DELTA : MB_IQ1S_DELTA;
                    y[j] = (d * float(ls)) * (float(g.q[j]) + delta);
                } else {
                    // Every factor is exact in f32 (11-bit d, small integers), so any order gives
                    // gguf-py's d * (0.5 + s) * 0.25 * grid * sign.
                    y[j] = (d * factor) * float(ls * int32_t(g.q[j]));
                }
            }
        }
    }
}

}  // namespace mb
