// SOFT_MAX: softmax(x*scale + slope*mask) over each row, one threadgroup per row: the logits' max
// and the sum of their exponentials through simd_max/simd_sum. With sinks, the head's sink logit
// joins the max and adds exp(sink - max) to the sum.
#include <metal_stdlib>
#include "kargs.h"
#include "block_reduce.h"

using namespace metal;

constant bool FC_soft_max_mask [[function_constant(400)]];
constant bool FC_soft_max_sinks [[function_constant(401)]];

// T: float, or float4 when the row length is a multiple of 4; TM: the mask's element type (T's
// shape: half4 with float4).
template <typename T, typename TM>
kernel void kernel_soft_max(
        constant mb_kargs_soft_max & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        device const char * mask [[buffer(3)]],
        device const float * sinks [[buffer(4)]],
        threadgroup float * shmem [[threadgroup(0)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        ushort nsg [[simdgroups_per_threadgroup]]) {
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;
    device const T * x = (device const T *) (src0 + i1 * args.nb01 + i2 * args.nb02 + i3 * args.nb03);
    device T * y = (device T *) (dst + i1 * args.nb1 + i2 * args.nb2 + i3 * args.nb3);
    device const TM * m = (device const TM *) mask;
    if (FC_soft_max_mask) {
        m = (device const TM *) (mask + i1 * args.nb11 + (i2 % args.ne12) * args.nb12 + (i3 % args.ne13) * args.nb13);
    }

    float slope = 1.0f;
    if (args.max_bias > 0.0f) {
        slope = i2 < args.n_head_log2 ? pow(args.m0, (float) (i2 + 1))
                                      : pow(args.m1, (float) (2 * (i2 - args.n_head_log2) + 1));
    }

    float lmax = -INFINITY;
    for (int i = tpitg; i < args.nk; i += ntg) {
        T v = x[i] * args.scale;
        if (FC_soft_max_mask) {
            v += slope * T(m[i]);
        }
        lmax = max(lmax, hmax(v));
    }
    float vmax = block_max(lmax, shmem, tiisg, sgitg, nsg);
    float sink = 0.0f;
    if (FC_soft_max_sinks) {
        sink = sinks[i2];
        vmax = max(vmax, sink);
    }

    // Each thread keeps its own elements in dst between the passes, so no barrier is needed.
    float lsum = 0.0f;
    for (int i = tpitg; i < args.nk; i += ntg) {
        T v = x[i] * args.scale;
        if (FC_soft_max_mask) {
            v += slope * T(m[i]);
        }
        const T e = exp(v - vmax);
        y[i] = e;
        lsum += hsum(e);
    }
    float sum = block_sum(lsum, shmem, tiisg, sgitg, nsg);
    if (FC_soft_max_sinks) {
        sum += exp(sink - vmax);
    }
    const float inv = 1.0f / sum;
    for (int i = tpitg; i < args.nk; i += ntg) {
        y[i] = y[i] * inv;
    }
}

typedef decltype(kernel_soft_max<float, float>) kernel_soft_max_t;
typedef decltype(kernel_soft_max<float4, float4>) kernel_soft_max_4_t;

template [[host_name("kernel_soft_max_f32")]] kernel kernel_soft_max_t kernel_soft_max<float, float>;
template [[host_name("kernel_soft_max_f16")]] kernel kernel_soft_max_t kernel_soft_max<float, half>;
template [[host_name("kernel_soft_max_f32_4")]] kernel kernel_soft_max_4_t kernel_soft_max<float4, float4>;
template [[host_name("kernel_soft_max_f16_4")]] kernel kernel_soft_max_4_t kernel_soft_max<float4, half4>;
