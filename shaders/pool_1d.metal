// POOL_1D: one threadgroup per dst row, a thread per output: max over the window's cells inside the
// row, or their mean (padding left out of the count, as ggml's pool_1d). p0 < k0 (host-checked), so
// every window holds a cell.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_pool_1d_f32(
        constant mb_kargs_pool_1d & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    device const char * x = src0 + (ulong) tgpig.x * args.nb01 + (ulong) tgpig.y * args.nb02 + (ulong) tgpig.z * args.nb03;
    device char * y = dst + (ulong) tgpig.x * args.nb1 + (ulong) tgpig.y * args.nb2 + (ulong) tgpig.z * args.nb3;
    for (int o = tiitg; o < args.ne0; o += ntg) {
        const int j0 = max(0, o * args.s0 - args.p0);
        const int j1 = min(args.ne00, o * args.s0 - args.p0 + args.k0);
        float acc = *((device const float *) (x + (ulong) j0 * args.nb00));
        for (int j = j0 + 1; j < j1; ++j) {
            const float v = *((device const float *) (x + (ulong) j * args.nb00));
            acc = args.avg != 0 ? acc + v : (v > acc ? v : acc);
        }
        if (args.avg != 0) {
            acc /= float(j1 - j0);
        }
        *((device float *) (y + (ulong) o * args.nb0)) = acc;
    }
}
