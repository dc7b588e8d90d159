// OUT_PROD on the Metal device (shaders/out_prod.metal): f32, any source strides, one threadgroup per
// dst row.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

bool supports_out_prod(const RuntimeProps&, const Tensor& node) {
    if (!plain_f32_supports(node, Op::OUT_PROD, 2)) return false;
    const Tensor& a = *node.src[0];
    const Tensor& b = *node.src[1];
    return a.ne[1] == b.ne[1] && a.ne[2] > 0 && a.ne[3] > 0 && b.ne[2] % a.ne[2] == 0 && b.ne[3] % a.ne[3] == 0 &&
           node.ne[0] == a.ne[0] && node.ne[1] == b.ne[0] && node.ne[2] == b.ne[2] && node.ne[3] == b.ne[3];
}

size_t encode_out_prod(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    mb_kargs_out_prod k{};
    MB_SET_NE(k, ne0, a);
    MB_SET_NB(k, nb0, a);
    MB_SET_NE(k, ne1, b);
    MB_SET_NB(k, nb1, b);
    MB_SET_NB(k, nb, dst);
    // An empty a (K = 0) is never read; dst stands in for it so that every slot is bound.
    encode_plain(enc, "kernel_out_prod_f32", k, {a.is_empty() ? &dst : &a, b.is_empty() ? &dst : &b}, dst,
                 {uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, dst.ne[0]);
    return 1;
}

}  // namespace mb::metal
