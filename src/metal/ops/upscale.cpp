// UPSCALE on the Metal device (shaders/upscale.metal): f32 with any strides, one threadgroup per dst
// row (threads take the row's elements).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_upscale(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* a = node.src[0];
    return node.op == Op::UPSCALE && a && a->type == Type::F32 && node.type == Type::F32 && fits_i32(*a) &&
           fits_i32(node);
}

size_t encode_upscale(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& a = *dst.src[0];
    mb_kargs_upscale args{};
    args.ne0 = int32_t(dst.ne[0]);
    args.sf0 = float(dst.ne[0]) / float(a.ne[0]);
    args.sf1 = float(dst.ne[1]) / float(a.ne[1]);
    args.sf2 = float(dst.ne[2]) / float(a.ne[2]);
    args.sf3 = float(dst.ne[3]) / float(a.ne[3]);
    MB_SET_NB(args, nb0, a);
    MB_SET_NB(args, nb, dst);
    const Pipeline& p = enc.use("kernel_upscale_f32", {});
    enc.args(args);
    enc.input(a, 1);
    enc.output(dst, 2);
    uint32_t nth = 32;
    const uint32_t max_nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    while (nth < dst.ne[0] && 2 * nth <= max_nth) nth *= 2;
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
