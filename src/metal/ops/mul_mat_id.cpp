// MUL_MAT_ID on the Metal device (shaders/mul_mat_id.metal): f32 and f16 expert matrices with packed
// rows, f32 activations, one simdgroup per output value. Quantized experts are refused here and run
// on the CPU under a Scheduler.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_mul_mat_id(const RuntimeProps& props, const Tensor& node) {
    const Tensor* as = node.src[0];
    const Tensor* b = node.src[1];
    const Tensor* ids = node.src[2];
    if (node.op != Op::MUL_MAT_ID || !as || !b || !ids || !props.has_simdgroup_reduction) return false;
    if ((as->type != Type::F32 && as->type != Type::F16) || b->type != Type::F32 || ids->type != Type::I32)
        return false;
    return as->nb[0] == type_traits(as->type).type_size && b->nb[0] == sizeof(float) &&
           node.nb[0] == sizeof(float) && fits_i32(*as) && fits_i32(*b) && fits_i32(node);
}

size_t encode_mul_mat_id(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& as = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const Tensor& ids = *dst.src[2];
    mb_kargs_mul_mat_id args{};
    args.ne00 = int32_t(as.ne[0]);
    args.ne02 = int32_t(as.ne[2]);
    args.nb01 = as.nb[1];
    args.nb02 = as.nb[2];
    args.ne11 = int32_t(b.ne[1]);
    args.nb11 = b.nb[1];
    args.nb12 = b.nb[2];
    args.nbi0 = ids.nb[0];
    args.nbi1 = ids.nb[1];
    args.nb1 = dst.nb[1];
    args.nb2 = dst.nb[2];
    enc.use(as.type == Type::F16 ? "kernel_mul_mat_id_f16" : "kernel_mul_mat_id_f32", {});
    enc.args(args);
    enc.input(as, 1);
    enc.input(b, 2);
    enc.input(ids, 3);
    enc.error_record(4);
    enc.output(dst, 5);
    enc.dispatch({uint32_t(dst.ne[0]), uint32_t(dst.ne[1]), uint32_t(dst.ne[2])}, {32, 1, 1});
    return 1;
}

}  // namespace mb::metal
