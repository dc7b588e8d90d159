// ADD SUB MUL DIV ADD1: f32 src0 and dst, f32 or f16 src1 broadcast over src0 by modulo on every
// dimension, any strides. The loops are plain C++ instantiated twice, once inside an AVX2-targeted
// function, so the compiler vectorises each for its ISA.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/errors.h"
#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

namespace mb {

namespace {

struct Add {
    static float f(float a, float b) { return a + b; }
};
struct Sub {
    static float f(float a, float b) { return a - b; }
};
struct Mul {
    static float f(float a, float b) { return a * b; }
};
struct Div {
    static float f(float a, float b) { return a / b; }
};

// out[i] = a[i] (op) b[i % nb_len] for packed rows; nb_len divides n.
template <class O>
__attribute__((always_inline)) inline void row_impl(const float* a, const float* b, int64_t nb_len, float* out,
                                                    int64_t n) {
    if (nb_len == n) {
        for (int64_t i = 0; i < n; ++i) out[i] = O::f(a[i], b[i]);
    } else if (nb_len == 1) {
        const float s = b[0];
        for (int64_t i = 0; i < n; ++i) out[i] = O::f(a[i], s);
    } else {
        for (int64_t k = 0; k < n; k += nb_len) {
            for (int64_t i = 0; i < nb_len; ++i) out[k + i] = O::f(a[k + i], b[i]);
        }
    }
}

template <class O>
void row_portable(const float* a, const float* b, int64_t nb_len, float* out, int64_t n) {
    row_impl<O>(a, b, nb_len, out, n);
}

#if defined(MB_VEC_AVX2)
template <class O>
MB_AVX2 void row_avx2(const float* a, const float* b, int64_t nb_len, float* out, int64_t n) {
    row_impl<O>(a, b, nb_len, out, n);
}
#endif

using RowFn = void (*)(const float*, const float*, int64_t, float*, int64_t);

template <class O>
RowFn pick_row() {
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) return row_avx2<O>;
#endif
    return row_portable<O>;
}

RowFn row_fn(Op op) {
    switch (op) {
        case Op::ADD:
        case Op::ADD1: return pick_row<Add>();
        case Op::SUB: return pick_row<Sub>();
        case Op::MUL: return pick_row<Mul>();
        case Op::DIV: return pick_row<Div>();
        default: break;
    }
    fail<InvalidArgumentError>("compute_binary", "not a binary op: ", op_name(op));
}

// src1's row as packed f32 (converted or gathered when needed).
const float* src1_row(const Tensor& s1, const uint8_t* p, std::vector<float>& buf) {
    const int64_t n = s1.ne[0];
    if (s1.type == Type::F32 && s1.nb[0] == sizeof(float)) return reinterpret_cast<const float*>(p);
    buf.resize(size_t(n));
    if (s1.type == Type::F32) {
        vec::gather_f32(p, s1.nb[0], n, buf.data());
    } else if (s1.nb[0] == sizeof(uint16_t)) {
        dequantize_row(Type::F16, p, buf.data(), n);
    } else {
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            std::memcpy(&h, p + size_t(i) * s1.nb[0], sizeof h);
            buf[size_t(i)] = fp16_to_fp32(h);
        }
    }
    return buf.data();
}

}  // namespace

bool binary_supported(const Tensor& dst) {
    if (dst.op != Op::ADD && dst.op != Op::SUB && dst.op != Op::MUL && dst.op != Op::DIV && dst.op != Op::ADD1) {
        return false;
    }
    const Tensor* a = dst.src[0];
    const Tensor* b = dst.src[1];
    if (a == nullptr || b == nullptr) return false;
    if (a->type != Type::F32 || dst.type != Type::F32) return false;
    if (b->type != Type::F32 && b->type != Type::F16) return false;
    if (!vec::same_shape(*a, dst)) return false;
    for (int i = 0; i < kMaxDims; ++i) {
        if (b->ne[i] == 0 ? dst.ne[i] != 0 : dst.ne[i] % b->ne[i] != 0) return false;
    }
    return true;
}

void compute_binary(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    const Tensor& a = *dst.src[0];
    const Tensor& b = *dst.src[1];
    const RowFn fn = row_fn(dst.op);
    const int64_t n = dst.ne[0];

    // All three packed with one shape (a residual add): one flat range, cut into a piece per thread
    // on 64-byte boundaries, instead of a call per row.
    if (b.type == Type::F32 && vec::same_shape(b, dst) && a.is_contiguous() && b.is_contiguous() &&
        dst.is_contiguous()) {
        const int64_t total = dst.nelements();
        const int64_t chunk = (total / p.nth + 15) / 16 * 16;
        const int64_t i0 = std::min(total, chunk * p.ith);
        const int64_t i1 = p.ith == p.nth - 1 ? total : std::min(total, i0 + chunk);
        if (i1 > i0) {
            fn(reinterpret_cast<const float*>(host_data(a)) + i0, reinterpret_cast<const float*>(host_data(b)) + i0,
               i1 - i0, reinterpret_cast<float*>(host_data(dst)) + i0, i1 - i0);
        }
        return;
    }

    // A few long rows (a 1-D add) are cut into column pieces so every thread gets work; pieces keep
    // src1's period intact by cutting only where src1 is a full row or a single value.
    const int64_t pieces = dst.nrows() < p.nth && (b.ne[0] == n || b.ne[0] == 1) ? p.nth : 1;
    const int64_t piece_len = (n + pieces - 1) / pieces;
    int64_t w0, w1;
    split_range(dst.nrows() * pieces, p.ith, p.nth, &w0, &w1);
    std::vector<float> bbuf, abuf, obuf;
    for (int64_t w = w0; w < w1; ++w) {
        const int64_t r = w / pieces;
        const int64_t c0 = std::min(n, (w % pieces) * piece_len);
        const int64_t len = std::min(n - c0, piece_len);
        if (len <= 0) continue;
        const vec::RowIndex ix = vec::row_index(dst, r);
        const vec::RowIndex bx{ix.i1 % b.ne[1], ix.i2 % b.ne[2], ix.i3 % b.ne[3]};
        const float* brow = src1_row(b, vec::row_ptr(b, bx), bbuf);
        if (b.ne[0] == n) brow += c0;
        const uint8_t* arow = vec::row_ptr(a, ix) + size_t(c0) * a.nb[0];
        uint8_t* orow = vec::row_ptr(dst, ix) + size_t(c0) * dst.nb[0];
        const bool a_packed = a.nb[0] == sizeof(float);
        const bool o_packed = dst.nb[0] == sizeof(float);
        const float* ap = reinterpret_cast<const float*>(arow);
        if (!a_packed) {
            abuf.resize(size_t(len));
            vec::gather_f32(arow, a.nb[0], len, abuf.data());
            ap = abuf.data();
        }
        float* op = reinterpret_cast<float*>(orow);
        if (!o_packed) {
            obuf.resize(size_t(len));
            op = obuf.data();
        }
        fn(ap, brow, b.ne[0] == n ? len : b.ne[0], op, len);
        if (!o_packed) vec::scatter_f32(op, len, orow, dst.nb[0]);
    }
}

}  // namespace mb
