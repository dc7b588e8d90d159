// SSM_CONV on the Metal device (shaders/ssm_conv.metal): f32 with any strides, one threadgroup per dst
// row (threads take the row's elements).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_ssm_conv(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    return plain_f32_supports(node, Op::SSM_CONV, 2);
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
    encode_plain(enc, "kernel_ssm_conv_f32", args, {&sx, &c}, dst, {uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), 1},
                 dst.ne[0]);
    return 1;
}

}  // namespace mb::metal
