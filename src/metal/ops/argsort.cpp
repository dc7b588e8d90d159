// ARGSORT on the Metal device (shaders/argsort.metal): a bitonic sort per row in threadgroup
// memory, one thread per (padded) element: rows up to 1024 values, the threadgroup size every Apple
// GPU offers; longer rows are refused and run on the CPU under a Scheduler.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

namespace {

uint32_t padded(int64_t n) {
    uint32_t p = 1;
    while (p < n) p *= 2;
    return p;
}

}  // namespace

bool supports_argsort(const RuntimeProps& props, const Tensor& node) {
    const Tensor* a = node.src[0];
    if (node.op != Op::ARGSORT || !a || a->type != Type::F32 || node.type != Type::I32) return false;
    return fits_i32(*a) && a->ne[0] <= 1024 && padded(a->ne[0]) * sizeof(int32_t) <= props.max_threadgroup_memory;
}

size_t encode_argsort(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& src0 = *dst.src[0];
    mb_kargs_argsort args{};
    args.ne00 = int32_t(src0.ne[0]);
    args.npad = int32_t(padded(src0.ne[0]));
    MB_SET_NB(args, nb0, src0);
    MB_SET_NB(args, nb, dst);
    args.desc = dst.op_params[0] != 0 ? 1 : 0;
    enc.use("kernel_argsort_f32_i32", {});
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    enc.threadgroup_memory(size_t(args.npad) * sizeof(int32_t), 0);
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {uint32_t(args.npad), 1, 1});
    return 1;
}

}  // namespace mb::metal
