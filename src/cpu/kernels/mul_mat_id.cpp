// MUL_MAT_ID (ggml's expert routing): dst[:, e, t] = as[ids[e, t]] @ b[:, e % b.ne1, t]. Each
// product is a row of mat-vec dots through vec_dot.h, so every weight type mul_mat takes (float and
// quantized) works here the same way; threads split the expert matrix's rows.
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "core/types.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec_dot.h"

namespace mb {

namespace {

VecType act_type(const Tensor& dst) { return vec_type_for(dst.src[0]->type, Type::F32); }

}  // namespace

bool mul_mat_id_supported(const Tensor& dst) {
    const Tensor* as = dst.src[0];
    const Tensor* b = dst.src[1];
    const Tensor* ids = dst.src[2];
    if (dst.op != Op::MUL_MAT_ID || !as || !b || !ids || dst.type != Type::F32) return false;
    if (b->type != Type::F32 || ids->type != Type::I32) return false;
    if (!vec_dot_fn(as->type, act_type(dst))) return false;
    const auto& tr = type_traits(as->type);
    return as->nb[0] == tr.type_size && as->ne[0] % tr.block_size == 0;
}

size_t mul_mat_id_work_size(const Tensor& dst, int nth) {
    return size_t(nth) * (vec_row_bytes(act_type(dst), dst.src[0]->ne[0]) + 64);
}

void compute_mul_mat_id(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& as = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const Tensor& ids = *dst.src[2];
    const int64_t k = as.ne[0], n = as.ne[1], n_as = as.ne[2];
    const VecType vt = act_type(dst);
    const VecDotFn dot = vec_dot_fn(as.type, vt);
    const size_t row_bytes = (vec_row_bytes(vt, k) + 63) / 64 * 64;
    uint8_t* prep = p.wdata + size_t(p.ith) * (row_bytes + 64);
    int64_t r0, r1;
    split_range(n, p.ith, p.nth, &r0, &r1);
    for (int64_t t = 0; t < dst.ne[2]; ++t) {
        for (int64_t e = 0; e < dst.ne[1]; ++e) {
            const int32_t expert = *reinterpret_cast<const int32_t*>(at(ids, e, t));
            if (expert < 0 || expert >= n_as) {
                fail<OutOfRangeError>("MUL_MAT_ID", "expert id ", expert, " out of range for ", as.describe(), " (",
                                      n_as, " experts) at ids[", t, ", ", e, "]");
            }
            if (r1 <= r0) continue;
            vec_prepare_row(vt, Type::F32, at(b, 0, e % b.ne[1], t), b.nb[0], k, prep);
            const uint8_t* w = host_data(as) + size_t(expert) * as.nb[2];
            for (int64_t r = r0; r < r1; ++r) {
                *reinterpret_cast<float*>(at(dst, r, e, t)) = dot(k, w + size_t(r) * as.nb[1], prep);
            }
        }
    }
}

}  // namespace mb
