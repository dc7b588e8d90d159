// CONV_2D at unit strides on AVX2 / AVX-512 as an implicit GEMM: conv_2d.cpp's family calls it for the
// nodes conv_2d_implicit_fits admits, where the CPU has AVX2; every other node takes conv_2d.cpp's
// packed-panel GEMM.
#pragma once

#include <cstddef>

#include "core/tensor.h"
#include "cpu/kernels/kernels.h"

namespace mb {

// Whether the node (conv_2d_supported has checked its shapes) suits this path: s0 = s1 = 1, at most
// 4608 taps per result, the packed kernel rows within 1 MiB (read again for every tile of pixels), one
// image's zero-padded copy within 32 MiB, and at least half of each padded row's columns output
// pixels. It does not depend on the instruction set in use.
bool conv_2d_implicit_fits(const Tensor& dst);

// The scratch bytes conv_2d_implicit uses from the aligned start at nth threads (for a node that fits).
size_t conv_2d_implicit_scratch_bytes(const Tensor& dst, int nth);

// Whether the instruction set in use has this path's kernels (AVX2 with FMA, or AVX-512).
bool conv_2d_implicit_available();

// The node's result, where conv_2d_implicit_fits and conv_2d_implicit_available hold.
void conv_2d_implicit(const ComputeParams& p, Tensor& dst);

}  // namespace mb
