// OUT_PROD: one threadgroup per dst row (n, i2, i3); thread m sums a[k][m] * b[k][n] over k, so the
// threads of a group read a's rows coalesced and share b's value.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_out_prod_f32(
        constant mb_kargs_out_prod & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int n = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    const int j2 = i2 / (args.ne12 / args.ne02);
    const int j3 = i3 / (args.ne13 / args.ne03);
    device const char * a = src0 + (ulong) j2 * args.nb02 + (ulong) j3 * args.nb03;
    device const char * b = src1 + (ulong) n * args.nb10 + (ulong) i2 * args.nb12 + (ulong) i3 * args.nb13;
    device char * y = dst + (ulong) n * args.nb1 + (ulong) i2 * args.nb2 + (ulong) i3 * args.nb3;
    for (int m = tiitg; m < args.ne00; m += ntg) {
        float s = 0.0f;
        for (int k = 0; k < args.ne01; ++k) {
            s += *((device const float *) (a + (ulong) k * args.nb01 + (ulong) m * args.nb00)) *
                 *((device const float *) (b + (ulong) k * args.nb11));
        }
        *((device float *) (y + (ulong) m * args.nb0)) = s;
    }
}
