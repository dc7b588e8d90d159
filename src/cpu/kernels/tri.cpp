// TRI, DIAG_MASK_INF, DIAG_MASK_ZERO and DIAG: each element of a matrix (dims 0 and 1) kept or
// replaced by its position alone. Element (i0, i1) is kept when lo <= i0 - i1 <= hi (tri_band), else
// it is the fill value; DIAG reads its one source row for every row. f32 or f16, any source
// strides; each dst row is a fill, a copied span and a fill.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/tri_band.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

void fill_elems(uint8_t* dst, size_t stride, int64_t n, const uint8_t* value, size_t es) {
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + size_t(i) * stride, value, es);
}

}  // namespace

bool tri_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    if (!a || (a->type != Type::F32 && a->type != Type::F16) || dst.type != a->type) return false;
    switch (dst.op) {
        case Op::TRI:
            if (dst.op_params[0] < 0 || dst.op_params[0] > 3) return false;
            [[fallthrough]];
        case Op::DIAG_MASK_INF:
        case Op::DIAG_MASK_ZERO:
            return vec::same_shape(*a, dst);
        case Op::DIAG:
            return a->ne[1] == 1 && dst.ne[0] == a->ne[0] && dst.ne[1] == a->ne[0] && dst.ne[2] == a->ne[2] &&
                   dst.ne[3] == a->ne[3];
        default:
            return false;
    }
}

void compute_tri(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const TriBand band = tri_band(dst);
    const size_t es = type_traits(dst.type).type_size;
    uint8_t fill[4];
    if (dst.type == Type::F32) {
        std::memcpy(fill, &band.fill, 4);
    } else {
        const uint16_t h = fp32_to_fp16(band.fill);
        std::memcpy(fill, &h, 2);
    }
    const int64_t n = dst.ne[0];
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        const uint8_t* x = at(a, 0, dst.op == Op::DIAG ? 0 : ix.i1, ix.i2, ix.i3);
        uint8_t* y = vec::row_ptr(dst, ix);
        // kept: i1 + lo <= i0 <= i1 + hi, clipped to the row
        const int64_t k0 = std::clamp<int64_t>(ix.i1 + band.lo, 0, n);
        const int64_t k1 = std::clamp<int64_t>(ix.i1 + band.hi + 1, k0, n);
        fill_elems(y, dst.nb[0], k0, fill, es);
        vec::copy_elems(x + size_t(k0) * a.nb[0], a.nb[0], y + size_t(k0) * dst.nb[0], dst.nb[0], k1 - k0, es);
        fill_elems(y + size_t(k1) * dst.nb[0], dst.nb[0], n - k1, fill, es);
    }
}

}  // namespace mb
