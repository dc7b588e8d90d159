// CONV_TRANSPOSE_1D: out[n][oc][ol] = sum over k with ol + p0 - k*d0 = l*s0, 0 <= l < L, and over ic
// of data[n][ic][l] * kernel[ic][oc][k]. One threadgroup per (oc, n) row; threads take outputs.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

template <typename T>
kernel void kernel_conv_transpose_1d(
        constant mb_kargs_conv_transpose_1d & args [[buffer(0)]],
        device const char * kern [[buffer(1)]],
        device const char * data [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int oc = tgpig.x;
    const int n = tgpig.y;
    for (int ol = tpitg; ol < args.ol; ol += ntg) {
        float s = 0.0f;
        for (int k = 0; k < args.k; ++k) {
            const int num = ol + args.p0 - k * args.d0;
            if (num < 0 || num % args.s0 != 0 || num / args.s0 >= args.l) {
                continue;
            }
            const int l = num / args.s0;
            for (int ic = 0; ic < args.ic; ++ic) {
                const float x = *((device const float *) (data + l * args.nb10 + ic * args.nb11 + n * args.nb12));
                const float w = float(*((device const T *) (kern + k * args.nb00 + oc * args.nb01 + ic * args.nb02)));
                s += x * w;
            }
        }
        *((device float *) (dst + ol * args.nb0 + oc * args.nb1 + n * args.nb2)) = s;
    }
}

typedef decltype(kernel_conv_transpose_1d<float>) kernel_conv_transpose_1d_t;

template [[host_name("kernel_conv_transpose_1d_f32")]] kernel kernel_conv_transpose_1d_t kernel_conv_transpose_1d<float>;
template [[host_name("kernel_conv_transpose_1d_f16")]] kernel kernel_conv_transpose_1d_t kernel_conv_transpose_1d<half>;
