// SIMD forms of the table types' dot products (vec_dot_k.h's vec_dot_table_fn: iq4_nl and mxfp4
// against BlockQ8Act activations, iq4_xs against q8_K on NEON; x86's iq4_xs kernel is
// vec_dot_k_avx2.h's, which weights the sub-blocks in vpmaddwd): AVX2 with AVX2's, AVX-VNNI's or
// AVX512-VNNI's byte dot product (int8_dot_x86.h, whichever byte_dot_in_use() names), and NEON. The
// 32 codes of a block are looked up in the 16-entry table with one byte shuffle (vpshufb, tbl); the
// table values times the activation codes are summed exactly in int32 (|table| <= 127 and |code| <=
// 128, so no pair of products saturates an int16), and each block's sum then goes through the
// portable kernel's fused multiply-adds (iq4_xs: one chain in block order; iq4_nl and mxfp4: block i
// into accumulator i % 8, eight blocks per vector here, then table_acc_sum's fixed tree): every
// instruction set gives the portable kernel's bits. On x86, iq4_nl and mxfp4 also have four-row mat-vec
// tiles (vec_dot.h's VecDotRowsFn; iq4_xs's is vec_dot_k_avx2.h's) with the same bits.
#pragma once

#include "core/types.h"
#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"
#include "cpu/kernels/vec_dot_k.h"

namespace mb {

// The kernel for t (iq4_nl, mxfp4; iq4_xs on NEON) for the instruction set in use; nullptr for other types
// or where neither AVX2 nor NEON is in use (the portable kernels run there).
VecDotKFn vec_dot_table_simd_fn(Type t);

// Four rows at once (vec_dot.h's VecDotRowsFn) for iq4_nl and mxfp4 weights on x86 (AVX2, FMA and
// F16C), each row and token with the bits of vec_dot_table_simd_fn's kernel, the byte dot products in
// the form in use (simd.h's byte_dot_in_use) or the one given (the CPU must have it: tests and
// benchmarks compare them); nullptr for other types, on other CPUs and in other builds.
VecDotRowsFn vec_dot_table_rows_fn(Type t);
VecDotRowsFn vec_dot_table_rows_fn(Type t, ByteDot form);

}  // namespace mb
