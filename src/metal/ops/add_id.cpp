// ADD_ID on the Metal device (shaders/add_id.metal): f32 with any strides, one threadgroup per row.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_add_id(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* a = node.src[0];
    const Tensor* b = node.src[1];
    const Tensor* ids = node.src[2];
    return node.op == Op::ADD_ID && a && b && ids && a->type == Type::F32 && b->type == Type::F32 &&
           ids->type == Type::I32 && node.type == Type::F32 && fits_i32(node) && fits_i32(*b);
}

size_t encode_add_id(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const Tensor& ids = *dst.src[2];
    mb_kargs_add_id args{};
    args.ne0 = int32_t(dst.ne[0]);
    args.ne11 = int32_t(b.ne[1]);
    MB_SET_NB(args, nb0, a);
    args.nb10 = b.nb[0];
    args.nb11 = b.nb[1];
    args.nbi0 = ids.nb[0];
    args.nbi1 = ids.nb[1];
    MB_SET_NB(args, nb, dst);
    const Pipeline& p = enc.use("kernel_add_id_f32", {});
    enc.args(args);
    enc.input(a, 1);
    enc.input(b, 2);
    enc.input(ids, 3);
    enc.error_record(4);
    enc.output(dst, 5);
    uint32_t nth = 32;
    const uint32_t max_nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    while (nth < dst.ne[0] && 2 * nth <= max_nth) nth *= 2;
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
