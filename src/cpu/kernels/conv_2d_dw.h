// CONV_2D_DW (ggml_conv_2d_dw_direct) on the CPU: conv_2d.cpp's family calls it for that op.
#pragma once

#include "core/tensor.h"
#include "cpu/kernels/kernels.h"

namespace mb {

// kernel [KW, KH, 1, C] f32 or f16, data f32 [W, H, C, N] with any strides, dst f32 [OW, OH, C, N]
// contiguous (conv_2d_supported has checked the shapes); params i[0..5] = s0, s1, p0, p1, d0, d1.
void conv_2d_dw(const ComputeParams& p, Tensor& dst);

}  // namespace mb
