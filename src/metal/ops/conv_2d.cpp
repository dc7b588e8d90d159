// CONV_2D and CONV_2D_DW (direct) on the Metal device (shaders/conv_2d.metal): kernel f32 or f16,
// data f32 with any strides, f32 result; one threadgroup per dst row.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

bool supports_conv_2d(const RuntimeProps&, const Tensor& node) {
    if (node.op != Op::CONV_2D && node.op != Op::CONV_2D_DW) return false;
    if (!plain_f32_supports(node, node.op, 2, true)) return false;
    const Tensor& w = *node.src[0];
    const Tensor& x = *node.src[1];
    for (int i = 0; i < 6; ++i) {
        if ((i < 2 || i >= 4) ? node.op_params[i] <= 0 : node.op_params[i] < 0) return false;
    }
    if (node.op == Op::CONV_2D) return w.ne[2] == x.ne[2] && node.ne[2] == w.ne[3] && node.ne[3] == x.ne[3];
    return w.ne[2] == 1 && w.ne[3] == x.ne[2] && node.ne[2] == x.ne[2] && node.ne[3] == x.ne[3];
}

size_t encode_conv_2d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& w = *dst.src[0];
    const Tensor& x = *dst.src[1];
    mb_kargs_conv_2d k{};
    MB_SET_NE(k, ne0, w);
    MB_SET_NB(k, nb0, w);
    MB_SET_NE(k, ne1, x);
    MB_SET_NB(k, nb1, x);
    MB_SET_NE(k, ne, dst);
    MB_SET_NB(k, nb, dst);
    k.s0 = dst.op_params[0];
    k.s1 = dst.op_params[1];
    k.p0 = dst.op_params[2];
    k.p1 = dst.op_params[3];
    k.d0 = dst.op_params[4];
    k.d1 = dst.op_params[5];
    k.dw = dst.op == Op::CONV_2D_DW ? 1 : 0;
    // An empty operand is never read; dst stands in for it so that every slot is bound.
    encode_plain(enc, w.type == Type::F16 ? "kernel_conv_2d_f16_f32" : "kernel_conv_2d_f32_f32", k,
                 {w.is_empty() ? &dst : &w, x.is_empty() ? &dst : &x}, dst,
                 {uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, dst.ne[0]);
    return 1;
}

}  // namespace mb::metal
