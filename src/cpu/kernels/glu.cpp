// REGLU GEGLU SWIGLU GEGLU_ERF GEGLU_QUICK SWIGLU_OAI: dst = act(x) * g per row of f32 with any
// strides, x and g the halves of one row of src0 (swapped: g first) or rows of src0 and src1.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

struct GluParams {
    float alpha, limit;
};

template <class F>
void run(const F& act, const ComputeParams& p, Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const Tensor& b = dst.src[1] ? *dst.src[1] : a;
    const int64_t nc = dst.ne[0];
    int64_t off0 = 0, off1 = 0;
    if (!dst.src[1]) {
        const bool swapped = dst.op_params[0] != 0;
        off0 = swapped ? nc : 0;
        off1 = swapped ? 0 : nc;
    }
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        const uint8_t* xr = vec::row_ptr(a, ix);
        const uint8_t* gr = vec::row_ptr(b, ix);
        uint8_t* yr = vec::row_ptr(dst, ix);
        if (dst.type == Type::F16) {  // f16 in and out, computed in f32
            for (int64_t i = 0; i < nc; ++i) {
                const float x = fp16_to_fp32(*reinterpret_cast<const uint16_t*>(xr + (off0 + i) * a.nb[0]));
                const float g = fp16_to_fp32(*reinterpret_cast<const uint16_t*>(gr + (off1 + i) * b.nb[0]));
                *reinterpret_cast<uint16_t*>(yr + i * dst.nb[0]) = fp32_to_fp16(act(x, g));
            }
            continue;
        }
        for (int64_t i = 0; i < nc; ++i) {
            const float x = *reinterpret_cast<const float*>(xr + (off0 + i) * a.nb[0]);
            const float g = *reinterpret_cast<const float*>(gr + (off1 + i) * b.nb[0]);
            *reinterpret_cast<float*>(yr + i * dst.nb[0]) = act(x, g);
        }
    }
}

}  // namespace

bool glu_supported(const Tensor& dst) {
    if (op_family(dst.op) != OpFamily::Glu) return false;
    const Tensor* a = dst.src[0];
    const Tensor* b = dst.src[1];
    if (!a || (a->type != Type::F32 && a->type != Type::F16) || dst.type != a->type) return false;
    if (b) return b->type == a->type && vec::same_shape(*a, dst) && vec::same_shape(*b, dst);
    return a->ne[0] == 2 * dst.ne[0] && a->ne[1] == dst.ne[1] && a->ne[2] == dst.ne[2] && a->ne[3] == dst.ne[3];
}

void compute_glu(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const GluParams gp{dst.param_f(1), dst.param_f(2)};
    switch (dst.op) {
        case Op::REGLU: return run([](float x, float g) { return (x > 0.0f ? x : 0.0f) * g; }, p, dst);
        case Op::GEGLU: return run([](float x, float g) { return vec::gelu(x) * g; }, p, dst);
        case Op::SWIGLU: return run([](float x, float g) { return vec::x_sigmoid(x, 1.0f) * g; }, p, dst);
        case Op::GEGLU_ERF: return run([](float x, float g) { return vec::gelu_erf(x) * g; }, p, dst);
        case Op::GEGLU_QUICK:
            return run([](float x, float g) { return vec::x_sigmoid(x, vec::kGeluQuick) * g; }, p, dst);
        case Op::SWIGLU_OAI:
            return run([gp](float x, float g) {
                const float xc = std::min(x, gp.limit);
                const float gc = std::min(std::max(g, -gp.limit), gp.limit);
                return xc / (1.0f + std::exp(-gp.alpha * xc)) * (gc + 1.0f);
            }, p, dst);
        default: break;
    }
    fail<InvalidArgumentError>("compute_glu", "not a GLU op: ", op_name(dst.op));
}

}  // namespace mb
