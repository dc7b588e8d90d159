// ggml's non-linear 4-bit types (iq4_nl, iq4_xs) and mxfp4, in the layouts of shaders/quant_blocks.h.
// Quantizing gives the bytes ggml's ggml_quantize_chunk writes without an importance matrix (the path
// of its quantize tool: for iq4_nl that is quantize_iq4_nl's 15-scale search, which
// quantize_row_iq4_nl_ref skips; for iq4_xs and mxfp4 the two are the same), NaN and infinities
// included; dequantizing computes what ggml's dequantize_row_* computes. nb counts blocks.
#pragma once

#include <cstdint>

#include "quant_blocks.h"

namespace mb {

void quantize_iq4_nl(const float* x, block_iq4_nl* y, int64_t nb);
void quantize_iq4_xs(const float* x, block_iq4_xs* y, int64_t nb);
void quantize_mxfp4(const float* x, block_mxfp4* y, int64_t nb);

void dequantize_iq4_nl(const block_iq4_nl* x, float* y, int64_t nb);
void dequantize_iq4_xs(const block_iq4_xs* x, float* y, int64_t nb);
void dequantize_mxfp4(const block_mxfp4* x, float* y, int64_t nb);

}  // namespace mb
