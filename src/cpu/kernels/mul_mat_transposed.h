// MUL_MAT whose first operand is a transposed view of a float matrix (f32, f16 or bf16): a's element
// (k, m) lies at k * nb[0] + m * (element size), so each of the product's output rows is a
// contiguous run of the stored matrix. Attention over a cache kept as K^T (keys along a row) and V
// (head dims along a row) is this product twice; Whisper's CPU decoder keeps its cross-attention
// keys and values that way.
//
// dst[i3][i2][t][m] = sum_k b[i3][i2][t][k] * a[i3/r3][i2/r2][m][k], as mul_mat.cpp. The work is
// register tiles of up to 6 tokens x 64 columns (AVX-512; AVX2: 3 x 32; a portable loop elsewhere):
// for each k, one row piece of a is loaded once and multiplied by every token's b[t][k] broadcast, so
// no lane ever needs a horizontal sum, however short k is. Sums run in k order, in f32.
#pragma once

#include <cstddef>

#include "core/tensor.h"
#include "cpu/kernels/kernels.h"

namespace mb {

// Whether the node's first operand is such a transposed float view (mul_mat.cpp then routes here).
bool mul_mat_transposed_applies(const Tensor& dst);
// Given applies: whether this path runs it (types, shapes, broadcasts).
bool mul_mat_transposed_supported(const Tensor& dst);
size_t mul_mat_transposed_work_size(const Tensor& dst, int nth);
void mul_mat_transposed_prepare(const ComputeParams& cp, Tensor& dst);
void compute_mul_mat_transposed(const ComputeParams& cp, Tensor& dst);

}  // namespace mb
