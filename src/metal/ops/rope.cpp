// ROPE on the Metal device (shaders/rope.metal): normal and NEOX modes, f32 and f16 rows, YaRN. The
// per-op constants (frequency exponent, YaRN ramp bounds, magnitude scale) are computed here once,
// in double, so the kernel only evaluates what varies per pair and position.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

namespace {

constexpr int kModeNormal = 0;
constexpr int kModeNeox = 2;
constexpr double kPi = 3.14159265358979323846;

struct RopeParams {
    int n_dims, mode, n_ctx_orig;
    float freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
};

RopeParams params_of(const Tensor& node) {
    return {node.op_params[0], node.op_params[1], node.op_params[2], node.param_f(3), node.param_f(4),
            node.param_f(5),   node.param_f(6),   node.param_f(7),   node.param_f(8)};
}

// ggml's YaRN ramp bounds: the pair indices where rotations per original context cross beta_fast
// and beta_slow.
void corr_dims(const RopeParams& rp, float out[2]) {
    auto corr_dim = [&](double n_rot) {
        return rp.n_dims * std::log(rp.n_ctx_orig / (n_rot * 2.0 * kPi)) / (2.0 * std::log(double(rp.freq_base)));
    };
    out[0] = float(std::max(0.0, std::floor(corr_dim(rp.beta_fast))));
    out[1] = float(std::min(double(rp.n_dims - 1), std::ceil(corr_dim(rp.beta_slow))));
}

}  // namespace

bool supports_rope(const RuntimeProps&, const Tensor& node) {
    const Tensor* a = node.src[0];
    const Tensor* pos = node.src[1];
    if (a == nullptr || pos == nullptr) return false;
    if ((a->type != Type::F32 && a->type != Type::F16) || node.type != a->type) return false;
    if (pos->type != Type::I32 || pos->ne[0] != a->ne[2]) return false;
    for (int i = 0; i < kMaxDims; ++i) {
        if (node.ne[i] != a->ne[i] || a->ne[i] > INT_MAX) return false;
    }
    const RopeParams rp = params_of(node);
    if (rp.mode != kModeNormal && rp.mode != kModeNeox) return false;
    if (rp.n_dims <= 0 || rp.n_dims % 2 != 0 || rp.n_dims > a->ne[0]) return false;
    if (!(rp.freq_base > 0.0f) || !(rp.freq_scale > 0.0f)) return false;
    // YaRN's ramp is defined through the original context length.
    if (rp.ext_factor != 0.0f && rp.n_ctx_orig <= 0) return false;
    return true;
}

size_t encode_rope(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    const Tensor& a = *dst.src[0];
    const Tensor& pos = *dst.src[1];
    if (dst.is_empty()) return 1;
    const RopeParams rp = params_of(dst);

    mb_kargs_rope k{};
    k.ne00 = int32_t(a.ne[0]);
    k.ne01 = int32_t(a.ne[1]);
    k.ne02 = int32_t(a.ne[2]);
    k.ne03 = int32_t(a.ne[3]);
    k.nb00 = a.nb[0];
    k.nb01 = a.nb[1];
    k.nb02 = a.nb[2];
    k.nb03 = a.nb[3];
    k.nb0 = dst.nb[0];
    k.nb1 = dst.nb[1];
    k.nb2 = dst.nb[2];
    k.nb3 = dst.nb[3];
    k.nbp0 = pos.nb[0];
    k.n_dims = rp.n_dims;
    k.theta_log2 = float(-2.0 * std::log2(double(rp.freq_base)) / rp.n_dims);
    k.freq_scale = rp.freq_scale;
    k.ext_factor = rp.ext_factor;
    double mscale = rp.attn_factor;
    float corr[2] = {0.0f, 0.0f};
    if (rp.ext_factor != 0.0f) {
        mscale *= 1.0 + 0.1 * std::log(1.0 / rp.freq_scale);
        corr_dims(rp, corr);
    }
    k.mscale = float(mscale);
    k.corr_dim0 = corr[0];
    k.corr_dim1 = corr[1];

    const std::string name = std::string("kernel_rope_") + (rp.mode == kModeNeox ? "neox" : "norm") + "_" +
                             (a.type == Type::F16 ? "f16" : "f32");
    const Pipeline& p = enc.use(name);
    enc.args(k);
    enc.input(a, 1);
    enc.input(pos, 2);
    enc.output(dst, 3);
    const int64_t work = std::max<int64_t>(rp.n_dims / 2, a.ne[0] - rp.n_dims);
    const uint32_t nth = uint32_t(std::min<int64_t>({work, 256, int64_t(p.max_threads_per_threadgroup())}));
    enc.dispatch({uint32_t(a.ne[1]), uint32_t(a.ne[2]), uint32_t(a.ne[3])}, {std::max<uint32_t>(nth, 1), 1, 1});
    return 1;
}

}  // namespace mb::metal
