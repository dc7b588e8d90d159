// TIMESTEP_EMBEDDING: row i holds cos(t_i f_j) for j < half, then sin(t_i f_j), f_j =
// max_period^(-j / half); an odd dim ends in a 0. One threadgroup per timestep.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_timestep_embedding_f32(
        constant mb_kargs_timestep_embedding & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const float t = *((device const float *) (src0 + tgpig.x * args.nb00));
    device float * y = (device float *) (dst + tgpig.x * args.nb1);
    const float log_period = precise::log(float(args.max_period));
    for (int j = tpitg; j < args.half_dim; j += ntg) {
        const float arg = t * precise::exp(-log_period * float(j) / float(args.half_dim));
        y[j] = precise::cos(arg);
        y[j + args.half_dim] = precise::sin(arg);
    }
    if (args.dim % 2 != 0 && tpitg == 0) {
        y[2 * args.half_dim] = 0.0f;
    }
}
