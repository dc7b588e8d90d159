// IM2COL: unfolds f32 data (any strides) into one dst row per output position (ox, oy, n), in f32 or
// f16. The 1-D form is the 2-D one with a single input row (ih = kh = oh = 1). One threadgroup per
// dst row; its threads take the row's (ic, ky, kx) entries in order, so the writes are contiguous.
#include <metal_stdlib>

#include "kargs.h"
#include "quants.h"

using namespace metal;

template <typename TD>
kernel void kernel_im2col(
        constant mb_kargs_im2col & args [[buffer(0)]],
        device const char * src1 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    const int ox = int(tgpig.x);
    const int oy = int(tgpig.y);
    const int n = int(tgpig.z);
    device TD * out = (device TD *) (dst + ulong(ox) * args.nb1 + ulong(oy) * args.nb2 + ulong(n) * args.nb3);
    device const char * in = src1 + ulong(n) * args.nb13;
    const int khw = args.kh * args.kw;
    for (int j = int(tiitg); j < args.chw; j += int(ntg)) {
        const int ic = j / khw;
        const int kyx = j - ic * khw;
        const int ky = kyx / args.kw;
        const int kx = kyx - ky * args.kw;
        const int ix = ox * args.s0 + kx * args.d0 - args.p0;
        const int iy = oy * args.s1 + ky * args.d1 - args.p1;
        float v = 0.0f;
        if (ix >= 0 && ix < args.iw && iy >= 0 && iy < args.ih) {
            v = *(device const float *) (in + ulong(ic) * args.nb12 + ulong(iy) * args.nb11 + ulong(ix) * args.nb10);
        }
        mb_store(out + j, v);
    }
}

typedef decltype(kernel_im2col<float>) kernel_im2col_t;

template [[host_name("kernel_im2col_f32")]] kernel kernel_im2col_t kernel_im2col<float>;
template [[host_name("kernel_im2col_f16")]] kernel kernel_im2col_t kernel_im2col<half>;
