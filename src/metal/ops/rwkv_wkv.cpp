// RWKV_WKV6 and RWKV_WKV7 on the Metal device (shaders/rwkv_wkv.metal): packed f32 inputs, one threadgroup
// per (head, sequence), threads over the head's S indices.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_rwkv_wkv(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const bool v7 = node.op == Op::RWKV_WKV7;
    const int n = v7 ? 7 : 6;
    if (!plain_f32_supports(node, v7 ? Op::RWKV_WKV7 : Op::RWKV_WKV6, n)) return false;
    for (int i = 0; i < n; ++i) {
        if (!node.src[i]->is_contiguous()) return false;
    }
    return node.nelements() <= INT32_MAX;
}

size_t encode_rwkv_wkv(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const bool v7 = dst.op == Op::RWKV_WKV7;
    const Tensor& tok = *dst.src[v7 ? 2 : 0];
    const Tensor& state = *dst.src[v7 ? 6 : 5];
    mb_kargs_rwkv_wkv args{};
    args.S = int32_t(tok.ne[0]);
    args.H = int32_t(tok.ne[1]);
    args.T = int32_t(tok.ne[2]);
    args.n_seqs = int32_t(state.ne[1]);
    const Size3 groups{uint32_t(tok.ne[1]), uint32_t(state.ne[1]), 1};
    if (v7) {
        encode_plain(enc, "kernel_rwkv_wkv7_f32", args,
                     {dst.src[0], dst.src[1], dst.src[2], dst.src[3], dst.src[4], dst.src[5], dst.src[6]}, dst, groups,
                     tok.ne[0]);
    } else {
        encode_plain(enc, "kernel_rwkv_wkv6_f32", args,
                     {dst.src[0], dst.src[1], dst.src[2], dst.src[3], dst.src[4], dst.src[5]}, dst, groups, tok.ne[0]);
    }
    return 1;
}

}  // namespace mb::metal
