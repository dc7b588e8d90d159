// ACC (ggml_acc) and SET (ggml_set): dst = a (contiguous f32) with b added into (SET: written into)
// the view of dst at byte offset params i[3] and byte strides i[0..2] (nb1, nb2, nb3; nb0 = 4). The
// view's elements are distinct (checked when the graph is built), so each is added (written) once.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/kernels.h"

namespace mb {

bool acc_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const Tensor* b = dst.src[1];
    return (dst.op == Op::ACC || dst.op == Op::SET) && a && b && a->type == Type::F32 && b->type == Type::F32 &&
           dst.type == Type::F32 &&
           a->is_contiguous() && dst.is_contiguous();
}

void compute_acc(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    // Phase 1: copy (each thread its part), phase 2: add b's rows (each thread its rows).
    int64_t e0, e1;
    split_range(dst.nelements(), p.ith, p.nth, &e0, &e1);
    if (host_data(dst) != host_data(a) && e1 > e0) {
        std::memcpy(host_data(dst) + e0 * 4, host_data(a) + e0 * 4, size_t(e1 - e0) * 4);
    }
    p.barrier();
    const size_t nb1 = size_t(dst.op_params[0]), nb2 = size_t(dst.op_params[1]), nb3 = size_t(dst.op_params[2]);
    const size_t offset = size_t(dst.op_params[3]);
    int64_t r0, r1;
    split_range(b.ne[1] * b.ne[2] * b.ne[3], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % b.ne[1], i2 = (r / b.ne[1]) % b.ne[2], i3 = r / (b.ne[1] * b.ne[2]);
        float* y = reinterpret_cast<float*>(host_data(dst) + offset + size_t(i1) * nb1 + size_t(i2) * nb2 +
                                            size_t(i3) * nb3);
        if (dst.op == Op::SET) {
            for (int64_t i0 = 0; i0 < b.ne[0]; ++i0) y[i0] = *reinterpret_cast<const float*>(at(b, i0, i1, i2, i3));
        } else {
            for (int64_t i0 = 0; i0 < b.ne[0]; ++i0) y[i0] += *reinterpret_cast<const float*>(at(b, i0, i1, i2, i3));
        }
    }
}

}  // namespace mb
