// The Metal device's ops: which nodes it supports (METAL-SPEC's supports_op, widened where our
// kernels do more) and how each is encoded. One family per ops/<family>.cpp and shaders/<family>.metal.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"
#include "metal/ops/op_encoder.h"
#include "metal/runtime.h"

// Fill an args struct's four size fields P0..P3 (int32, as the kernels index) or four stride fields
// from tensor t, by ggml's field names: MB_SET_NE(args, ne0, src0) sets ne00..ne03, MB_SET_NB(args,
// nb, dst) sets nb0..nb3.
#define MB_SET_NE(args, P, t)                                                                         \
    ((args).P##0 = int32_t((t).ne[0]), (args).P##1 = int32_t((t).ne[1]), (args).P##2 = int32_t((t).ne[2]), \
     (args).P##3 = int32_t((t).ne[3]))
#define MB_SET_NB(args, P, t) \
    ((args).P##0 = (t).nb[0], (args).P##1 = (t).nb[1], (args).P##2 = (t).nb[2], (args).P##3 = (t).nb[3])

namespace mb::metal {

// The alignment typed loads and stores of type t need: 4 bytes for f32 and i32, 1 for mxfp4 (its
// blocks are bytes only), 2 for f16, bf16 and the other blocks (each holds a half scale).
inline size_t natural_alignment(Type t) {
    if (t == Type::F32 || t == Type::I32) return 4;
    return t == Type::MXFP4 ? 1 : 2;
}

// Whether t's offset and strides keep every element (or block) of t at its natural alignment.
inline bool naturally_aligned(const Tensor& t) {
    const size_t a = natural_alignment(t.type);
    return t.view_offs % a == 0 && t.nb[0] % a == 0 && t.nb[1] % a == 0 && t.nb[2] % a == 0 && t.nb[3] % a == 0;
}

// Whether every size of t fits the int32 fields the kernels index with.
inline bool fits_i32(const Tensor& t) {
    for (int i = 0; i < kMaxDims; ++i) {
        if (t.ne[i] > INT32_MAX) return false;
    }
    return true;
}

// The plain f32 kernels (pool_2d, upscale, conv_transpose_1d, ssm_conv, ssm_scan, rwkv_wkv): whether node
// is `op` with sources src[0..n_src) present and f32 (src[0] may be f16 where f16_src0), an f32 result,
// and every size within the kernels' int32 indexing.
bool plain_f32_supports(const Tensor& node, Op op, int n_src, bool f16_src0 = false);

// Encodes one such kernel: selects `kernel`, binds args at 0, the inputs at 1, 2, ... in order and dst
// after them, and dispatches `groups` threadgroups; threads per group: 32, doubled while fewer than
// `row` (the elements each group walks) up to 256 and the pipeline's limit.
template <typename Args>
void encode_plain(OpEncoder& enc, const char* kernel, const Args& args, std::initializer_list<const Tensor*> inputs,
                  const Tensor& dst, Size3 groups, int64_t row) {
    const Pipeline& p = enc.use(kernel, {});
    enc.args(args);
    uint32_t index = 1;
    for (const Tensor* t : inputs) enc.input(*t, index++);
    enc.output(dst, index);
    uint32_t nth = 32;
    const uint32_t max_nth = std::min<uint32_t>(256, p.max_threads_per_threadgroup());
    while (nth < row && 2 * nth <= max_nth) nth *= 2;
    enc.dispatch(groups, {nth, 1, 1});
}

bool supports_op(const RuntimeProps& props, const Tensor& node);

// Encodes nodes[i] (and, when fusion is on, following nodes it can fuse with); returns how many
// nodes it consumed (>= 1). Throws UnsupportedOpError for a node supports_op refuses.
size_t encode_node(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);

// Scratch bytes a node keeps behind its result (buffer types add it in alloc_size).
size_t extra_alloc_size(const Tensor& node);

// --- one pair per family: supports_<family>(props, node) and encode_<family>(enc, nodes, i) ---
// ADD SUB MUL DIV ADD1 (+ ADD chains)
bool supports_binary(const RuntimeProps& props, const Tensor& node);
size_t encode_binary(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// the Unary rows of shaders/op_table.h
bool supports_unary(const RuntimeProps& props, const Tensor& node);
size_t encode_unary(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// NORM RMS_NORM L2_NORM (+ fused MUL, ADD), GROUP_NORM
bool supports_norm(const RuntimeProps& props, const Tensor& node);
size_t encode_norm(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// SOFT_MAX
bool supports_soft_max(const RuntimeProps& props, const Tensor& node);
size_t encode_soft_max(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// SUM SUM_ROWS MEAN ARGMAX
bool supports_reduce(const RuntimeProps& props, const Tensor& node);
size_t encode_reduce(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// MUL_MAT
bool supports_mul_mat(const RuntimeProps& props, const Tensor& node);
size_t encode_mul_mat(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// GET_ROWS SET_ROWS
bool supports_rows(const RuntimeProps& props, const Tensor& node);
size_t encode_rows(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// DUP CPY CONT
bool supports_cpy(const RuntimeProps& props, const Tensor& node);
size_t encode_cpy(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// IM2COL
bool supports_im2col(const RuntimeProps& props, const Tensor& node);
size_t encode_im2col(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// FLASH_ATTN_EXT
bool supports_flash_attn_ext(const RuntimeProps& props, const Tensor& node);
size_t encode_flash_attn_ext(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
size_t flash_attn_ext_extra_size(const Tensor& node);
// ROPE
bool supports_rope(const RuntimeProps& props, const Tensor& node);
size_t encode_rope(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// REGLU GEGLU SWIGLU GEGLU_ERF GEGLU_QUICK SWIGLU_OAI
bool supports_glu(const RuntimeProps& props, const Tensor& node);
size_t encode_glu(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// ARANGE
bool supports_arange(const RuntimeProps& props, const Tensor& node);
size_t encode_arange(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// ARGSORT
bool supports_argsort(const RuntimeProps& props, const Tensor& node);
size_t encode_argsort(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// TOP_K
bool supports_top_k(const RuntimeProps& props, const Tensor& node);
size_t encode_top_k(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// CUMSUM
bool supports_cumsum(const RuntimeProps& props, const Tensor& node);
size_t encode_cumsum(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// TRI DIAG DIAG_MASK_INF DIAG_MASK_ZERO
bool supports_tri(const RuntimeProps& props, const Tensor& node);
size_t encode_tri(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// OUT_PROD
bool supports_out_prod(const RuntimeProps& props, const Tensor& node);
size_t encode_out_prod(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// POOL_1D
bool supports_pool_1d(const RuntimeProps& props, const Tensor& node);
size_t encode_pool_1d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// CONV_2D CONV_2D_DW
bool supports_conv_2d(const RuntimeProps& props, const Tensor& node);
size_t encode_conv_2d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// CONV_TRANSPOSE_2D
bool supports_conv_transpose_2d(const RuntimeProps& props, const Tensor& node);
size_t encode_conv_transpose_2d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// MUL_MAT_ID
bool supports_mul_mat_id(const RuntimeProps& props, const Tensor& node);
size_t encode_mul_mat_id(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// ADD_ID
bool supports_add_id(const RuntimeProps& props, const Tensor& node);
size_t encode_add_id(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// TIMESTEP_EMBEDDING
bool supports_timestep_embedding(const RuntimeProps& props, const Tensor& node);
size_t encode_timestep_embedding(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// CONV_TRANSPOSE_1D
bool supports_conv_transpose_1d(const RuntimeProps& props, const Tensor& node);
size_t encode_conv_transpose_1d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// POOL_2D
bool supports_pool_2d(const RuntimeProps& props, const Tensor& node);
size_t encode_pool_2d(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// UPSCALE
bool supports_upscale(const RuntimeProps& props, const Tensor& node);
size_t encode_upscale(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// SSM_CONV
bool supports_ssm_conv(const RuntimeProps& props, const Tensor& node);
size_t encode_ssm_conv(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// SSM_SCAN
bool supports_ssm_scan(const RuntimeProps& props, const Tensor& node);
size_t encode_ssm_scan(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// RWKV_WKV6 RWKV_WKV7
bool supports_rwkv_wkv(const RuntimeProps& props, const Tensor& node);
size_t encode_rwkv_wkv(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// ACC SET
bool supports_acc(const RuntimeProps& props, const Tensor& node);
size_t encode_acc(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);
// CONCAT REPEAT PAD PAD_REFLECT_1D ROLL
bool supports_layout(const RuntimeProps& props, const Tensor& node);
size_t encode_layout(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i);

}  // namespace mb::metal
