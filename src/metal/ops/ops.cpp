#include "metal/ops/ops.h"

#include <cstddef>
#include <vector>

#include "core/device.h"
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
    switch (op_family(op)) {
        case OpFamily::Binary: return {supports_binary, encode_binary};
        case OpFamily::Unary: return {supports_unary, encode_unary};
        case OpFamily::Norm: return {supports_norm, encode_norm};
        case OpFamily::SoftMax: return {supports_soft_max, encode_soft_max};
        case OpFamily::Reduce: return {supports_reduce, encode_reduce};
        case OpFamily::MulMat: return {supports_mul_mat, encode_mul_mat};
        case OpFamily::Rows: return {supports_rows, encode_rows};
        case OpFamily::Copy: return {supports_cpy, encode_cpy};
        case OpFamily::Im2col: return {supports_im2col, encode_im2col};
        case OpFamily::FlashAttnExt: return {supports_flash_attn_ext, encode_flash_attn_ext};
        case OpFamily::Rope: return {supports_rope, encode_rope};
        case OpFamily::Layout: return {supports_layout, encode_layout};
        case OpFamily::None: break;
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
        fail_cannot_run("metal::encode_node", "the Metal device", node);
    }
    return f.encode(enc, nodes, i);
}

size_t extra_alloc_size(const Tensor& node) {
    return node.op == Op::FLASH_ATTN_EXT ? flash_attn_ext_extra_size(node) : 0;
}

}  // namespace mb::metal
