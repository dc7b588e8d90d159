// GET_ROWS and SET_ROWS on the Metal device (shaders/rows.metal): one threadgroup per gathered or
// scattered row. GET_ROWS reads any type into f32 (quantized rows packed; ne3 may exceed 1, a widening
// of upstream's rule); SET_ROWS writes f32 rows into f32, f16, bf16 or quantized rows (packed), with
// the i32 indices broadcast over dims 2 and 3 by modulo. Indices outside the rows are not raised on
// by the kernel (the GPU cannot raise): they are written to the error record, raised at synchronize.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/errors.h"
#include "metal/ops/ops.h"
#include "metal/ops/row_threads.h"
#include "kargs.h"

namespace mb::metal {

namespace {

bool packed_if_quantized(const Tensor& t) {
    const TypeTraits& tr = type_traits(t.type);
    return !tr.is_quantized || t.nb[0] == tr.type_size;
}

bool supports_get_rows(const Tensor& dst, const Tensor& a, const Tensor& idx) {
    if (dst.type != Type::F32 || a.type == Type::Q8_K) return false;  // q8_K: an activation type only
    return dst.ne[0] == a.ne[0] && dst.ne[1] == idx.ne[0] && dst.ne[2] == idx.ne[1] && dst.ne[3] == idx.ne[2] &&
           a.ne[2] == dst.ne[2] && a.ne[3] == dst.ne[3];
}

bool supports_set_rows(const Tensor& dst, const Tensor& src, const Tensor& idx) {
    if (src.type != Type::F32 || dst.type == Type::I32) return false;
    // Quantizing on the GPU: the 32-value integer block types (as ggml-metal), not the others.
    if (type_traits(dst.type).is_quantized && !(dst.type == Type::Q4_0 || dst.type == Type::Q4_1 ||
                                                dst.type == Type::Q5_0 || dst.type == Type::Q5_1 ||
                                                dst.type == Type::Q8_0)) {
        return false;
    }
    return dst.ne[0] == src.ne[0] && dst.ne[2] == src.ne[2] && dst.ne[3] == src.ne[3] && src.ne[1] == idx.ne[0] &&
           idx.ne[1] > 0 && idx.ne[2] > 0 && src.ne[2] % idx.ne[1] == 0 && src.ne[3] % idx.ne[2] == 0;
}

void encode_get_rows(OpEncoder& enc, const Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const Tensor& idx = *dst.src[1];
    const bool quantized = type_traits(a.type).is_quantized;

    mb_kargs_get_rows args{};
    MB_SET_NB(args, nb0, a);
    args.nb10 = idx.nb[0];
    args.nb11 = idx.nb[1];
    args.nb12 = idx.nb[2];
    MB_SET_NB(args, nb, dst);
    args.ne00 = int32_t(a.ne[0]);
    args.ne01 = int32_t(a.ne[1]);

    // Work units per row: elements, or halves of blocks.
    const int64_t units = quantized ? a.ne[0] / 16 : a.ne[0];
    const Pipeline& p = enc.use(std::string("kernel_get_rows_") + type_traits(a.type).name);
    enc.args(args);
    enc.input(a, 1);
    enc.input(idx, 2);
    enc.output(dst, 3);
    enc.error_record(4);
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])},
                 {row_threads(units, p.max_threads_per_threadgroup()), 1, 1});
}

void encode_set_rows(OpEncoder& enc, const Tensor& dst) {
    const Tensor& src = *dst.src[0];
    const Tensor& idx = *dst.src[1];
    const bool quantized = type_traits(dst.type).is_quantized;

    mb_kargs_set_rows args{};
    MB_SET_NB(args, nb0, src);
    args.nb10 = idx.nb[0];
    args.nb11 = idx.nb[1];
    args.nb12 = idx.nb[2];
    MB_SET_NB(args, nb, dst);
    args.ne00 = int32_t(src.ne[0]);
    args.ne11 = int32_t(idx.ne[1]);
    args.ne12 = int32_t(idx.ne[2]);
    args.ne1 = int32_t(dst.ne[1]);

    // Work units per row: elements, or whole blocks.
    const int64_t units = quantized ? src.ne[0] / 32 : src.ne[0];
    const Pipeline& p = enc.use(std::string("kernel_set_rows_") + type_traits(dst.type).name);
    enc.args(args);
    enc.input(src, 1);
    enc.input(idx, 2);
    enc.output(dst, 3);
    enc.error_record(4);
    enc.dispatch({uint32_t(src.ne[1]), uint32_t(src.ne[2]), uint32_t(src.ne[3])},
                 {row_threads(units, p.max_threads_per_threadgroup()), 1, 1});
}

}  // namespace

bool supports_rows(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* a = node.src[0];
    const Tensor* idx = node.src[1];
    if (!a || !idx || idx->type != Type::I32 || idx->ne[3] != 1) return false;
    if (!packed_if_quantized(*a) || !packed_if_quantized(node)) return false;
    if (!naturally_aligned(*a) || !naturally_aligned(*idx) || !naturally_aligned(node)) return false;
    if (!fits_i32(*a) || !fits_i32(*idx) || !fits_i32(node)) return false;
    if (node.op == Op::GET_ROWS) return supports_get_rows(node, *a, *idx);
    if (node.op == Op::SET_ROWS) return supports_set_rows(node, *a, *idx);
    return false;
}

size_t encode_rows(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& node = *nodes[i];
    if (node.op == Op::GET_ROWS) {
        if (!node.is_empty()) encode_get_rows(enc, node);
    } else if (!node.src[0]->is_empty()) {
        encode_set_rows(enc, node);
    }
    return 1;
}

}  // namespace mb::metal
