// SUM, SUM_ROWS, MEAN and ARGMAX over each row of an f32 tensor with any strides. SUM: each thread
// sums its rows in double into its scratch slot, and thread 0 adds the slots in order.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

double row_sum(const uint8_t* row, size_t stride, int64_t n) {
    if (stride == sizeof(float)) return vec::sum(reinterpret_cast<const float*>(row), n);
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, row + size_t(i) * stride, sizeof v);
        s += v;
    }
    return s;
}

// First index of the largest value; NaNs never win (as ggml).
int32_t row_argmax(const uint8_t* row, size_t stride, int64_t n) {
    float best;
    std::memcpy(&best, row, sizeof best);
    int32_t idx = 0;
    for (int64_t i = 1; i < n; ++i) {
        float v;
        std::memcpy(&v, row + size_t(i) * stride, sizeof v);
        if (v > best || (best != best && v == v)) {
            best = v;
            idx = int32_t(i);
        }
    }
    return idx;
}

}  // namespace

size_t reduce_work_size(const Tensor& dst, int nth) {
    return dst.op == Op::SUM ? size_t(nth) * sizeof(double) : 0;
}

bool reduce_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    if (a == nullptr || a->type != Type::F32) return false;
    switch (dst.op) {
        case Op::SUM:
            return dst.type == Type::F32 && dst.nelements() == 1;
        case Op::SUM_ROWS:
        case Op::MEAN:
            return dst.type == Type::F32 && dst.ne[0] == 1 && dst.ne[1] == a->ne[1] && dst.ne[2] == a->ne[2] &&
                   dst.ne[3] == a->ne[3];
        case Op::ARGMAX:
            // An index fits i32, and an empty row has no maximum to name.
            return dst.type == Type::I32 && a->ne[2] == 1 && a->ne[3] == 1 && dst.ne[0] == a->ne[1] &&
                   dst.nelements() == a->ne[1] && a->ne[0] > 0 && a->ne[0] <= INT32_MAX;
        default:
            return false;
    }
}

void compute_reduce(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const int64_t n = a.ne[0];
    int64_t r0, r1;
    split_range(a.nrows(), p.ith, p.nth, &r0, &r1);
    if (dst.op == Op::SUM) {
        double s = 0.0;
        for (int64_t r = r0; r < r1; ++r) s += row_sum(vec::row_ptr(a, vec::row_index(a, r)), a.nb[0], n);
        double* partial = reinterpret_cast<double*>(p.wdata);
        partial[p.ith] = s;
        p.barrier();
        if (p.ith == 0) {
            double total = 0.0;
            for (int t = 0; t < p.nth; ++t) total += partial[t];
            const float v = float(total);
            std::memcpy(host_data(dst), &v, sizeof v);
        }
        return;
    }
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(a, r);
        const uint8_t* row = vec::row_ptr(a, ix);
        if (dst.op == Op::ARGMAX) {
            const int32_t idx = row_argmax(row, a.nb[0], n);
            std::memcpy(host_data(dst) + size_t(ix.i1) * dst.nb[0], &idx, sizeof idx);
            continue;
        }
        double s = row_sum(row, a.nb[0], n);
        if (dst.op == Op::MEAN) s /= double(n);
        const float v = float(s);
        std::memcpy(vec::row_ptr(dst, ix), &v, sizeof v);
    }
}

}  // namespace mb
