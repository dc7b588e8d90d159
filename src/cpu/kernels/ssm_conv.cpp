// SSM_CONV (Mamba's causal depthwise conv, ggml_ssm_conv): sx f32 [d_conv - 1 + n_t, d_inner, n_s],
// c f32 [d_conv, d_inner] -> f32 [d_inner, n_t, n_s]: out[ch, t, s] = sum_k sx[t + k, ch, s] * c[k, ch].
#include <cstddef>
#include <cstdint>

#include "cpu/kernels/kernels.h"

namespace mb {

bool ssm_conv_supported(const Tensor& dst) {
    const Tensor* sx = dst.src[0];
    const Tensor* c = dst.src[1];
    return dst.op == Op::SSM_CONV && sx && c && sx->type == Type::F32 && c->type == Type::F32 &&
           dst.type == Type::F32;
}

void compute_ssm_conv(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& sx = *dst.src[0];
    const Tensor& c = *dst.src[1];
    const int64_t d_conv = c.ne[0];
    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r % dst.ne[1], s = r / dst.ne[1];
        for (int64_t ch = 0; ch < dst.ne[0]; ++ch) {
            float acc = 0.0f;
            for (int64_t k = 0; k < d_conv; ++k) {
                acc += *reinterpret_cast<const float*>(at(sx, t + k, ch, s)) *
                       *reinterpret_cast<const float*>(at(c, k, ch));
            }
            *reinterpret_cast<float*>(at(dst, ch, t, s)) = acc;
        }
    }
}

}  // namespace mb
