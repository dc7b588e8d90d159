// Dot products of grid-type weight rows (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s) with
// q8_K activation rows (vec_dot_k.h). Per super-block the signed grid values times the activation codes
// are summed exactly in int32 with their integer scales (and, for the iq1 types, the +-1/8 delta times
// the activation sums, scaled by 8 to stay integral); one fused multiply-add by the f32 scales then
// accumulates the block. One portable kernel for every instruction set, so every cap gives the same bits.
#pragma once

#include "core/types.h"
#include "cpu/kernels/vec_dot_k.h"

namespace mb {

// The kernel for grid type t; nullptr for other types.
VecDotKFn vec_dot_grid_fn(Type t);

}  // namespace mb
