// CUMSUM on the Metal device (shaders/cumsum.metal): one threadgroup per row of f32 with any
// strides, walking the row in blocks of its threads.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "metal/ops/row_threads.h"
#include "kargs.h"

namespace mb::metal {

bool supports_cumsum(const RuntimeProps& props, const Tensor& node) {
    const Tensor* a = node.src[0];
    if (!props.has_simdgroup_reduction || node.op != Op::CUMSUM || !a || a->type != Type::F32 ||
        node.type != Type::F32) {
        return false;
    }
    for (int d = 0; d < kMaxDims; ++d) {
        if (a->ne[d] != node.ne[d]) return false;
    }
    return fits_i32(*a);
}

size_t encode_cumsum(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& src0 = *dst.src[0];
    mb_kargs_cumsum args{};
    args.ne00 = int32_t(src0.ne[0]);
    MB_SET_NB(args, nb0, src0);
    MB_SET_NB(args, nb, dst);
    const Pipeline& p = enc.use("kernel_cumsum_f32", {});
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    enc.threadgroup_memory(32 * sizeof(float), 0);
    const uint32_t nth = row_threads(src0.ne[0], p.max_threads_per_threadgroup());
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
