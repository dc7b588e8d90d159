// SUM_ROWS, MEAN and ARGMAX on the Metal device (shaders/reduce.metal): one threadgroup per row of
// f32 with any strides; SUM_ROWS/MEAN give one f32 per row, ARGMAX one i32 per row of a 2-D tensor.
// SUM: one threadgroup walks every element.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "metal/ops/row_threads.h"
#include "kargs.h"

namespace mb::metal {

bool supports_reduce(const RuntimeProps& props, const Tensor& node) {
    const Tensor* a = node.src[0];
    if (!props.has_simdgroup_reduction || !a || a->type != Type::F32 || !fits_i32(*a)) return false;
    switch (node.op) {
        case Op::SUM:
            return node.type == Type::F32 && node.nelements() == 1;
        case Op::SUM_ROWS:
        case Op::MEAN:
            return node.type == Type::F32 && node.ne[0] == 1 && node.ne[1] == a->ne[1] && node.ne[2] == a->ne[2] &&
                   node.ne[3] == a->ne[3];
        case Op::ARGMAX:
            // An empty row has no maximum to name.
            return node.type == Type::I32 && a->ne[2] == 1 && a->ne[3] == 1 && node.ne[0] == a->ne[1] &&
                   node.nelements() == a->ne[1] && node.nb[0] == sizeof(int32_t) && a->ne[0] > 0;
        default:
            return false;
    }
}

size_t encode_reduce(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& src0 = *dst.src[0];

    mb_kargs_reduce args{};
    MB_SET_NE(args, ne0, src0);
    MB_SET_NB(args, nb0, src0);
    args.nb1 = dst.nb[1];
    args.nb2 = dst.nb[2];
    args.nb3 = dst.nb[3];
    args.mean = dst.op == Op::MEAN ? 1 : 0;

    if (dst.op == Op::SUM) {
        const Pipeline& p = enc.use("kernel_sum_f32");
        enc.args(args);
        enc.input(src0, 1);
        enc.output(dst, 2);
        enc.threadgroup_memory(32 * sizeof(float), 0);
        const uint32_t nth = row_threads(src0.nelements(), p.max_threads_per_threadgroup());
        enc.dispatch({1, 1, 1}, {nth, 1, 1});
        return 1;
    }
    const bool argmax = dst.op == Op::ARGMAX;
    const Pipeline& p = enc.use(argmax ? "kernel_argmax_f32" : "kernel_sum_rows_f32");
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    enc.threadgroup_memory(32 * sizeof(float), 0);
    if (argmax) enc.threadgroup_memory(32 * sizeof(int32_t), 1);
    const uint32_t nth = row_threads(args.ne00, p.max_threads_per_threadgroup());
    enc.dispatch({uint32_t(src0.ne[1]), uint32_t(src0.ne[2]), uint32_t(src0.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
