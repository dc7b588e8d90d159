// POOL_2D (ggml_pool_2d): f32 [W, H, C, N] -> f32 [OW, OH, C, N], windows k0 x k1 at strides s0, s1
// from -p0, -p1. Max over the window's cells inside the input; avg sums those and divides by
// k0*k1, as ggml does (padding counts as zeros). params i[0] = op (0 max, 1 avg), i[1..6] = k0, k1,
// s0, s1, p0, p1.
#include <cfloat>
#include <cstddef>
#include <cstdint>

#include "cpu/kernels/kernels.h"

namespace mb {

bool pool_2d_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    return dst.op == Op::POOL_2D && a && a->type == Type::F32 && dst.type == Type::F32;
}

void compute_pool_2d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const bool avg = dst.op_params[0] == 1;
    const int64_t k0 = dst.op_params[1], k1 = dst.op_params[2], s0 = dst.op_params[3], s1 = dst.op_params[4];
    const int64_t p0 = dst.op_params[5], p1 = dst.op_params[6];
    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2] * dst.ne[3], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t oy = r % dst.ne[1], c = (r / dst.ne[1]) % dst.ne[2], n = r / (dst.ne[1] * dst.ne[2]);
        for (int64_t ox = 0; ox < dst.ne[0]; ++ox) {
            float acc = avg ? 0.0f : -FLT_MAX;
            for (int64_t ky = 0; ky < k1; ++ky) {
                const int64_t iy = oy * s1 - p1 + ky;
                if (iy < 0 || iy >= a.ne[1]) continue;
                for (int64_t kx = 0; kx < k0; ++kx) {
                    const int64_t ix = ox * s0 - p0 + kx;
                    if (ix < 0 || ix >= a.ne[0]) continue;
                    const float v = *reinterpret_cast<const float*>(at(a, ix, iy, c, n));
                    acc = avg ? acc + v : (v > acc ? v : acc);
                }
            }
            *reinterpret_cast<float*>(at(dst, ox, oy, c, n)) = avg ? acc / float(k0 * k1) : acc;
        }
    }
}

}  // namespace mb
