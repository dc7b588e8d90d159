// Dot products of k-quant weight rows (q2_K q3_K q4_K q5_K q6_K) with activation rows quantized to
// q8_K (core/quants_k.h). Per super-block the codes times the activation codes, times the integer
// sub-block scales, are summed exactly in int32 (any order gives the same integer), and only then
// scaled by the float super-block scales, with the same fused multiply-adds on every path: the
// portable and the AVX2 kernels give the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/types.h"

namespace mb {

// Whether t is a weight type whose dot products take q8_K activations (the k-quants and iq4_xs).
bool is_k_quant(Type t);

// One activation row of k floats (k a multiple of 256) as q8_K blocks. A super-block holding a NaN
// or an infinity gets a NaN scale, so the dot product is NaN as float arithmetic would make it
// (quantizing would otherwise turn it into finite codes).
void quantize_row_q8_K_act(const float* x, block_q8_K* y, int64_t k);

using VecDotKFn = float (*)(int64_t k, const void* a, const void* b);

// The float part of one super-block, the same on every path: i = sum_s sc[s] * (codes . y)_s minus
// the zero point times sum_s sc[s] * bsum[s], m = sum_s mn[s] * bsum[s] (used when has_min), d and
// dmin the weight's scales, dy the activation's. Two fused multiply-adds in this order.
inline float k_block_add(float acc, float d, float dmin, float dy, int32_t i, int32_t m, bool has_min) {
    acc = std::fma(d * dy, float(i), acc);
    if (has_min) acc = std::fma(-(dmin * dy), float(m), acc);
    return acc;
}

// The dot product for weights of type t on the instruction set in use now (portable or AVX2).
VecDotKFn vec_dot_k_fn(Type t);
// The portable kernel, whatever the CPU (tests compare the two).
VecDotKFn vec_dot_k_portable_fn(Type t);

// The table types (iq4_nl, mxfp4 with BlockQ8Act activations of vec_dot.h; iq4_xs with q8_K): the
// table values times the activation codes summed in int32 per block, then one fused multiply-add by
// the two scales, in block order. vec_dot_table_fn gives the SIMD kernel in use
// (vec_dot_table_simd.h) or the portable one, which vec_dot_table_portable_fn always gives; every
// path gives the same bits. nullptr for other types.
VecDotKFn vec_dot_table_fn(Type t);
VecDotKFn vec_dot_table_portable_fn(Type t);

// iq4_nl's and mxfp4's eight per-block accumulators (block i into acc[i % 8]) added in one fixed order.
inline float table_acc_sum(const float* acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace mb
