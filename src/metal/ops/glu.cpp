// REGLU GEGLU SWIGLU GEGLU_ERF GEGLU_QUICK SWIGLU_OAI on the Metal device (shaders/glu.metal): f32
// rows with any strides, one threadgroup per dst row.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

namespace {

// The shader's id of a Glu row of the table (shaders/op_table.h), -1 for other ops.
int glu_op(Op op) {
    switch (op) {
#define MB_OP(NAME, FAMILY, KIND, PY)
#define MB_GLU(NAME, PY) \
    case Op::NAME:       \
        return MB_GLU_##NAME;
#include "op_table.h"
        default: return -1;
    }
}

}  // namespace

bool supports_glu(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* a = node.src[0];
    const Tensor* b = node.src[1];
    if (glu_op(node.op) < 0 || !a || (a->type != Type::F32 && a->type != Type::F16) || node.type != a->type) {
        return false;
    }
    if (b && b->type != a->type) return false;
    return fits_i32(*a) && fits_i32(node);
}

size_t encode_glu(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& src0 = *dst.src[0];
    const Tensor& src1 = dst.src[1] ? *dst.src[1] : src0;
    const bool swapped = dst.op_params[0] != 0;
    mb_kargs_glu args{};
    MB_SET_NE(args, ne, dst);
    MB_SET_NB(args, nb0, src0);
    MB_SET_NB(args, nb1, src1);
    MB_SET_NB(args, nb, dst);
    if (!dst.src[1]) {
        args.off0 = swapped ? args.ne0 : 0;
        args.off1 = swapped ? 0 : args.ne0;
    }
    args.alpha = dst.param_f(1);
    args.limit = dst.param_f(2);
    const Pipeline& p = enc.use(dst.type == Type::F16 ? "kernel_glu_f16" : "kernel_glu_f32",
                                {FunctionConstant::int32(500, glu_op(dst.op))});
    enc.args(args);
    enc.input(src0, 1);
    enc.input(src1, 2);
    enc.output(dst, 3);
    uint32_t nth = 32;
    const uint32_t max_nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    while (nth < dst.ne[0] && 2 * nth <= max_nth) nth *= 2;
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
