// SSM_CONV: out[ch, t, s] = sum_k sx[t + k, ch, s] * c[k, ch]. One threadgroup per (t, s); threads
// take channels.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_ssm_conv_f32(
        constant mb_kargs_ssm_conv & args [[buffer(0)]],
        device const char * sx [[buffer(1)]],
        device const char * c [[buffer(2)]],
        device char * dst [[buffer(3)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int t = tgpig.x;
    const int s = tgpig.y;
    for (int ch = tpitg; ch < args.ne0; ch += ntg) {
        float acc = 0.0f;
        for (int k = 0; k < args.d_conv; ++k) {
            acc += *((device const float *) (sx + (t + k) * args.nb00 + ch * args.nb01 + s * args.nb02)) *
                   *((device const float *) (c + k * args.nb10 + ch * args.nb11));
        }
        *((device float *) (dst + ch * args.nb0 + t * args.nb1 + s * args.nb2)) = acc;
    }
}
