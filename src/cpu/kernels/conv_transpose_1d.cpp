// CONV_TRANSPOSE_1D: kernel [K, OC, IC] (f32 or f16), data f32 [L, IC, N] -> f32 [OL, OC, N] with
// out[n][oc][l*s0 + k*d0 - p0] += data[n][ic][l] * kernel[ic][oc][k]; each output gathers its terms,
// so threads write disjoint outputs. params i[0..2] = s0, p0, d0.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/fp16.h"
#include "cpu/kernels/kernels.h"

namespace mb {

namespace {

float load(const Tensor& t, int64_t i0, int64_t i1, int64_t i2) {
    const uint8_t* p = at(t, i0, i1, i2);
    if (t.type == Type::F16) return fp16_to_fp32(*reinterpret_cast<const uint16_t*>(p));
    return *reinterpret_cast<const float*>(p);
}

}  // namespace

bool conv_transpose_1d_supported(const Tensor& dst) {
    const Tensor* k = dst.src[0];
    const Tensor* x = dst.src[1];
    return dst.op == Op::CONV_TRANSPOSE_1D && k && x && (k->type == Type::F32 || k->type == Type::F16) &&
           x->type == Type::F32 && dst.type == Type::F32;
}

void compute_conv_transpose_1d(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& kern = *dst.src[0];
    const Tensor& x = *dst.src[1];
    const int64_t s0 = dst.op_params[0], p0 = dst.op_params[1], d0 = dst.op_params[2];
    const int64_t K = kern.ne[0], IC = kern.ne[2], L = x.ne[0];
    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t oc = r % dst.ne[1], n = r / dst.ne[1];
        for (int64_t ol = 0; ol < dst.ne[0]; ++ol) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; ++k) {
                const int64_t num = ol + p0 - k * d0;
                if (num < 0 || num % s0 != 0) continue;
                const int64_t l = num / s0;
                if (l >= L) continue;
                for (int64_t ic = 0; ic < IC; ++ic) s += load(x, l, ic, n) * load(kern, k, oc, ic);
            }
            *reinterpret_cast<float*>(at(dst, ol, oc, n)) = s;
        }
    }
}

}  // namespace mb
