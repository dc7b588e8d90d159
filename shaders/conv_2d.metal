// CONV_2D and CONV_2D_DW (direct): one threadgroup per dst row (oy, oc, n), a thread per output
// pixel ox summing over the input channels (DW: its own channel) and the kernel's taps. The kernel
// is f32 or f16, the data and dst f32.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

template <typename TK>
kernel void kernel_conv_2d(
        constant mb_kargs_conv_2d & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device const char * src1 [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int oy = tgpig.x;
    const int oc = tgpig.y;
    const int n = tgpig.z;
    const int ic0 = args.dw != 0 ? oc : 0;
    const int ic1 = args.dw != 0 ? oc + 1 : args.ne12;
    device const char * w = src0 + (ulong) oc * args.nb03;
    device const char * xn = src1 + (ulong) n * args.nb13;
    device char * y = dst + (ulong) oy * args.nb1 + (ulong) oc * args.nb2 + (ulong) n * args.nb3;
    for (int ox = tiitg; ox < args.ne0; ox += ntg) {
        float s = 0.0f;
        for (int ic = ic0; ic < ic1; ++ic) {
            device const char * plane = xn + (ulong) ic * args.nb12;
            device const char * wk = w + (ulong) (args.dw != 0 ? 0 : ic) * args.nb02;
            for (int ky = 0; ky < args.ne01; ++ky) {
                const int iy = oy * args.s1 + ky * args.d1 - args.p1;
                if (iy < 0 || iy >= args.ne11) {
                    continue;
                }
                for (int kx = 0; kx < args.ne00; ++kx) {
                    const int ix = ox * args.s0 + kx * args.d0 - args.p0;
                    if (ix < 0 || ix >= args.ne10) {
                        continue;
                    }
                    const float wv = float(*((device const TK *) (wk + (ulong) ky * args.nb01 + (ulong) kx * args.nb00)));
                    s += wv * *((device const float *) (plane + (ulong) iy * args.nb11 + (ulong) ix * args.nb10));
                }
            }
        }
        *((device float *) (y + (ulong) ox * args.nb0)) = s;
    }
}

typedef decltype(kernel_conv_2d<float>) kernel_conv_2d_t;

template [[host_name("kernel_conv_2d_f32_f32")]] kernel kernel_conv_2d_t kernel_conv_2d<float>;
template [[host_name("kernel_conv_2d_f16_f32")]] kernel kernel_conv_2d_t kernel_conv_2d<half>;
