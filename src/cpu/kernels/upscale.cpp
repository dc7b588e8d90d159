// UPSCALE (ggml_upscale_ext, nearest): dst[i0, i1, i2, i3] = a[i0 / sf0, i1 / sf1, i2 / sf2, i3 / sf3]
// rounded down, sf_d = dst.ne[d] / a.ne[d] as floats, as ggml computes it.
#include <cstddef>
#include <cstdint>

#include "cpu/kernels/kernels.h"

namespace mb {

bool upscale_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    return dst.op == Op::UPSCALE && a && a->type == Type::F32 && dst.type == Type::F32;
}

void compute_upscale(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    float sf[kMaxDims];
    for (int d = 0; d < kMaxDims; ++d) sf[d] = float(dst.ne[d]) / float(a.ne[d]);
    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2] * dst.ne[3], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        const int64_t j1 = int64_t(float(i1) / sf[1]), j2 = int64_t(float(i2) / sf[2]), j3 = int64_t(float(i3) / sf[3]);
        for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0) {
            const int64_t j0 = int64_t(float(i0) / sf[0]);
            *reinterpret_cast<float*>(at(dst, i0, i1, i2, i3)) = *reinterpret_cast<const float*>(at(a, j0, j1, j2, j3));
        }
    }
}

}  // namespace mb
