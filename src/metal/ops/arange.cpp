// ARANGE on the Metal device (shaders/arange.metal): one thread per element.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_arange(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    return node.op == Op::ARANGE && node.type == Type::F32 && node.is_contiguous() && node.ne[0] <= INT32_MAX;
}

size_t encode_arange(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    mb_kargs_arange args{};
    args.n = uint32_t(dst.ne[0]);
    args.start = dst.param_f(0);
    args.step = dst.param_f(2);
    const Pipeline& p = enc.use("kernel_arange_f32", {});
    enc.args(args);
    enc.output(dst, 1);
    const uint32_t nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    enc.dispatch({(args.n + nth - 1) / nth, 1, 1}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
