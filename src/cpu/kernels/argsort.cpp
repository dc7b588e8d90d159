// ARGSORT: per row of f32 (any strides), the i32 indices that sort it ascending or descending
// (params i[0] = 1: descending). Ties keep index order; NaNs go last in either order.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "cpu/kernels/kernels.h"

namespace mb {

bool argsort_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    return dst.op == Op::ARGSORT && a && a->type == Type::F32 && dst.type == Type::I32 &&
           a->ne[0] == dst.ne[0] && a->ne[1] == dst.ne[1] && a->ne[2] == dst.ne[2] && a->ne[3] == dst.ne[3];
}

void compute_argsort(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const bool desc = dst.op_params[0] != 0;
    const int64_t n = dst.ne[0];
    std::vector<float> x(static_cast<size_t>(n));
    std::vector<int32_t> idx(static_cast<size_t>(n));
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i1 = r % dst.ne[1], i2 = (r / dst.ne[1]) % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
        for (int64_t i = 0; i < n; ++i) x[size_t(i)] = *reinterpret_cast<const float*>(at(a, i, i1, i2, i3));
        std::iota(idx.begin(), idx.end(), 0);
        // A strict weak order even with NaNs (last), so std::stable_sort is well defined.
        auto before = [&](int32_t l, int32_t r2) {
            const float xl = x[size_t(l)], xr = x[size_t(r2)];
            if (std::isnan(xl)) return false;
            if (std::isnan(xr)) return true;
            return desc ? xl > xr : xl < xr;
        };
        std::stable_sort(idx.begin(), idx.end(), before);
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<int32_t*>(at(dst, i, i1, i2, i3)) = idx[size_t(i)];
    }
}

}  // namespace mb
