// The shape of an IM2COL node read back from its op params and sources (layout in ops.h), shared by
// every device's encoder. The 1-D form is the 2-D one with a single input row: kh = ih = oh = 1,
// s1 = d1 = 1, p1 = 0.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace mb {

struct Im2colGeometry {
    int64_t s0, s1, p0, p1, d0, d1;
    int64_t kw, kh, ic, iw, ih, n;
    int64_t ow, oh;
    bool is_2d;
};

inline Im2colGeometry im2col_geometry(const Tensor& dst) {
    const Tensor& kernel = *dst.src[0];
    const Tensor& data = *dst.src[1];
    Im2colGeometry g;
    g.s0 = dst.op_params[0];
    g.s1 = dst.op_params[1];
    g.p0 = dst.op_params[2];
    g.p1 = dst.op_params[3];
    g.d0 = dst.op_params[4];
    g.d1 = dst.op_params[5];
    g.is_2d = dst.op_params[6] != 0;
    g.kw = kernel.ne[0];
    g.iw = data.ne[0];
    g.ow = dst.ne[1];
    if (g.is_2d) {
        g.kh = kernel.ne[1];
        g.ih = data.ne[1];
        g.ic = data.ne[2];
        g.n = data.ne[3];
        g.oh = dst.ne[2];
    } else {
        g.kh = 1;
        g.ih = 1;
        g.ic = data.ne[1];
        g.n = data.ne[2];
        g.oh = 1;
        g.s1 = 1;
        g.p1 = 0;
        g.d1 = 1;
    }
    return g;
}

}  // namespace mb
