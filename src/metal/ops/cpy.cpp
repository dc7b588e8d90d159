// DUP, CPY and CONT on the Metal device (shaders/cpy.metal). Conversions: f32 -> f32, f16, bf16, i32
// and every quantized type; f16 -> f32, f16; bf16 -> f32, bf16; i32 -> f32, i32; quantized -> f32,
// f16 and the same type. Both sides may have any strides and shapes with the same element count; a
// quantized side needs packed blocks and rows as long as the other side's (blocks cannot be split).
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

// The block types the kernels quantize to (quants.h quantize32): ggml-metal's set, less iq4_nl.
bool is_block32_quantizable(Type t) {
    return t == Type::Q4_0 || t == Type::Q4_1 || t == Type::Q5_0 || t == Type::Q5_1 || t == Type::Q8_0;
}

bool conversion(Type from, Type to) {
    if (from == to) return from != Type::Q8_K;
    switch (from) {
        case Type::F32:
            // Quantizing on the GPU: the 32-value block types (as ggml-metal), not the k-quants.
            return !type_traits(to).is_quantized || is_block32_quantizable(to);
        case Type::F16:
        case Type::BF16:
        case Type::I32:
            return to == Type::F32;
        case Type::Q4_0:
        case Type::Q4_1:
        case Type::Q5_0:
        case Type::Q5_1:
        case Type::Q8_0:
            return to == Type::F32 || to == Type::F16;
        case Type::Q2_K:
        case Type::Q3_K:
        case Type::Q4_K:
        case Type::Q5_K:
        case Type::Q6_K:
            return to == Type::F32 || to == Type::F16;  // nothing quantizes to them on the GPU
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
            return to == Type::F32 || to == Type::F16;
        case Type::Q8_K:
            return false;
    }
    return false;
}

}  // namespace

bool supports_cpy(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* a = node.src[0];
    if ((node.op != Op::DUP && node.op != Op::CPY && node.op != Op::CONT) || !a) return false;
    if (a->nelements() != node.nelements() || (node.op != Op::CPY && a->type != node.type)) return false;
    if (!conversion(a->type, node.type)) return false;
    if (!naturally_aligned(*a) || !naturally_aligned(node) || !fits_i32(*a) || !fits_i32(node)) return false;
    const TypeTraits& at = type_traits(a->type);
    const TypeTraits& dt = type_traits(node.type);
    if (at.is_quantized || dt.is_quantized) {
        if (a->ne[0] != node.ne[0]) return false;
        if ((at.is_quantized && a->nb[0] != at.type_size) || (dt.is_quantized && node.nb[0] != dt.type_size)) {
            return false;
        }
    }
    return true;
}

size_t encode_cpy(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    const Tensor& src = *dst.src[0];
    if (dst.is_empty()) return 1;

    mb_kargs_cpy args{};
    MB_SET_NB(args, nb0, src);
    MB_SET_NB(args, nb, dst);
    args.ne00 = int32_t(src.ne[0]);
    args.ne01 = int32_t(src.ne[1]);
    args.ne02 = int32_t(src.ne[2]);
    args.ne0 = int32_t(dst.ne[0]);
    args.ne1 = int32_t(dst.ne[1]);
    args.ne2 = int32_t(dst.ne[2]);
    args.same_rows = src.ne[0] == dst.ne[0] ? 1 : 0;

    // Work units per row: elements; blocks when quantizing or copying blocks; halves of blocks when
    // dequantizing.
    int64_t units = src.ne[0];
    if (type_traits(dst.type).is_quantized) {
        units = src.ne[0] / 32;
    } else if (type_traits(src.type).is_quantized) {
        units = src.ne[0] / 16;
    }
    const Pipeline& p =
        enc.use(std::string("kernel_cpy_") + type_traits(src.type).name + "_" + type_traits(dst.type).name);
    enc.args(args);
    enc.input(src, 1);
    enc.output(dst, 2);
    enc.dispatch({uint32_t(src.ne[1]), uint32_t(src.ne[2]), uint32_t(src.ne[3])},
                 {row_threads(units, p.max_threads_per_threadgroup()), 1, 1});
    return 1;
}

}  // namespace mb::metal
