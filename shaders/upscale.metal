// UPSCALE (nearest): dst[i] = src0[floor(i_d / sf_d)] on every dim, sf_d = ne_d / ne0_d. One
// threadgroup per dst row.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_upscale_f32(
        constant mb_kargs_upscale & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int j1 = int(float(tgpig.x) / args.sf1);
    const int j2 = int(float(tgpig.y) / args.sf2);
    const int j3 = int(float(tgpig.z) / args.sf3);
    device const char * x = src0 + j1 * args.nb01 + j2 * args.nb02 + j3 * args.nb03;
    device char * y = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    for (int i0 = tpitg; i0 < args.ne0; i0 += ntg) {
        const int j0 = int(float(i0) / args.sf0);
        *((device float *) (y + i0 * args.nb0)) = *((device const float *) (x + j0 * args.nb00));
    }
}
