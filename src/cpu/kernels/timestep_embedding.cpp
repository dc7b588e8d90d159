// TIMESTEP_EMBEDDING (ggml's sinusoidal embedding of diffusion timesteps): row i of dst holds
// cos(t_i f_j) for j < dim/2, then sin(t_i f_j), f_j = max_period^(-j / (dim/2)); an odd dim ends
// in a 0.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cpu/kernels/kernels.h"

namespace mb {

bool timestep_embedding_supported(const Tensor& dst) {
    const Tensor* t = dst.src[0];
    return dst.op == Op::TIMESTEP_EMBEDDING && t && t->type == Type::F32 && dst.type == Type::F32;
}

void compute_timestep_embedding(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& ts = *dst.src[0];
    const int dim = dst.op_params[0];
    const int max_period = dst.op_params[1];
    const int half = dim / 2;
    int64_t r0, r1;
    split_range(dst.ne[1], p.ith, p.nth, &r0, &r1);
    for (int64_t i = r0; i < r1; ++i) {
        const float t = *reinterpret_cast<const float*>(at(ts, i));
        for (int j = 0; j < half; ++j) {
            const float freq = std::exp(-std::log(float(max_period)) * float(j) / float(half));
            const float arg = t * freq;
            *reinterpret_cast<float*>(at(dst, j, i)) = std::cos(arg);
            *reinterpret_cast<float*>(at(dst, j + half, i)) = std::sin(arg);
        }
        if (dim % 2 != 0) *reinterpret_cast<float*>(at(dst, 2 * half, i)) = 0.0f;
    }
}

}  // namespace mb
