// ARANGE: dst[i] = start + i * step, f32 (params f[0] start, f[2] step).
#include <cstddef>
#include <cstdint>

#include "cpu/kernels/kernels.h"

namespace mb {

bool arange_supported(const Tensor& dst) {
    return dst.op == Op::ARANGE && dst.type == Type::F32 && dst.is_contiguous();
}

void compute_arange(const ComputeParams& p, Tensor& dst) {
    const float start = dst.param_f(0);
    const float step = dst.param_f(2);
    int64_t i0, i1;
    split_range(dst.ne[0], p.ith, p.nth, &i0, &i1);
    float* y = reinterpret_cast<float*>(host_data(dst));
    for (int64_t i = i0; i < i1; ++i) y[i] = start + float(i) * step;
}

}  // namespace mb
