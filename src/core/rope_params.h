// The parameters of a ROPE node read back from its op params (layout in op.h), the rules every
// device's kernel needs them to follow, and the per-op YaRN constants (ggml's definitions), computed
// in double, shared by every device's encoder.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/tensor.h"

namespace mb {

struct RopeParams {
    static constexpr int kModeNormal = 0;  // rotates adjacent pairs (2i, 2i+1)
    static constexpr int kModeNeox = 2;    // rotates pairs (i, i + n_dims/2)

    int n_dims, mode, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;

    // A known mode, an even n_dims within the row, positive frequencies, and the original context
    // length YaRN's ramp is defined through.
    bool valid(int64_t row) const {
        if (mode != kModeNormal && mode != kModeNeox) return false;
        if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > row) return false;
        if (!(freq_base > 0.0f) || !(freq_scale > 0.0f)) return false;
        return ext_factor == 0.0f || n_ctx_orig > 0;
    }

    // YaRN's magnitude scale of cos and sin.
    double mscale() const {
        double m = attn_factor;
        if (ext_factor != 0.0f) m *= 1.0 + 0.1 * std::log(1.0 / freq_scale);
        return m;
    }

    // The dimension pair index where YaRN's ramp starts (rotations per original context above
    // beta_fast are extrapolated) and ends (below beta_slow interpolated); {0, 0} without YaRN.
    void corr_dims(double dims[2]) const {
        dims[0] = dims[1] = 0.0;
        if (ext_factor == 0.0f) return;
        const double kPi = 3.14159265358979323846;
        auto corr_dim = [&](double n_rot) {
            return n_dims * std::log(n_ctx_orig / (n_rot * 2.0 * kPi)) / (2.0 * std::log(double(freq_base)));
        };
        dims[0] = std::max(0.0, std::floor(corr_dim(beta_fast)));
        dims[1] = std::min(double(n_dims - 1), std::ceil(corr_dim(beta_slow)));
    }
};

inline RopeParams rope_params(const Tensor& node) {
    return {node.op_params[0], node.op_params[1], node.op_params[2], node.param_f(3), node.param_f(4),
            node.param_f(5),   node.param_f(6),   node.param_f(7),   node.param_f(8)};
}

}  // namespace mb
