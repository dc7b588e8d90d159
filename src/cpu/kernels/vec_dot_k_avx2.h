// The AVX2 dot products of k-quant weight rows (q2_K .. q6_K) with q8_K activation rows
// (vec_dot_k.h): the same exact int32 sums per super-block as the portable kernel, computed in
// vector lanes, then the same float part (k_block_add), so every path gives the same bits.
#pragma once

#include "core/types.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"
#include "cpu/kernels/vec_dot_k.h"

namespace mb {

// The AVX2 kernel for weights of type t (call it only where cpu_has_avx2_fma_f16c() holds); nullptr
// for types other than q2_K .. q6_K, or in a build without the x86 SIMD paths.
VecDotKFn vec_dot_k_avx2_fn(Type t);

// Four rows at once (vec_dot.h's VecDotRowsFn), each with the bits vec_dot_k_avx2_fn's kernel gives,
// the scaled pairs summed with the byte-dot form in use (simd.h's byte_dot_in_use: vpmaddwd and vpaddd,
// or VNNI's vpdpwssd, which gives the same lanes in one instruction).
VecDotRowsFn vec_dot_k_rows_avx2_fn(Type t);

// The same with the given form (the CPU must have it: benchmarks/kquant_kernels.cpp compares them).
VecDotRowsFn vec_dot_k_rows_avx2_fn(Type t, ByteDot form);

// quantize_q8_K of one 256-value block, the same bytes, for a finite block with a finite nonzero
// scale; false (y untouched) for any other block, which the caller quantizes the scalar way.
bool quantize_q8_K_act_block_avx2(const float* x, block_q8_K* y);

}  // namespace mb
