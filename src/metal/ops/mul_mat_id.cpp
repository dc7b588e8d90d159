// MUL_MAT_ID on the Metal device (shaders/mul_mat_id.metal): expert matrices of mul_mat's weight types
// (plain and quantized) with packed rows, f32 activations, one simdgroup per output value.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

namespace {

// The expert types with a kernel (kernel_mul_mat_id_<type name>): mul_mat's weight types.
bool expert_type(Type t) {
    switch (t) {
        case Type::F32: case Type::F16: case Type::BF16: case Type::Q4_0: case Type::Q4_1: case Type::Q5_0:
        case Type::Q5_1: case Type::Q8_0: case Type::Q2_K: case Type::Q3_K: case Type::Q4_K: case Type::Q5_K:
        case Type::Q6_K: case Type::IQ4_NL: case Type::IQ4_XS: case Type::MXFP4:
            return true;
        default:
            break;
    }
    return false;
}

}  // namespace

bool supports_mul_mat_id(const RuntimeProps& props, const Tensor& node) {
    const Tensor* as = node.src[0];
    const Tensor* b = node.src[1];
    const Tensor* ids = node.src[2];
    if (node.op != Op::MUL_MAT_ID || !as || !b || !ids || !props.has_simdgroup_reduction) return false;
    if (!expert_type(as->type) || b->type != Type::F32 || ids->type != Type::I32) return false;
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
    enc.use(std::string("kernel_mul_mat_id_") + type_traits(as.type).name, {});
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
