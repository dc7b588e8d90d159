// ACC (SET: set != 0): dst = src0 with src1 added into (SET: written into) the view at byte offset `offset`, strides 4, nb1, nb2, nb3.
// One thread per dst element: it copies its value and finds, from its byte position, the src1
// element that lands there, if any (the view's strides nest, checked at graph build).
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_acc_f32(
        constant mb_kargs_acc & args [[buffer(0)]],
        device const float * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device float * dst [[buffer(3)]],
        uint tpig [[thread_position_in_grid]]) {
    if (tpig >= args.n) {
        return;
    }
    float v = src0[tpig];
    const long o = long(tpig) * 4 - long(args.offset);
    if (o >= 0) {
        const ulong u = ulong(o);
        const ulong i3 = u / args.nb3;
        ulong r = u - i3 * args.nb3;
        const ulong i2 = r / args.nb2;
        r -= i2 * args.nb2;
        const ulong i1 = r / args.nb1;
        r -= i1 * args.nb1;
        const ulong i0 = r / 4;
        if (r % 4 == 0 && i0 < ulong(args.ne10) && i1 < ulong(args.ne11) && i2 < ulong(args.ne12) &&
            i3 < ulong(args.ne13)) {
            const float b = *((device const float *) (src1 + i0 * args.nb10 + i1 * args.nb11 + i2 * args.nb12 + i3 * args.nb13));
            v = args.set != 0 ? b : v + b;
        }
    }
    dst[tpig] = v;
}
