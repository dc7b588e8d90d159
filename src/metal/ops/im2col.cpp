// IM2COL on the Metal device (shaders/im2col.metal): f32 data with any (aligned) strides, dst f32 or
// f16 with packed rows. The 1-D form runs as the 2-D one with a single input row. Params: s0, s1, p0,
// p1, d0, d1, is_2d (src/core/ops.h).
#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/errors.h"
#include "core/im2col_geometry.h"
#include "metal/ops/ops.h"
#include "metal/ops/row_threads.h"
#include "kargs.h"

namespace mb::metal {

namespace {


// The kernel computes input coordinates in 32 bits: the extreme ones must fit.
bool fits_i32(const Im2colGeometry& g) {
    const int64_t vals[] = {g.kw, g.kh, g.ic, g.iw, g.ih, g.n, g.ow, g.oh, g.ic * g.kh * g.kw,
                            (g.ow - 1) * g.s0 + (g.kw - 1) * g.d0, (g.oh - 1) * g.s1 + (g.kh - 1) * g.d1};
    for (int64_t v : vals) {
        if (v > INT32_MAX) return false;
    }
    return true;
}

}  // namespace

bool supports_im2col(const RuntimeProps& props, const Tensor& node) {
    (void)props;
    const Tensor* kernel = node.src[0];
    const Tensor* data = node.src[1];
    if (node.op != Op::IM2COL || !kernel || !data || data->type != Type::F32) return false;
    if (node.type != Type::F32 && node.type != Type::F16) return false;
    const size_t es = type_traits(node.type).type_size;
    if (node.nb[0] != es || node.view_offs % es != 0 || node.nb[1] % es != 0 || node.nb[2] % es != 0 ||
        node.nb[3] % es != 0) {
        return false;
    }
    if (data->view_offs % 4 != 0 || data->nb[0] % 4 != 0 || data->nb[1] % 4 != 0 || data->nb[2] % 4 != 0 ||
        data->nb[3] % 4 != 0) {
        return false;
    }
    const Im2colGeometry g = im2col_geometry(node);
    if (g.s0 <= 0 || g.d0 <= 0 || g.p0 < 0 || g.kw <= 0) return false;
    if (g.is_2d && (g.s1 <= 0 || g.d1 <= 0 || g.p1 < 0 || g.kh <= 0)) return false;
    if (node.ne[0] != g.ic * g.kh * g.kw || !fits_i32(g)) return false;
    if (g.is_2d) return node.ne[2] == g.oh && node.ne[3] == g.n;
    return node.ne[2] == g.n && node.ne[3] == 1 && data->ne[3] == 1;
}

size_t encode_im2col(OpEncoder& enc, const std::vector<Tensor*>& nodes, size_t i) {
    const Tensor& dst = *nodes[i];
    const Tensor& data = *dst.src[1];
    if (dst.is_empty()) return 1;
    const Im2colGeometry g = im2col_geometry(dst);

    mb_kargs_im2col args{};
    args.nb10 = data.nb[0];
    args.nb1 = dst.nb[1];
    if (g.is_2d) {
        args.nb11 = data.nb[1];
        args.nb12 = data.nb[2];
        args.nb13 = data.nb[3];
        args.nb2 = dst.nb[2];
        args.nb3 = dst.nb[3];
    } else {
        // No y axis: its strides are never used with a non-zero coordinate.
        args.nb11 = 0;
        args.nb12 = data.nb[1];
        args.nb13 = data.nb[2];
        args.nb2 = 0;
        args.nb3 = dst.nb[2];
    }
    args.iw = int32_t(g.iw);
    args.ih = int32_t(g.ih);
    args.kw = int32_t(g.kw);
    args.kh = int32_t(g.kh);
    args.s0 = int32_t(g.s0);
    args.s1 = int32_t(g.s1);
    args.p0 = int32_t(g.p0);
    args.p1 = int32_t(g.p1);
    args.d0 = int32_t(g.d0);
    args.d1 = int32_t(g.d1);
    args.chw = int32_t(dst.ne[0]);

    const Pipeline& p = enc.use(dst.type == Type::F16 ? "kernel_im2col_f16" : "kernel_im2col_f32");
    enc.args(args);
    enc.input(data, 1);
    enc.output(dst, 2);
    enc.dispatch({uint32_t(g.ow), uint32_t(g.oh), uint32_t(g.n)},
                 {row_threads(dst.ne[0], p.max_threads_per_threadgroup()), 1, 1});
    return 1;
}

}  // namespace mb::metal
