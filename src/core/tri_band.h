// The band of TRI, DIAG_MASK_INF, DIAG_MASK_ZERO and DIAG, shared by every device: element (i0, i1)
// of a matrix keeps its value when lo <= i0 - i1 <= hi, else it is `fill`.
#pragma once

#include <cstdint>
#include <limits>

#include "core/tensor.h"

namespace mb {

struct TriBand {
    int32_t lo;
    int32_t hi;
    float fill;
};

// ggml_tri_type (op_params[0] of TRI): 0 upper with the diagonal, 1 upper, 2 lower with the
// diagonal, 3 lower. DIAG_MASK_*: op_params[0] = n_past, columns past row + n_past replaced.
inline TriBand tri_band(const Tensor& node) {
    constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
    constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
    switch (node.op) {
        case Op::TRI:
            switch (node.op_params[0]) {
                case 0: return {0, kMax, 0.0f};
                case 1: return {1, kMax, 0.0f};
                case 2: return {kMin, 0, 0.0f};
                default: return {kMin, -1, 0.0f};
            }
        case Op::DIAG_MASK_INF: return {kMin, node.op_params[0], -std::numeric_limits<float>::infinity()};
        case Op::DIAG_MASK_ZERO: return {kMin, node.op_params[0], 0.0f};
        default: return {0, 0, 0.0f};  // DIAG
    }
}

}  // namespace mb
