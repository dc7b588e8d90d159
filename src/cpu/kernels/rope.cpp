// ROPE on f32 rows [D, H, T, B] with i32 positions [T]: normal mode rotates adjacent pairs, NEOX mode
// pairs (i, i + n_dims/2); dims past n_dims pass through. YaRN (ext_factor, attn_factor, beta_fast,
// beta_slow) follows ggml's definition. Angles are computed in double: positions reach the thousands,
// where an f32 angle would already be off by 1e-4 radians.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

constexpr int kModeNormal = 0;
constexpr int kModeNeox = 2;
constexpr double kPi = 3.14159265358979323846;

struct RopeParams {
    int n_dims, mode, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
};

RopeParams params_of(const Tensor& dst) {
    return {dst.op_params[0], dst.op_params[1], dst.op_params[2], dst.param_f(3), dst.param_f(4),
            dst.param_f(5),   dst.param_f(6),   dst.param_f(7),   dst.param_f(8)};
}

// The dimension pair index where YaRN's ramp starts (rotations per context above beta_fast are
// extrapolated) and ends (below beta_slow interpolated).
void yarn_corr_dims(const RopeParams& rp, double dims[2]) {
    auto corr_dim = [&](double n_rot) {
        return rp.n_dims * std::log(rp.n_ctx_orig / (n_rot * 2.0 * kPi)) / (2.0 * std::log(double(rp.freq_base)));
    };
    dims[0] = std::max(0.0, std::floor(corr_dim(rp.beta_fast)));
    dims[1] = std::min(double(rp.n_dims - 1), std::ceil(corr_dim(rp.beta_slow)));
}

// cos and sin (times the YaRN magnitude scale) of each pair's angle at position pos.
void angles(const RopeParams& rp, const double corr[2], int32_t pos, float* cs, float* sn) {
    double mscale = rp.attn_factor;
    if (rp.ext_factor != 0.0f) mscale *= 1.0 + 0.1 * std::log(1.0 / rp.freq_scale);
    for (int i = 0; i < rp.n_dims / 2; ++i) {
        const double extrap = double(pos) * std::pow(double(rp.freq_base), -2.0 * i / rp.n_dims);
        const double interp = rp.freq_scale * extrap;
        double theta = interp;
        if (rp.ext_factor != 0.0f) {
            const double y = (i - corr[0]) / std::max(0.001, corr[1] - corr[0]);
            const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
            const double mix = ramp * rp.ext_factor;
            theta = interp * (1.0 - mix) + extrap * mix;
        }
        cs[i] = float(std::cos(theta) * mscale);
        sn[i] = float(std::sin(theta) * mscale);
    }
}

}  // namespace

bool rope_supported(const Tensor& dst) {
    if (dst.op != Op::ROPE) return false;
    const Tensor* a = dst.src[0];
    const Tensor* pos = dst.src[1];
    if (a == nullptr || pos == nullptr || a->type != Type::F32 || dst.type != Type::F32) return false;
    if (!vec::same_shape(*a, dst) || pos->type != Type::I32 || pos->ne[0] != a->ne[2]) return false;
    const RopeParams rp = params_of(dst);
    if (rp.mode != kModeNormal && rp.mode != kModeNeox) return false;
    if (rp.n_dims <= 0 || rp.n_dims % 2 != 0 || rp.n_dims > a->ne[0]) return false;
    if (!(rp.freq_base > 0.0f) || !(rp.freq_scale > 0.0f)) return false;
    if (rp.ext_factor != 0.0f && rp.n_ctx_orig <= 0) return false;
    return true;
}

void compute_rope(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const Tensor& pos = *dst.src[1];
    const RopeParams rp = params_of(dst);
    double corr[2] = {0.0, 0.0};
    if (rp.ext_factor != 0.0f) yarn_corr_dims(rp, corr);
    const int64_t n = dst.ne[0];
    const int half = rp.n_dims / 2;
    // In normal mode pair i is (2i, 2i+1); in NEOX mode (i, i + half).
    const int64_t first_step = rp.mode == kModeNeox ? 1 : 2;
    const int64_t second_off = rp.mode == kModeNeox ? half : 1;

    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half)), x(static_cast<size_t>(n)),
        y(static_cast<size_t>(n));
    int64_t cached_token = -1;
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        const int64_t token = ix.i3 * dst.ne[2] + ix.i2;
        if (token != cached_token) {
            int32_t ps;
            std::memcpy(&ps, host_data(pos) + size_t(ix.i2) * pos.nb[0], sizeof ps);
            angles(rp, corr, ps, cs.data(), sn.data());
            cached_token = token;
        }
        vec::gather_f32(vec::row_ptr(a, ix), a.nb[0], n, x.data());
        for (int i = 0; i < half; ++i) {
            const int64_t j0 = i * first_step;
            const int64_t j1 = j0 + second_off;
            const float x0 = x[size_t(j0)], x1 = x[size_t(j1)];
            y[size_t(j0)] = x0 * cs[size_t(i)] - x1 * sn[size_t(i)];
            y[size_t(j1)] = x0 * sn[size_t(i)] + x1 * cs[size_t(i)];
        }
        for (int64_t j = rp.n_dims; j < n; ++j) y[size_t(j)] = x[size_t(j)];
        vec::scatter_f32(y.data(), n, vec::row_ptr(dst, ix), dst.nb[0]);
    }
}

}  // namespace mb
