// UPSCALE on the Metal device (shaders/upscale.metal): nearest, bilinear (optionally antialiased) and
// bicubic (with or without align corners), f32 with any strides, one threadgroup per dst row (threads
// take the row's elements).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "metal/ops/ops.h"
#include "kargs.h"

namespace mb::metal {

bool supports_upscale(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const int mode = node.op_params[0] & 0xFF;
    const bool aa = (node.op_params[0] & MB_SCALE_ANTIALIAS) != 0;
    return plain_f32_supports(node, Op::UPSCALE, 1) && mode <= MB_SCALE_BICUBIC && (!aa || mode == MB_SCALE_BILINEAR);
}

size_t encode_upscale(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    if (dst.is_empty()) return 1;
    const Tensor& a = *dst.src[0];
    mb_kargs_upscale args{};
    args.ne0 = int32_t(dst.ne[0]);
    args.ne00 = int32_t(a.ne[0]);
    args.ne01 = int32_t(a.ne[1]);
    args.mode = (dst.op_params[0] & 0xFF) | (dst.op_params[0] & MB_SCALE_ANTIALIAS);
    float sf[kMaxDims];
    for (int d = 0; d < kMaxDims; ++d) sf[d] = float(dst.ne[d]) / float(a.ne[d]);
    args.offset = 0.5f;
    if (dst.op_params[0] & MB_SCALE_ALIGN_CORNERS) {
        args.offset = 0.0f;
        for (int d = 0; d < 2; ++d) {
            if (dst.ne[d] > 1 && a.ne[d] > 1) sf[d] = float(dst.ne[d] - 1) / float(a.ne[d] - 1);
        }
    }
    args.sf0 = sf[0];
    args.sf1 = sf[1];
    args.sf2 = sf[2];
    args.sf3 = sf[3];
    MB_SET_NB(args, nb0, a);
    MB_SET_NB(args, nb, dst);
    encode_plain(enc, "kernel_upscale_f32", args, {&a}, dst,
                 {uint32_t(dst.ne[1]), uint32_t(dst.ne[2]), uint32_t(dst.ne[3])}, dst.ne[0]);
    return 1;
}

}  // namespace mb::metal
