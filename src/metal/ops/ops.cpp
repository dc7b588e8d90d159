#include "metal/ops/ops.h"

#include <cstddef>
#include <vector>

#include "core/device.h"
#include "core/errors.h"

namespace mb::metal {

namespace {

// supports, encode, extra size (scratch kept behind the result; nullptr: none)
struct Family {
    bool (*supports)(const RuntimeProps&, const Tensor&);
    size_t (*encode)(OpEncoder&, const std::vector<Tensor*>&, size_t);
    size_t (*extra_size)(const Tensor&);
};

const Family kBinary{supports_binary, encode_binary, nullptr};
const Family kUnary{supports_unary, encode_unary, nullptr};
const Family kNorm{supports_norm, encode_norm, nullptr};
const Family kSoftMax{supports_soft_max, encode_soft_max, nullptr};
const Family kReduce{supports_reduce, encode_reduce, nullptr};
const Family kMulMat{supports_mul_mat, encode_mul_mat, nullptr};
const Family kRows{supports_rows, encode_rows, nullptr};
const Family kCopy{supports_cpy, encode_cpy, nullptr};
const Family kIm2col{supports_im2col, encode_im2col, nullptr};
const Family kFlashAttnExt{supports_flash_attn_ext, encode_flash_attn_ext, flash_attn_ext_extra_size};
const Family kRope{supports_rope, encode_rope, nullptr};
const Family kLayout{supports_layout, encode_layout, nullptr};
const Family kGlu{supports_glu, encode_glu, nullptr};
const Family kAcc{supports_acc, encode_acc, nullptr};
const Family kConvTranspose1d{supports_conv_transpose_1d, encode_conv_transpose_1d, nullptr};
const Family kPool2d{supports_pool_2d, encode_pool_2d, nullptr};
const Family kUpscale{supports_upscale, encode_upscale, nullptr};
const Family kSsmConv{supports_ssm_conv, encode_ssm_conv, nullptr};
const Family kSsmScan{supports_ssm_scan, encode_ssm_scan, nullptr};
const Family kRwkvWkv{supports_rwkv_wkv, encode_rwkv_wkv, nullptr};
const Family kMulMatId{supports_mul_mat_id, encode_mul_mat_id, nullptr};
const Family kAddId{supports_add_id, encode_add_id, nullptr};
const Family kTimestepEmbedding{supports_timestep_embedding, encode_timestep_embedding, nullptr};
const Family kArange{supports_arange, encode_arange, nullptr};
const Family kArgsort{supports_argsort, encode_argsort, nullptr};
const Family kTopK{supports_top_k, encode_top_k, nullptr};
const Family kCumsum{supports_cumsum, encode_cumsum, nullptr};
const Family kTri{supports_tri, encode_tri, nullptr};
const Family kOutProd{supports_out_prod, encode_out_prod, nullptr};
const Family kPool1d{supports_pool_1d, encode_pool_1d, nullptr};
const Family kConv2d{supports_conv_2d, encode_conv_2d, nullptr};
const Family kConvTranspose2d{supports_conv_transpose_2d, encode_conv_transpose_2d, nullptr};

}  // namespace

bool plain_f32_supports(const Tensor& node, Op op, int n_src, bool f16_src0) {
    if (node.op != op || node.type != Type::F32 || !fits_i32(node)) return false;
    for (int i = 0; i < n_src; ++i) {
        const Tensor* s = node.src[i];
        if (!s || !fits_i32(*s)) return false;
        if (s->type != Type::F32 && !(i == 0 && f16_src0 && s->type == Type::F16)) return false;
    }
    return true;
}

namespace {

const Family* family_of(Op op) {
    switch (op_family(op)) {
        case OpFamily::Binary: return &kBinary;
        case OpFamily::Unary: return &kUnary;
        case OpFamily::Norm: return &kNorm;
        case OpFamily::SoftMax: return &kSoftMax;
        case OpFamily::Reduce: return &kReduce;
        case OpFamily::MulMat: return &kMulMat;
        case OpFamily::Rows: return &kRows;
        case OpFamily::Copy: return &kCopy;
        case OpFamily::Im2col: return &kIm2col;
        case OpFamily::FlashAttnExt: return &kFlashAttnExt;
        case OpFamily::Rope: return &kRope;
        case OpFamily::Layout: return &kLayout;
        case OpFamily::Glu: return &kGlu;
        case OpFamily::Acc: return &kAcc;
        case OpFamily::ConvTranspose1d: return &kConvTranspose1d;
        case OpFamily::Pool2d: return &kPool2d;
        case OpFamily::Upscale: return &kUpscale;
        case OpFamily::SsmConv: return &kSsmConv;
        case OpFamily::SsmScan: return &kSsmScan;
        case OpFamily::RwkvWkv: return &kRwkvWkv;
        case OpFamily::MulMatId: return &kMulMatId;
        case OpFamily::AddId: return &kAddId;
        case OpFamily::TimestepEmbedding: return &kTimestepEmbedding;
        case OpFamily::Arange: return &kArange;
        case OpFamily::Argsort: return &kArgsort;
        case OpFamily::TopK: return &kTopK;
        case OpFamily::Cumsum: return &kCumsum;
        case OpFamily::Tri: return &kTri;
        case OpFamily::OutProd: return &kOutProd;
        case OpFamily::Pool1d: return &kPool1d;
        case OpFamily::Conv2d: return &kConv2d;
        case OpFamily::ConvTranspose2d: return &kConvTranspose2d;
        case OpFamily::None: break;
    }
    return nullptr;
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
    const Family* f = family_of(node.op);
    return f && f->supports(props, node);
}

size_t encode_node(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& node = *nodes[i];
    const Family* f = family_of(node.op);
    if (!f || !supports_op(enc.props(), node)) {
        fail_cannot_run("metal::encode_node", "the Metal device", node);
    }
    return f->encode(enc, nodes, i);
}

size_t extra_alloc_size(const Tensor& node) {
    const Family* f = family_of(node.op);
    return f && f->extra_size ? f->extra_size(node) : 0;
}

}  // namespace mb::metal
