// TOP_K on the Metal device (shaders/top_k.metal): one threadgroup per row sorts a window of
// indices in threadgroup memory. Rows up to 1024 values are one window (the row rounded up to a
// power of two); longer rows use a window of 2048 taken 1024 values at a time, for k <= 1024 (a
// larger k is refused and runs on the CPU under a Scheduler).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

namespace {

constexpr int64_t kWholeRow = 1024;  // rows up to this length are one window
constexpr uint32_t kChunkWindow = 2048;

uint32_t window(int64_t n) {
    if (n > kWholeRow) return kChunkWindow;
    uint32_t p = 1;
    while (p < n) p *= 2;
    return p;
}

}  // namespace

bool supports_top_k(const RuntimeProps& props, const Tensor& node) {
    const Tensor* a = node.src[0];
    if (node.op != Op::TOP_K || !a || a->type != Type::F32 || node.type != Type::I32) return false;
    if (!fits_i32(*a) || node.ne[0] > a->ne[0]) return false;
    if (a->ne[0] > kWholeRow && node.ne[0] > int64_t(kChunkWindow / 2)) return false;
    return window(a->ne[0]) * sizeof(int32_t) <= props.max_threadgroup_memory;
}

size_t encode_top_k(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& src0 = *dst.src[0];
    mb_kargs_top_k args{};
    args.ne00 = int32_t(src0.ne[0]);
    args.npad = int32_t(window(src0.ne[0]));
    MB_SET_NB(args, nb0, src0);
    MB_SET_NB(args, nb, dst);
    args.k = int32_t(dst.ne[0]);
    args.chunked = src0.ne[0] > args.npad ? 1 : 0;
    const Pipeline& p = enc.use("kernel_top_k_f32_i32", {});
    enc.args(args);
    enc.input(src0, 1);
    enc.output(dst, 2);
    enc.threadgroup_memory(size_t(args.npad) * sizeof(int32_t), 0);
    const uint32_t nth =
        std::min<uint32_t>(std::min<uint32_t>(uint32_t(args.npad), 1024), p.max_threads_per_threadgroup());
    enc.dispatch({uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, {nth, 1, 1});
    return 1;
}

}  // namespace mb::metal
