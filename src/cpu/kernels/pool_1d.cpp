// POOL_1D (ggml_pool_1d): f32 rows [W, ...] -> f32 [OW, ...], windows of k0 at stride s0 from -p0
// (p0 < k0, so every window holds a cell of the row). Max over the window's cells inside the row;
// avg over those cells only (ggml's pool_1d, unlike its pool_2d, leaves padding out of the count).
// params i[0] = op (0 max, 1 avg), i[1..3] = k0, s0, p0.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

bool pool_1d_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    return dst.op == Op::POOL_1D && a && a->type == Type::F32 && dst.type == Type::F32 && dst.ne[1] == a->ne[1] &&
           dst.ne[2] == a->ne[2] && dst.ne[3] == a->ne[3] && dst.op_params[3] < dst.op_params[1];
}

void compute_pool_1d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const bool avg = dst.op_params[0] == 1;
    const int64_t k0 = dst.op_params[1], s0 = dst.op_params[2], p0 = dst.op_params[3];
    const int64_t iw = a.ne[0];
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        const uint8_t* x = vec::row_ptr(a, ix);
        uint8_t* y = vec::row_ptr(dst, ix);
        for (int64_t o = 0; o < dst.ne[0]; ++o) {
            const int64_t j0 = std::max<int64_t>(0, o * s0 - p0), j1 = std::min<int64_t>(iw, o * s0 - p0 + k0);
            float acc;
            std::memcpy(&acc, x + size_t(j0) * a.nb[0], sizeof acc);
            for (int64_t j = j0 + 1; j < j1; ++j) {
                float v;
                std::memcpy(&v, x + size_t(j) * a.nb[0], sizeof v);
                acc = avg ? acc + v : (v > acc ? v : acc);
            }
            if (avg) acc /= float(j1 - j0);
            std::memcpy(y + size_t(o) * dst.nb[0], &acc, sizeof acc);
        }
    }
}

}  // namespace mb
