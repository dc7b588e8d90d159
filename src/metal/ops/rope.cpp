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
#include "core/rope_params.h"
#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

bool supports_rope(const RuntimeProps&, const Tensor& node) {
    const Tensor* a = node.src[0];
    const Tensor* pos = node.src[1];
    if (a == nullptr || pos == nullptr) return false;
    if ((a->type != Type::F32 && a->type != Type::F16) || node.type != a->type) return false;
    if (pos->type != Type::I32 || pos->ne[0] != a->ne[2]) return false;
    for (int i = 0; i < kMaxDims; ++i) {
        if (node.ne[i] != a->ne[i] || a->ne[i] > INT_MAX) return false;
    }
    return rope_params(node).valid(a->ne[0]);
}

size_t encode_rope(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    const Tensor& a = *dst.src[0];
    const Tensor& pos = *dst.src[1];
    if (dst.is_empty()) return 1;
    const RopeParams rp = rope_params(dst);

    mb_kargs_rope k{};
    MB_SET_NE(k, ne0, a);
    MB_SET_NB(k, nb0, a);
    MB_SET_NB(k, nb, dst);
    k.nbp0 = pos.nb[0];
    k.n_dims = rp.n_dims;
    k.theta_log2 = float(-2.0 * std::log2(double(rp.freq_base)) / rp.n_dims);
    k.freq_scale = rp.freq_scale;
    k.ext_factor = rp.ext_factor;
    double corr[2];
    rp.corr_dims(corr);
    k.mscale = float(rp.mscale());
    k.corr_dim0 = float(corr[0]);
    k.corr_dim1 = float(corr[1]);

    const std::string name = std::string("kernel_rope_") + (rp.mode == RopeParams::kModeNeox ? "neox" : "norm") + "_" +
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
