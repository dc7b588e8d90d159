// ggml's k-quants (q2_K q3_K q4_K q5_K q6_K, and q8_K, the activation type of their dot products):
// rows of super-blocks of 256 values in the layouts of shaders/quant_blocks.h. Quantizing follows
// ggml's reference quantizers (quantize_row_*_ref) step for step and rounding for rounding, so the
// bytes equal ggml's for every input, NaN and infinities included; dequantizing computes what ggml's
// dequantize_row_* computes. types.cpp dispatches to these; nb is the number of super-blocks.
#pragma once

#include <cstdint>

#include "quant_blocks.h"

namespace mb {

void quantize_q2_K(const float* x, block_q2_K* y, int64_t nb);
void quantize_q3_K(const float* x, block_q3_K* y, int64_t nb);
void quantize_q4_K(const float* x, block_q4_K* y, int64_t nb);
void quantize_q5_K(const float* x, block_q5_K* y, int64_t nb);
void quantize_q6_K(const float* x, block_q6_K* y, int64_t nb);
// Unlike ggml's, an all-zero block also gets zero bsums (ggml leaves them unwritten).
void quantize_q8_K(const float* x, block_q8_K* y, int64_t nb);

void dequantize_q2_K(const block_q2_K* x, float* y, int64_t nb);
void dequantize_q3_K(const block_q3_K* x, float* y, int64_t nb);
void dequantize_q4_K(const block_q4_K* x, float* y, int64_t nb);
void dequantize_q5_K(const block_q5_K* x, float* y, int64_t nb);
void dequantize_q6_K(const block_q6_K* x, float* y, int64_t nb);
void dequantize_q8_K(const block_q8_K* x, float* y, int64_t nb);

}  // namespace mb
