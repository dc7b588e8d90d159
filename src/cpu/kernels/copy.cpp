// DUP, CONT and CPY: elements of src0 in logical (row-major) order written to dst's elements in
// logical order, converted to dst's type. Shapes may differ (same element count) and both sides may
// have any strides; a quantized side needs rows of the same length on both sides, as blocks cannot be
// split. Conversions go through f32 with types.h's row converters (bit-exact with ggml); same-type
// copies move raw bytes.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

bool conversion_allowed(Type from, Type to) {
    if (from == to) return true;
    const bool to_f32 = to == Type::F32;
    switch (from) {
        case Type::F32:
            return !type_traits(to).is_grid;  // nothing quantizes to the grid types (core/quants_grid.h)
        case Type::F16:
            return to_f32;
        case Type::BF16:
            return to_f32;
        case Type::I32:
            return to_f32;
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
        case Type::Q8_0:
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
        case Type::Q8_K:
        case Type::IQ4_NL:
        case Type::IQ4_XS:
        case Type::MXFP4:
        case Type::IQ2_XXS:
        case Type::IQ2_XS:
        case Type::IQ2_S:
        case Type::IQ3_XXS:
        case Type::IQ3_S:
        case Type::IQ1_S:
        case Type::IQ1_M:
            return to_f32 || to == Type::F16;
    }
    return false;
}

// A run of n elements of one row, by its first byte and element stride.
struct Run {
    uint8_t* p;
    size_t stride;
};

// n elements (a multiple of the block size of either type) from s to d through an f32 buffer.
void copy_convert(Type st, const Run& s, Type dt, const Run& d, int64_t n) {
    const size_t s_es = type_traits(st).type_size;
    const size_t d_es = type_traits(dt).type_size;
    const bool s_q = type_traits(st).is_quantized;
    const bool d_q = type_traits(dt).is_quantized;
    const int64_t s_bs = type_traits(st).block_size;
    const int64_t d_bs = type_traits(dt).block_size;
    float buf[vec::kChunk];
    for (int64_t k = 0; k < n; k += vec::kChunk) {
        const int64_t len = std::min(vec::kChunk, n - k);
        if (s_q || s.stride == s_es) {
            dequantize_row(st, s.p + size_t(k / s_bs) * s.stride, buf, len);
        } else {
            for (int64_t i = 0; i < len; ++i) dequantize_row(st, s.p + size_t(k + i) * s.stride, &buf[i], 1);
        }
        if (d_q || d.stride == d_es) {
            quantize_row(dt, buf, d.p + size_t(k / d_bs) * d.stride, len);
        } else {
            for (int64_t i = 0; i < len; ++i) quantize_row(dt, &buf[i], d.p + size_t(k + i) * d.stride, 1);
        }
    }
}

}  // namespace

bool copy_supported(const Tensor& dst) {
    if (dst.op != Op::DUP && dst.op != Op::CPY && dst.op != Op::CONT) return false;
    const Tensor* a = dst.src[0];
    if (a == nullptr || a->nelements() != dst.nelements()) return false;
    if (dst.op != Op::CPY && a->type != dst.type) return false;
    if (!conversion_allowed(a->type, dst.type)) return false;
    const auto& at = type_traits(a->type);
    const auto& dt = type_traits(dst.type);
    if (at.is_quantized || dt.is_quantized) {
        if (a->ne[0] != dst.ne[0]) return false;
        if ((at.is_quantized && a->nb[0] != at.type_size) || (dt.is_quantized && dst.nb[0] != dt.type_size)) {
            return false;
        }
    }
    return true;
}

void compute_copy(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const size_t d_es = type_traits(dst.type).type_size;

    if (a.type == dst.type && a.is_contiguous() && dst.is_contiguous()) {
        const size_t total = dst.nbytes();
        const size_t per = (total + size_t(p.nth) - 1) / size_t(p.nth);
        const size_t b0 = std::min(total, per * size_t(p.ith));
        const size_t b1 = std::min(total, b0 + per);
        if (b1 > b0) std::memmove(host_data(dst) + b0, host_data(a) + b0, b1 - b0);
        return;
    }

    const int64_t dn = dst.ne[0];
    const int64_t sn = a.ne[0];
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        uint8_t* drow = vec::row_ptr(dst, vec::row_index(dst, r));
        // The dst row covers flat elements [r*dn, (r+1)*dn), which may span several src rows.
        int64_t flat = r * dn;
        int64_t done = 0;
        while (done < dn) {
            const int64_t j0 = flat % sn;
            const int64_t len = std::min(sn - j0, dn - done);
            const uint8_t* srow = vec::row_ptr(a, vec::row_index(a, flat / sn));
            const Run s{const_cast<uint8_t*>(srow) + size_t(j0) * a.nb[0], a.nb[0]};
            const Run d{drow + size_t(done) * dst.nb[0], dst.nb[0]};
            if (a.type == dst.type) {
                // Quantized rows are whole rows here (equal ne[0]), copied block by block.
                const int64_t bs = type_traits(a.type).block_size;
                vec::copy_elems(s.p, s.stride, d.p, d.stride, len / bs, d_es);
            } else {
                copy_convert(a.type, s, dst.type, d, len);
            }
            done += len;
            flat += len;
        }
    }
}

}  // namespace mb
