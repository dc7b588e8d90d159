// TRI, DIAG_MASK_INF, DIAG_MASK_ZERO and DIAG: one threadgroup per dst row; element i0 of row i1 is
// the source's when lo <= i0 - i1 <= hi, else the fill value (core/tri_band.h gives the band).
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

template <typename T>
kernel void kernel_tri(
        constant mb_kargs_tri & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    device const char * x = src0 + (ulong) i1 * args.nb01 + (ulong) i2 * args.nb02 + (ulong) i3 * args.nb03;
    device char * y = dst + (ulong) i1 * args.nb1 + (ulong) i2 * args.nb2 + (ulong) i3 * args.nb3;
    for (int i0 = tiitg; i0 < args.ne0; i0 += ntg) {
        const long d = long(i0) - long(i1);
        const bool keep = d >= long(args.lo) && d <= long(args.hi);
        *((device T *) (y + (ulong) i0 * args.nb0)) = keep ? *((device const T *) (x + (ulong) i0 * args.nb00)) : T(args.fill);
    }
}

typedef decltype(kernel_tri<float>) kernel_tri_t;

template [[host_name("kernel_tri_f32")]] kernel kernel_tri_t kernel_tri<float>;
template [[host_name("kernel_tri_f16")]] kernel kernel_tri_t kernel_tri<half>;
