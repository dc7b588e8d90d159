// ADD_ID: dst[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]] (a per-row bias picked by expert id).
#include <cstddef>
#include <cstdint>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"

namespace mb {

bool add_id_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const Tensor* b = dst.src[1];
    const Tensor* ids = dst.src[2];
    return dst.op == Op::ADD_ID && a && b && ids && a->type == Type::F32 && b->type == Type::F32 &&
           ids->type == Type::I32 && dst.type == Type::F32;
}

void compute_add_id(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const Tensor& ids = *dst.src[2];
    int64_t r0, r1;
    split_range(dst.ne[1] * dst.ne[2] * dst.ne[3], p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        const int32_t id = *reinterpret_cast<const int32_t*>(at(ids, i1, i2));
        if (id < 0 || id >= b.ne[1]) {
            fail<OutOfRangeError>("ADD_ID", "id ", id, " out of range for b ", b.describe(), " (", b.ne[1],
                                  " rows) at ids[", i2, ", ", i1, "]");
        }
        for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0) {
            const float x = *reinterpret_cast<const float*>(at(a, i0, i1, i2, i3));
            const float y = *reinterpret_cast<const float*>(at(b, i0, id));
            *reinterpret_cast<float*>(at(dst, i0, i1, i2, i3)) = x + y;
        }
    }
}

}  // namespace mb
