// GET_ROWS (rows of any type gathered into f32) and SET_ROWS (f32 rows converted and scattered into a
// tensor of any supported type). Indices are i32 and checked against the row count as they are read.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/errors.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

int32_t read_index(const Tensor& idx, int64_t i0, int64_t i1, int64_t i2) {
    int32_t v;
    std::memcpy(&v, at(idx, i0, i1, i2), sizeof v);
    return v;
}

bool packed(const Tensor& t) { return t.nb[0] == type_traits(t.type).type_size; }

// n elements of one row from (type t, bytes p, element stride) into packed floats.
void load_row(Type t, const uint8_t* p, size_t stride, int64_t n, float* out) {
    if (type_traits(t).is_quantized || stride == type_traits(t).type_size) {
        dequantize_row(t, p, out, n);
        return;
    }
    for (int64_t i = 0; i < n; ++i) dequantize_row(t, p + size_t(i) * stride, &out[i], 1);
}

void store_row(Type t, const float* in, int64_t n, uint8_t* p, size_t stride) {
    if (type_traits(t).is_quantized || stride == type_traits(t).type_size) {
        quantize_row(t, in, p, n);
        return;
    }
    for (int64_t i = 0; i < n; ++i) quantize_row(t, &in[i], p + size_t(i) * stride, 1);
}

void get_rows(const ComputeParams& p, Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const Tensor& idx = *dst.src[1];
    const int64_t n = dst.ne[0];
    const int64_t bs = type_traits(a.type).block_size;
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    float buf[vec::kChunk];
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        const int32_t row = read_index(idx, ix.i1, ix.i2, ix.i3);
        if (row < 0 || row >= a.ne[1]) {
            fail<OutOfRangeError>("GET_ROWS", "row index ", row, " out of range for ", a.describe(), " (",
                                  a.ne[1], " rows) at index position ", ix.i1);
        }
        const uint8_t* srow = at(a, 0, row, ix.i2, ix.i3);
        uint8_t* drow = vec::row_ptr(dst, ix);
        if (dst.nb[0] == sizeof(float)) {
            load_row(a.type, srow, a.nb[0], n, reinterpret_cast<float*>(drow));
            continue;
        }
        for (int64_t k = 0; k < n; k += vec::kChunk) {
            const int64_t len = std::min(vec::kChunk, n - k);
            load_row(a.type, srow + size_t(k / bs) * a.nb[0], a.nb[0], len, buf);
            vec::scatter_f32(buf, len, drow + size_t(k) * dst.nb[0], dst.nb[0]);
        }
    }
}

void set_rows(const ComputeParams& p, Tensor& dst) {
    const Tensor& src = *dst.src[0];
    const Tensor& idx = *dst.src[1];
    const int64_t n = src.ne[0];
    const int64_t bs = type_traits(dst.type).block_size;
    int64_t r0, r1;
    split_range(src.nrows(), p.ith, p.nth, &r0, &r1);
    float buf[vec::kChunk];
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(src, r);
        const int32_t row = read_index(idx, ix.i1, ix.i2 % idx.ne[1], ix.i3 % idx.ne[2]);
        if (row < 0 || row >= dst.ne[1]) {
            fail<OutOfRangeError>("SET_ROWS", "row index ", row, " out of range for ", dst.describe(), " (",
                                  dst.ne[1], " rows) at index position ", ix.i1);
        }
        const uint8_t* srow = vec::row_ptr(src, ix);
        uint8_t* drow = at(dst, 0, row, ix.i2, ix.i3);
        if (src.nb[0] == sizeof(float)) {
            store_row(dst.type, reinterpret_cast<const float*>(srow), n, drow, dst.nb[0]);
            continue;
        }
        for (int64_t k = 0; k < n; k += vec::kChunk) {
            const int64_t len = std::min(vec::kChunk, n - k);
            vec::gather_f32(srow + size_t(k) * src.nb[0], src.nb[0], len, buf);
            store_row(dst.type, buf, len, drow + size_t(k / bs) * dst.nb[0], dst.nb[0]);
        }
    }
}

}  // namespace

bool rows_supported(const Tensor& dst) {
    const Tensor* a = dst.src[0];
    const Tensor* idx = dst.src[1];
    if (a == nullptr || idx == nullptr || idx->type != Type::I32 || idx->ne[3] != 1) return false;
    if (!packed(*a) && type_traits(a->type).is_quantized) return false;
    if (dst.op == Op::GET_ROWS) {
        return dst.type == Type::F32 && dst.ne[0] == a->ne[0] && dst.ne[1] == idx->ne[0] &&
               dst.ne[2] == idx->ne[1] && dst.ne[3] == idx->ne[2] && a->ne[2] == dst.ne[2] && a->ne[3] == dst.ne[3];
    }
    if (dst.op == Op::SET_ROWS) {
        if (a->type != Type::F32 || dst.type == Type::I32 || type_traits(dst.type).is_grid) return false;
        if (type_traits(dst.type).is_quantized && !packed(dst)) return false;
        return dst.ne[0] == a->ne[0] && dst.ne[2] == a->ne[2] && dst.ne[3] == a->ne[3] && a->ne[1] == idx->ne[0] &&
               idx->ne[1] > 0 && idx->ne[2] > 0 && a->ne[2] % idx->ne[1] == 0 && a->ne[3] % idx->ne[2] == 0;
    }
    return false;
}

void compute_rows(const ComputeParams& p, Tensor& dst) {
    if (dst.op == Op::GET_ROWS) {
        if (!dst.is_empty()) get_rows(p, dst);
        return;
    }
    if (!dst.src[0]->is_empty()) set_rows(p, dst);
}

}  // namespace mb
