// CONCAT, REPEAT, PAD, PAD_REFLECT_1D and ROLL: raw element moves (any non-quantized type, any
// strides), one dst row at a time.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

void concat_row(const Tensor& a, const Tensor& b, int dim, Tensor& dst, const vec::RowIndex& ix, size_t es) {
    uint8_t* drow = vec::row_ptr(dst, ix);
    if (dim == 0) {
        vec::copy_elems(vec::row_ptr(a, ix), a.nb[0], drow, dst.nb[0], a.ne[0], es);
        vec::copy_elems(vec::row_ptr(b, ix), b.nb[0], drow + size_t(a.ne[0]) * dst.nb[0], dst.nb[0], b.ne[0], es);
        return;
    }
    int64_t i[4] = {0, ix.i1, ix.i2, ix.i3};
    const bool from_a = i[dim] < a.ne[dim];
    if (!from_a) i[dim] -= a.ne[dim];
    const Tensor& s = from_a ? a : b;
    vec::copy_elems(at(s, 0, i[1], i[2], i[3]), s.nb[0], drow, dst.nb[0], dst.ne[0], es);
}

void repeat_row(const Tensor& a, Tensor& dst, const vec::RowIndex& ix, size_t es) {
    const uint8_t* srow = vec::row_ptr(a, {ix.i1 % a.ne[1], ix.i2 % a.ne[2], ix.i3 % a.ne[3]});
    uint8_t* drow = vec::row_ptr(dst, ix);
    for (int64_t k = 0; k < dst.ne[0]; k += a.ne[0]) {
        vec::copy_elems(srow, a.nb[0], drow + size_t(k) * dst.nb[0], dst.nb[0], a.ne[0], es);
    }
}

void pad_row(const Tensor& a, Tensor& dst, const vec::RowIndex& ix, size_t es) {
    uint8_t* drow = vec::row_ptr(dst, ix);
    int64_t copied = 0;
    if (ix.i1 < a.ne[1] && ix.i2 < a.ne[2] && ix.i3 < a.ne[3]) {
        copied = a.ne[0];
        vec::copy_elems(vec::row_ptr(a, ix), a.nb[0], drow, dst.nb[0], copied, es);
    }
    vec::zero_elems(drow + size_t(copied) * dst.nb[0], dst.nb[0], dst.ne[0] - copied, es);
}

// dst[i] = a[reflect(i - p0)]: indices before 0 mirror about element 0, past the end about the last.
void pad_reflect_row(const Tensor& a, Tensor& dst, const vec::RowIndex& ix, size_t es) {
    const uint8_t* srow = vec::row_ptr(a, ix);
    uint8_t* drow = vec::row_ptr(dst, ix);
    const int64_t p0 = dst.op_params[0];
    const int64_t n = a.ne[0];
    for (int64_t i = 0; i < dst.ne[0]; ++i) {
        int64_t j = i - p0;
        if (j < 0) j = -j;
        if (j >= n) j = 2 * (n - 1) - j;
        std::memcpy(drow + size_t(i) * dst.nb[0], srow + size_t(j) * a.nb[0], es);
    }
}

// np.roll: dst[i] = a[(i - shift) mod ne] on every dim (op_params[0..3] the shifts, |shift| < ne).
int64_t roll_shift(const Tensor& dst, int d) {
    const int64_t n = dst.ne[d];
    return n == 0 ? 0 : ((int64_t(dst.op_params[d]) % n) + n) % n;
}

void roll_row(const Tensor& a, Tensor& dst, const vec::RowIndex& ix, size_t es) {
    auto src = [&](int64_t i, int d) { const int64_t v = i - roll_shift(dst, d); return v < 0 ? v + dst.ne[d] : v; };
    const uint8_t* srow = vec::row_ptr(a, {src(ix.i1, 1), src(ix.i2, 2), src(ix.i3, 3)});
    uint8_t* drow = vec::row_ptr(dst, ix);
    const int64_t n = dst.ne[0], s = roll_shift(dst, 0);
    vec::copy_elems(srow, a.nb[0], drow + size_t(s) * dst.nb[0], dst.nb[0], n - s, es);
    vec::copy_elems(srow + size_t(n - s) * a.nb[0], a.nb[0], drow, dst.nb[0], s, es);
}

}  // namespace

bool layout_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    if (a == nullptr || a->type != dst.type || type_traits(dst.type).is_quantized) return false;
    switch (dst.op) {
        case Op::CONCAT: {
            const Tensor* b = dst.src[1];
            const int dim = dst.op_params[0];
            if (b == nullptr || b->type != dst.type || dim < 0 || dim >= kMaxDims) return false;
            for (int i = 0; i < kMaxDims; ++i) {
                const int64_t want = i == dim ? a->ne[i] + b->ne[i] : a->ne[i];
                if (dst.ne[i] != want || (i != dim && b->ne[i] != a->ne[i])) return false;
            }
            return true;
        }
        case Op::REPEAT:
            for (int i = 0; i < kMaxDims; ++i) {
                if (a->ne[i] == 0 ? dst.ne[i] != 0 : dst.ne[i] % a->ne[i] != 0) return false;
            }
            return true;
        case Op::PAD:
            for (int i = 0; i < kMaxDims; ++i) {
                if (dst.op_params[i] < 0 || dst.ne[i] != a->ne[i] + dst.op_params[i]) return false;
            }
            return true;
        case Op::ROLL:
            for (int i = 0; i < kMaxDims; ++i) {
                if (dst.ne[i] != a->ne[i] || std::abs(int64_t(dst.op_params[i])) >= std::max<int64_t>(a->ne[i], 1)) {
                    return false;
                }
            }
            return true;
        case Op::PAD_REFLECT_1D: {
            const int p0 = dst.op_params[0], p1 = dst.op_params[1];
            if (p0 < 0 || p1 < 0 || p0 >= a->ne[0] || p1 >= a->ne[0] || dst.ne[0] != a->ne[0] + p0 + p1) return false;
            for (int i = 1; i < kMaxDims; ++i) {
                if (dst.ne[i] != a->ne[i]) return false;
            }
            return true;
        }
        default:
            return false;
    }
}

void compute_layout(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const size_t es = type_traits(dst.type).type_size;
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        switch (dst.op) {
            case Op::CONCAT: concat_row(a, *dst.src[1], dst.op_params[0], dst, ix, es); break;
            case Op::REPEAT: repeat_row(a, dst, ix, es); break;
            case Op::PAD: pad_row(a, dst, ix, es); break;
            case Op::PAD_REFLECT_1D: pad_reflect_row(a, dst, ix, es); break;
            case Op::ROLL: roll_row(a, dst, ix, es); break;
            default: fail<InvalidArgumentError>("compute_layout", "not a layout op: ", op_name(dst.op));
        }
    }
}

}  // namespace mb
