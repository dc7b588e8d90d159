// ggml's grid types (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s) in the layouts of
// shaders/quant_blocks.h, with the grids of shaders/iq_grids.h. Dequantizing computes what ggml's
// dequantize_row_* and gguf-py's dequantizers compute (each value is an exact product, so the two
// agree bit for bit). Quantizing to them is not offered: ggml's quantizers for these are grid searches
// that need an importance matrix (iq1_s, iq1_m, iq2_xxs, iq2_xs) or its neighbour tables
// (quantize_row_*_impl after iq2xs_init_impl / iq3xs_init_impl); grid_type_quantize_refusal says so.
// The group helpers give the signed grid values and the integer scale of 8 or 16 consecutive values,
// shared by dequantizing and the CPU dot products. nb counts super-blocks.
#pragma once

#include <cstdint>

#include "core/types.h"
#include "quant_blocks.h"

namespace mb {

// Whether t is one of the seven grid types: type_traits(t).is_grid.

// Why mb cannot quantize to grid type t (a sentence for the error message).
const char* grid_type_quantize_refusal(Type t);

// Dequantize nb super-blocks of grid type t at x to 256 * nb floats.
void dequantize_grid(Type t, const void* x, float* y, int64_t nb);

// The 32 values ib * 32 .. ib * 32 + 31 of one block as signed small integers q (the grid value times
// its sign) with value = scale * q * mult / div (iq2/iq3: integer sub-scales; per 16 values for
// iq2_xs, iq2_s, iq3_s halves). For the iq1 types q excludes the delta: value = d * s * (q + delta)
// with delta = +-1/8 per 8 (iq1_m) or 32 (iq1_s) values. ls[0], ls[1] are the integer scales of values
// 0..15 and 16..31 (equal where the type has one per 32); neg[h] (iq1 types) whether the delta of
// values 8h..8h+7 is negative.
struct GridGroup {
    int8_t q[32];
    int32_t ls[2];
    bool neg[4];
};

// d times this is the f32 scale multiplying ls * q (0.125 for iq2 types, 0.25 for iq3_xxs, 1 for
// iq3_s and the iq1 types).
float grid_scale_factor(Type t);

// Sub-block ib (0..7) of block x of type t; returns the block's f32 scale d (f16 converted).
float grid_group(Type t, const void* block, int ib, GridGroup& g);

}  // namespace mb
