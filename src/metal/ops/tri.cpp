// TRI, DIAG_MASK_INF, DIAG_MASK_ZERO and DIAG on the Metal device (shaders/tri.metal): one
// threadgroup per dst row, f32 or f16, any source strides.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tri_band.h"
#include "kargs.h"
#include "metal/ops/ops.h"

namespace mb::metal {

bool supports_tri(const RuntimeProps&, const Tensor& node) {
    const Tensor* a = node.src[0];
    if (!a || (a->type != Type::F32 && a->type != Type::F16) || node.type != a->type) return false;
    if (!fits_i32(*a) || !fits_i32(node)) return false;
    switch (node.op) {
        case Op::TRI:
            if (node.op_params[0] < 0 || node.op_params[0] > 3) return false;
            [[fallthrough]];
        case Op::DIAG_MASK_INF:
        case Op::DIAG_MASK_ZERO:
            for (int d = 0; d < kMaxDims; ++d) {
                if (a->ne[d] != node.ne[d]) return false;
            }
            return true;
        case Op::DIAG:
            return a->ne[1] == 1 && node.ne[0] == a->ne[0] && node.ne[1] == a->ne[0] && node.ne[2] == a->ne[2] &&
                   node.ne[3] == a->ne[3];
        default:
            return false;
    }
}

size_t encode_tri(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& a = *dst.src[0];
    const TriBand band = tri_band(dst);
    mb_kargs_tri k{};
    MB_SET_NB(k, nb0, a);
    if (dst.op == Op::DIAG) k.nb01 = 0;
    MB_SET_NE(k, ne, dst);
    MB_SET_NB(k, nb, dst);
    k.lo = band.lo;
    k.hi = band.hi;
    k.fill = band.fill;
    const Pipeline& p = enc.use(dst.type == Type::F16 ? "kernel_tri_f16" : "kernel_tri_f32");
    enc.args(k);
    enc.input(a, 1);
    enc.output(dst, 2);
    const uint32_t nth = uint32_t(std::min<int64_t>({dst.ne[0], 256, int64_t(p.max_threads_per_threadgroup())}));
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
