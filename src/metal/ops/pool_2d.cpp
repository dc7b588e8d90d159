// POOL_2D on the Metal device (shaders/pool_2d.metal): f32 with any strides, one threadgroup per dst
// row (threads take the row's elements).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_pool_2d(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    return plain_f32_supports(node, Op::POOL_2D, 1);
}

size_t encode_pool_2d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& a = *dst.src[0];
    mb_kargs_pool_2d args{};
    args.ne00 = int32_t(a.ne[0]);
    args.ne01 = int32_t(a.ne[1]);
    args.ne0 = int32_t(dst.ne[0]);
    args.avg = dst.op_params[0];
    args.k0 = dst.op_params[1];
    args.k1 = dst.op_params[2];
    args.s0 = dst.op_params[3];
    args.s1 = dst.op_params[4];
    args.p0 = dst.op_params[5];
    args.p1 = dst.op_params[6];
    MB_SET_NB(args, nb0, a);
    MB_SET_NB(args, nb, dst);
    encode_plain(enc, "kernel_pool_2d_f32", args, {&a}, dst,
                 {uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, dst.ne[0]);
    return 1;
}

}  // namespace mb::metal
