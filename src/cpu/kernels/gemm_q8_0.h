// The int8 GEMM: many tokens of 8-bit activations (BlockQ8Act) against q8_0 weight rows, for the
// int8 compute type's many-token products (mul_mat.cpp).
//
// Arithmetic (every path, so results are bit for bit the same under every instruction-set cap):
//   per weight row r and token t, acc = 0, then for each block i in order
//     acc = fma(float(dot_i), d_i * D_i, acc)
//   dot_i: the block's 32 code products summed exactly in integers; d_i: the weight block's scale (f16
//   as float), D_i: the activation block's; d_i * D_i rounded to float first.
// This is not the matrix-vector kernels' order (int8_dot_x86.h keeps 8 float lanes per block): one
// integer sum per block lets the AVX2 kernel keep integer accumulators over a block and touch floats
// once per block, which is what makes 8-bit arithmetic cheaper than f32 FMA without VNNI.
//
// AVX2 kernel: activations are repacked per job so that one 32-byte vector holds 4 consecutive codes
// of 8 tokens; a weight row's 4 codes are broadcast against it. |w| times x with w's sign moved onto
// x (vpmaddubsw, vpmaddwd with ones: ggml's sign trick; |w| <= 128, |x| <= 127, so an int16 pair is
// at most 32512 and never saturates), or VNNI's vpdpbusd on the same operands. Tiles of 4 rows x 16
// tokens keep their integer accumulators in registers; with AVX2 a block of them is inline assembly
// (the compiler's allocation spilled sums), and the blocks' integer sums are stored and turned into
// floats in a pass of their own (interleaved with the integer steps the float work stalled them).
// Four vector operations per 32 products (sign, vpmaddubsw, vpmaddwd, add) against four FMAs for f32:
// the gain over the f32 GEMM comes from Zen 3 running them on four pipes against FMA's two, about
// 1.3-1.4x at Whisper's encoder shapes. Up to 8 tokens (one group), tiles of 8 rows x 8 tokens read
// the weight blocks in place. With AVX512-VNNI: tokens in the 16 lanes of 512-bit vectors, and for
// few tokens (5-8, 17-48) 16 weight rows in the lanes instead (a transposed panel per 16 rows), so a
// token count that is not a multiple of 16 wastes no lanes (gemm_q8_0.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mb {

// Whether this build has the kernel (x86; elsewhere the matrix-vector kernels serve int8 at every
// token count). Independent of the max_isa cap: under a cap below AVX2 the portable form runs.
bool gemm_q8_0_built();

// The fewest tokens for which mul_mat's int8 path takes this kernel rather than the matrix-vector
// ones: 5 where the hardware has AVX512-VNNI (the few-token kernel, 16 weight rows per vector), else 6
// (see mul_mat.cpp). From the hardware, not the max_isa cap, so one host computes a product of a
// given shape in one order under every cap.
int64_t gemm_q8_0_min_tokens();

// Bytes of scratch one call with nt tokens of k elements needs (32-byte aligned scratch).
size_t gemm_q8_0_scratch_bytes(int64_t k, int64_t nt);

// Weight rows 0 .. rows-1, row r at a + r * stride (q8_0 blocks), times nt activation rows acts[t]
// (BlockQ8Act, k / 32 blocks each): out[t * ldo + r].
void gemm_q8_0(int64_t k, const uint8_t* a, size_t stride, int64_t rows, const void* const* acts, int64_t nt,
               float* out, int64_t ldo, uint8_t* scratch);

}  // namespace mb
