// ACC and SET on the Metal device (shaders/acc.metal): one thread per element of the contiguous f32 result.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_acc(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* a = node.src[0];
    const Tensor* b = node.src[1];
    return (node.op == Op::ACC || node.op == Op::SET) && a && b && a->type == Type::F32 && b->type == Type::F32 &&
           node.type == Type::F32 &&
           a->is_contiguous() && node.is_contiguous() && node.nelements() <= int64_t(UINT32_MAX) && fits_i32(*b);
}

size_t encode_acc(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    mb_kargs_acc args{};
    args.n = uint32_t(dst.nelements());
    MB_SET_NE(args, ne1, b);
    MB_SET_NB(args, nb1, b);
    args.nb1 = uint64_t(dst.op_params[0]);
    args.nb2 = uint64_t(dst.op_params[1]);
    args.nb3 = uint64_t(dst.op_params[2]);
    args.offset = uint64_t(dst.op_params[3]);
    args.set = dst.op == Op::SET ? 1 : 0;
    const Pipeline& p = enc.use("kernel_acc_f32", {});
    enc.args(args);
    enc.input(a, 1);
    enc.input(b, 2);
    enc.output(dst, 3);
    const uint32_t nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    enc.dispatch({uint32_t((uint64_t(args.n) + nth - 1) / nth), 1, 1}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
