// SSM_CONV on the Metal device (shaders/ssm_conv.metal): f32 with any strides, one threadgroup per dst
// row (threads take the row's elements).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_ssm_conv(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* sx = node.src[0];
    const Tensor* c = node.src[1];
    return node.op == Op::SSM_CONV && sx && c && sx->type == Type::F32 && c->type == Type::F32 &&
           node.type == Type::F32 && fits_i32(*sx) && fits_i32(node);
}

size_t encode_ssm_conv(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& sx = *dst.src[0];
    const Tensor& c = *dst.src[1];
    mb_kargs_ssm_conv args{};
    args.ne0 = int32_t(dst.ne[0]);
    args.d_conv = int32_t(c.ne[0]);
    args.nb00 = sx.nb[0];
    args.nb01 = sx.nb[1];
    args.nb02 = sx.nb[2];
    args.nb10 = c.nb[0];
    args.nb11 = c.nb[1];
    args.nb0 = dst.nb[0];
    args.nb1 = dst.nb[1];
    args.nb2 = dst.nb[2];
    const Pipeline& p = enc.use("kernel_ssm_conv_f32", {});
    enc.args(args);
    enc.input(sx, 1);
    enc.input(c, 2);
    enc.output(dst, 3);
    uint32_t nth = 32;
    const uint32_t max_nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    while (nth < dst.ne[0] && 2 * nth <= max_nth) nth *= 2;
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), 1}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
