// POOL_2D: max or avg (divided by k0*k1, padding as zeros, as ggml) over k0 x k1 windows. One
// threadgroup per (oy, c, n) row of dst; threads take ox.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_pool_2d_f32(
        constant mb_kargs_pool_2d & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int oy = tgpig.x;
    device const char * x = src0 + tgpig.y * args.nb02 + tgpig.z * args.nb03;
    device char * y = dst + oy * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    for (int ox = tpitg; ox < args.ne0; ox += ntg) {
        float acc = args.avg ? 0.0f : -FLT_MAX;
        for (int ky = 0; ky < args.k1; ++ky) {
            const int iy = oy * args.s1 - args.p1 + ky;
            if (iy < 0 || iy >= args.ne01) {
                continue;
            }
            for (int kx = 0; kx < args.k0; ++kx) {
                const int ix = ox * args.s0 - args.p0 + kx;
                if (ix < 0 || ix >= args.ne00) {
                    continue;
                }
                const float v = *((device const float *) (x + ix * args.nb00 + iy * args.nb01));
                acc = args.avg ? acc + v : max(acc, v);
            }
        }
        *((device float *) (y + ox * args.nb0)) = args.avg ? acc / float(args.k0 * args.k1) : acc;
    }
}
