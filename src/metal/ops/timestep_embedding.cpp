// TIMESTEP_EMBEDDING on the Metal device (shaders/timestep_embedding.metal): one threadgroup per
// timestep.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_timestep_embedding(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* t = node.src[0];
    return node.op == Op::TIMESTEP_EMBEDDING && t && t->type == Type::F32 && node.type == Type::F32 &&
           node.nb[0] == sizeof(float) && fits_i32(node);
}

size_t encode_timestep_embedding(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& ts = *dst.src[0];
    mb_kargs_timestep_embedding args{};
    args.nb00 = ts.nb[0];
    args.nb1 = dst.nb[1];
    args.dim = dst.op_params[0];
    args.half_dim = args.dim / 2;
    args.max_period = dst.op_params[1];
    const Pipeline& p = enc.use("kernel_timestep_embedding_f32", {});
    enc.args(args);
    enc.input(ts, 1);
    enc.output(dst, 2);
    uint32_t nth = 32;
    const uint32_t max_nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    while (nth < uint32_t(std::max(1, args.half_dim)) && 2 * nth <= max_nth) nth *= 2;
    enc.dispatch({uint32_t(dst.ne[1]), 1, 1}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
