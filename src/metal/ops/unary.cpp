// SCALE CLAMP and the unary activations on the Metal device (shaders/unary.metal): f32 in and out, or f16
// in and out (computed in f32).
// Contiguous: one thread per element, or per float4 when the count is a multiple of 4 and both ends
// are 16-byte aligned. Other strides (views): one threadgroup per row.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

namespace {

// The shader's id of a Unary row of the table (shaders/op_table.h), -1 for other ops.
int unary_op(Op op) {
    switch (op) {
#define MB_OP(NAME, FAMILY, KIND, PY)
#define MB_UNARY(NAME, KIND, PY) \
    case Op::NAME:               \
        return MB_UNARY_##NAME;
#include "op_table.h"
        default: return -1;
    }
}

}  // namespace

bool supports_unary(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* a = node.src[0];
    if (unary_op(node.op) < 0 || !a || (a->type != Type::F32 && a->type != Type::F16) || node.type != a->type) {
        return false;
    }
    for (int d = 0; d < kMaxDims; ++d) {
        if (a->ne[d] != node.ne[d]) return false;
    }
    for (int d = 0; d < kMaxDims; ++d) {
        if (node.ne[d] > INT32_MAX) return false;
    }
    return true;
}

size_t encode_unary(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    const Tensor& src0 = *dst.src[0];
    if (dst.is_empty()) return 1;

    const int64_t n = dst.nelements();
    // One thread per element: the grid counts threads in 32 bits.
    const bool flat = src0.is_contiguous() && dst.is_contiguous() && n <= int64_t(UINT32_MAX);
    const size_t align = dst.type == Type::F16 ? 8 : 16;  // one float4 / half4
    const bool vec4 = flat && n % 4 == 0 && device_ref(src0).offset % align == 0 && device_ref(dst).offset % align == 0;
    mb_kargs_unary args{};
    args.n = uint32_t(vec4 ? n / 4 : n);
    if (op_info(dst.op).kind == OpKind::Ew) {  // SCALE, CLAMP, FILL, LEAKY_RELU, XIELU: parameters f[0..3]
        args.p0 = dst.param_f(0);
        args.p1 = dst.param_f(1);
        args.p2 = dst.param_f(2);
        args.p3 = dst.param_f(3);
    }
    MB_SET_NE(args, ne0, src0);
    MB_SET_NB(args, nb0, src0);
    MB_SET_NB(args, nb, dst);
    const std::string name = std::string("kernel_unary_") + (dst.type == Type::F16 ? "f16" : "f32") +
                             (flat ? (vec4 ? "_4" : "") : "_rows");
    const Pipeline& p = enc.use(name, {FunctionConstant::int32(200, unary_op(dst.op))});
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    const uint32_t max_nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    if (flat) {
        enc.dispatch({uint32_t((uint64_t(args.n) + max_nth - 1) / max_nth), 1, 1}, {max_nth, 1, 1});
    } else {
        // 32 threads, doubled while the row is longer.
        uint32_t nth = 32;
        while (nth < dst.ne[0] && 2 * nth <= max_nth) nth *= 2;
        enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    }
    return 1;
}

}  // namespace mb::metal
