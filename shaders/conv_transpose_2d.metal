// CONV_TRANSPOSE_2D (ggml_conv_transpose_2d_p0): one threadgroup per dst row (y, oc, n), a thread per
// output pixel x gathering the inputs that land on it: taps ky = y - iy*s, kx = x - ix*s inside the
// kernel. The kernel is f32 or f16, the data and dst f32.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

template <typename TK>
kernel void kernel_conv_transpose_2d(
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
    const int s = args.s0;
    device const char * xn = src1 + (ulong) n * args.nb13;
    device char * yrow = dst + (ulong) oy * args.nb1 + (ulong) oc * args.nb2 + (ulong) n * args.nb3;
    // iy from the largest ky that fits the kernel down to the smallest iy >= 0.
    const int iy_hi = min(oy / s, args.ne11 - 1);
    for (int ox = tiitg; ox < args.ne0; ox += ntg) {
        const int ix_hi = min(ox / s, args.ne10 - 1);
        float acc = 0.0f;
        for (int ic = 0; ic < args.ne12; ++ic) {
            device const char * plane = xn + (ulong) ic * args.nb12;
            device const char * wk = src0 + (ulong) ic * args.nb03 + (ulong) oc * args.nb02;
            for (int iy = iy_hi; iy >= 0; --iy) {
                const int ky = oy - iy * s;
                if (ky >= args.ne01) {
                    break;
                }
                for (int ix = ix_hi; ix >= 0; --ix) {
                    const int kx = ox - ix * s;
                    if (kx >= args.ne00) {
                        break;
                    }
                    const float wv = float(*((device const TK *) (wk + (ulong) ky * args.nb01 + (ulong) kx * args.nb00)));
                    acc += wv * *((device const float *) (plane + (ulong) iy * args.nb11 + (ulong) ix * args.nb10));
                }
            }
        }
        *((device float *) (yrow + (ulong) ox * args.nb0)) = acc;
    }
}

typedef decltype(kernel_conv_transpose_2d<float>) kernel_conv_transpose_2d_t;

template [[host_name("kernel_conv_transpose_2d_f32_f32")]] kernel kernel_conv_transpose_2d_t kernel_conv_transpose_2d<float>;
template [[host_name("kernel_conv_transpose_2d_f16_f32")]] kernel kernel_conv_transpose_2d_t kernel_conv_transpose_2d<half>;
