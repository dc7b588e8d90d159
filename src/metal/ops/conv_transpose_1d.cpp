// CONV_TRANSPOSE_1D on the Metal device (shaders/conv_transpose_1d.metal): f32 with any strides, one threadgroup
// per dst row (threads take the row's elements).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_conv_transpose_1d(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    return plain_f32_supports(node, Op::CONV_TRANSPOSE_1D, 2, true);
}

size_t encode_conv_transpose_1d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& kern = *dst.src[0];
    const Tensor& x = *dst.src[1];
    mb_kargs_conv_transpose_1d args{};
    args.k = int32_t(kern.ne[0]);
    args.ic = int32_t(kern.ne[2]);
    args.l = int32_t(x.ne[0]);
    args.ol = int32_t(dst.ne[0]);
    args.s0 = dst.op_params[0];
    args.p0 = dst.op_params[1];
    args.d0 = dst.op_params[2];
    args.nb00 = kern.nb[0];
    args.nb01 = kern.nb[1];
    args.nb02 = kern.nb[2];
    args.nb10 = x.nb[0];
    args.nb11 = x.nb[1];
    args.nb12 = x.nb[2];
    args.nb0 = dst.nb[0];
    args.nb1 = dst.nb[1];
    args.nb2 = dst.nb[2];
    encode_plain(enc, kern.type == Type::F16 ? "kernel_conv_transpose_1d_f16" : "kernel_conv_transpose_1d_f32", args,
                 {&kern, &x}, dst, {uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), 1}, dst.ne[0]);
    return 1;
}

}  // namespace mb::metal
