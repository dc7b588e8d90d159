#include "metal/ops/ops.h"

#include <cstddef>
#include <vector>

#include "core/errors.h"

namespace mb::metal {

namespace {

using Supports = bool (*)(const RuntimeProps&, const Tensor&);
using Encode = size_t (*)(OpEncoder&, const std::vector<Tensor*>&, size_t);

struct Family {
    Supports supports = nullptr;
    Encode encode = nullptr;
};

Family family_of(Op op) {
    switch (op) {
        case Op::ADD: case Op::SUB: case Op::MUL: case Op::DIV:
            return {supports_binary, encode_binary};
        case Op::SCALE: case Op::CLAMP: case Op::SQR: case Op::SQRT: case Op::LOG: case Op::SIN: case Op::COS:
        case Op::GELU: case Op::GELU_ERF: case Op::GELU_QUICK: case Op::SILU: case Op::RELU: case Op::TANH:
        case Op::SIGMOID: case Op::NEG: case Op::ABS: case Op::EXP:
            return {supports_unary, encode_unary};
        case Op::NORM: case Op::RMS_NORM:
            return {supports_norm, encode_norm};
        case Op::SOFT_MAX:
            return {supports_soft_max, encode_soft_max};
        case Op::SUM_ROWS: case Op::MEAN: case Op::ARGMAX:
            return {supports_reduce, encode_reduce};
        case Op::MUL_MAT:
            return {supports_mul_mat, encode_mul_mat};
        case Op::GET_ROWS: case Op::SET_ROWS:
            return {supports_rows, encode_rows};
        case Op::DUP: case Op::CPY: case Op::CONT:
            return {supports_cpy, encode_cpy};
        case Op::IM2COL:
            return {supports_im2col, encode_im2col};
        case Op::FLASH_ATTN_EXT:
            return {supports_flash_attn_ext, encode_flash_attn_ext};
        case Op::ROPE:
            return {supports_rope, encode_rope};
        case Op::CONCAT: case Op::REPEAT: case Op::PAD:
            return {supports_layout, encode_layout};
        case Op::NONE: case Op::RESHAPE: case Op::VIEW: case Op::PERMUTE: case Op::TRANSPOSE: case Op::COUNT:
            break;
    }
    return {};
}

bool has_bf16(const Tensor& node) {
    if (node.type == Type::BF16) return true;
    for (const Tensor* s : node.src) {
        if (s && s->type == Type::BF16) return true;
    }
    return false;
}

}  // namespace

bool supports_op(const RuntimeProps& props, const Tensor& node) {
    if (op_is_view(node.op)) return true;
    if (!props.has_bfloat && has_bf16(node)) return false;  // METAL-SPEC: no BF16 anywhere without it
    Family f = family_of(node.op);
    return f.supports && f.supports(props, node);
}

size_t encode_node(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& node = *nodes[i];
    Family f = family_of(node.op);
    if (!f.encode || !supports_op(enc.props(), node)) {
        fail<UnsupportedOpError>("metal::encode_node", "the Metal device cannot run ", op_name(node.op), " -> ",
                                 node.describe());
    }
    return f.encode(enc, nodes, i);
}

size_t extra_alloc_size(const Tensor& node) {
    return node.op == Op::FLASH_ATTN_EXT ? flash_attn_ext_extra_size(node) : 0;
}

}  // namespace mb::metal
