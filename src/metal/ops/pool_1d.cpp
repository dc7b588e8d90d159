// POOL_1D on the Metal device (shaders/pool_1d.metal): f32 with any strides, one threadgroup per dst
// row.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

bool supports_pool_1d(const RuntimeProps&, const Tensor& node) {
    if (!plain_f32_supports(node, Op::POOL_1D, 1)) return false;
    const Tensor& a = *node.src[0];
    return node.ne[1] == a.ne[1] && node.ne[2] == a.ne[2] && node.ne[3] == a.ne[3] &&
           node.op_params[3] < node.op_params[1];
}

size_t encode_pool_1d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& a = *dst.src[0];
    mb_kargs_pool_1d args{};
    args.ne00 = int32_t(a.ne[0]);
    args.ne0 = int32_t(dst.ne[0]);
    args.avg = dst.op_params[0];
    args.k0 = dst.op_params[1];
    args.s0 = dst.op_params[2];
    args.p0 = dst.op_params[3];
    MB_SET_NB(args, nb0, a);
    MB_SET_NB(args, nb, dst);
    encode_plain(enc, "kernel_pool_1d_f32", args, {&a}, dst,
                 {uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, dst.ne[0]);
    return 1;
}

}  // namespace mb::metal
