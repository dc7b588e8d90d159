// CONV_TRANSPOSE_2D on the Metal device (shaders/conv_transpose_2d.metal): kernel f32 or f16, data
// f32 with any strides, f32 result; one threadgroup per dst row.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

bool supports_conv_transpose_2d(const RuntimeProps&, const Tensor& node) {
    if (!plain_f32_supports(node, Op::CONV_TRANSPOSE_2D, 2, true)) return false;
    const Tensor& w = *node.src[0];
    const Tensor& x = *node.src[1];
    const int64_t s = node.op_params[0];
    return s > 0 && w.ne[3] == x.ne[2] && node.ne[2] == w.ne[2] && node.ne[3] == x.ne[3] && x.ne[0] > 0 &&
           x.ne[1] > 0 && node.ne[0] == (x.ne[0] - 1) * s + w.ne[0] && node.ne[1] == (x.ne[1] - 1) * s + w.ne[1];
}

size_t encode_conv_transpose_2d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
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
    k.s0 = k.s1 = dst.op_params[0];
    k.d0 = k.d1 = 1;
    encode_plain(enc, w.type == Type::F16 ? "kernel_conv_transpose_2d_f16_f32" : "kernel_conv_transpose_2d_f32_f32", k,
                 {w.is_empty() ? &dst : &w, &x}, dst, {uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])},
                 dst.ne[0]);
    return 1;
}

}  // namespace mb::metal
