// NORM, RMS_NORM and L2_NORM: one threadgroup per row, sums through simd_sum. NORM centres in a second pass
// over the row (not E[x^2] - E[x]^2, which cancels for rows far from zero). Fused (FC_norm_fuse):
// the result times w (1), plus b (2), as a following MUL and ADD would compute it.
#include <metal_stdlib>
#include "kargs.h"
#include "block_reduce.h"

using namespace metal;

constant bool FC_norm_rms [[function_constant(300)]];
constant int FC_norm_fuse [[function_constant(301)]];
constant bool FC_norm_l2 [[function_constant(302)]];  // with FC_norm_rms: x / max(||x||, eps)

// T is float, or float4 when every row (and w, b row) length is a multiple of 4.
template <typename T>
kernel void kernel_norm(
        constant mb_kargs_norm & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        device const char * w [[buffer(3)]],
        device const char * b [[buffer(4)]],
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

    float mean = 0.0f;
    if (!FC_norm_rms) {
        float s = 0.0f;
        for (int i = tpitg; i < args.nk; i += ntg) {
            s += hsum(x[i]);
        }
        mean = block_sum(s, shmem, tiisg, sgitg, nsg) / args.ne00;
    }
    float s2 = 0.0f;
    for (int i = tpitg; i < args.nk; i += ntg) {
        const T d = x[i] - mean;
        s2 += hsum(d * d);
    }
    const float ss = block_sum(s2, shmem, tiisg, sgitg, nsg);
    const float scale = FC_norm_l2 ? 1.0f / max(sqrt(ss), args.eps) : 1.0f / sqrt(ss / args.ne00 + args.eps);

    device const T * wr = (device const T *) w;
    device const T * br = (device const T *) b;
    if (FC_norm_fuse >= 1) {
        wr = (device const T *) (w + (i1 % args.ne11) * args.nb11 + (i2 % args.ne12) * args.nb12 +
                                 (i3 % args.ne13) * args.nb13);
    }
    if (FC_norm_fuse >= 2) {
        br = (device const T *) (b + (i1 % args.ne21) * args.nb21 + (i2 % args.ne22) * args.nb22 +
                                 (i3 % args.ne23) * args.nb23);
    }
    for (int i = tpitg; i < args.nk; i += ntg) {
        T v = (x[i] - mean) * scale;
        if (FC_norm_fuse >= 1) {
            v = v * wr[i % args.ne10];
        }
        if (FC_norm_fuse >= 2) {
            v = v + br[i % args.ne20];
        }
        y[i] = v;
    }
}

// GROUP_NORM: one threadgroup per (group, i3), three passes over the group's elements (sum, squared
// deviations, write), any strides.
kernel void kernel_group_norm_f32(
        constant mb_kargs_group_norm & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        threadgroup float * shmem [[threadgroup(0)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        ushort nsg [[simdgroups_per_threadgroup]]) {
    const int per = (args.ne02 + args.n_groups - 1) / args.n_groups;
    const int c0 = int(tgpig.x) * per;
    const int c1 = min(c0 + per, args.ne02);
    if (c0 >= c1) {
        return;  // an empty group (more groups than channels): the whole threadgroup leaves
    }
    const int plane = args.ne00 * args.ne01;
    const int n = plane * (c1 - c0);
    device const char * x = src0 + tgpig.y * args.nb03;
    device char * y = dst + tgpig.y * args.nb3;
    float s = 0.0f;
    for (int i = tpitg; i < n; i += ntg) {
        const int c = c0 + i / plane, r = i % plane;
        s += *((device const float *) (x + (r % args.ne00) * args.nb00 + (r / args.ne00) * args.nb01 + c * args.nb02));
    }
    const float mean = block_sum(s, shmem, tiisg, sgitg, nsg) / n;
    float s2 = 0.0f;
    for (int i = tpitg; i < n; i += ntg) {
        const int c = c0 + i / plane, r = i % plane;
        const float d =
            *((device const float *) (x + (r % args.ne00) * args.nb00 + (r / args.ne00) * args.nb01 + c * args.nb02)) -
            mean;
        s2 += d * d;
    }
    const float scale = 1.0f / sqrt(block_sum(s2, shmem, tiisg, sgitg, nsg) / n + args.eps);
    for (int i = tpitg; i < n; i += ntg) {
        const int c = c0 + i / plane, r = i % plane;
        const float v =
            *((device const float *) (x + (r % args.ne00) * args.nb00 + (r / args.ne00) * args.nb01 + c * args.nb02));
        *((device float *) (y + (r % args.ne00) * args.nb0 + (r / args.ne00) * args.nb1 + c * args.nb2)) =
            (v - mean) * scale;
    }
}

typedef decltype(kernel_norm<float>) kernel_norm_t;
typedef decltype(kernel_norm<float4>) kernel_norm_4_t;

template [[host_name("kernel_norm_f32")]] kernel kernel_norm_t kernel_norm<float>;
template [[host_name("kernel_norm_f32_4")]] kernel kernel_norm_4_t kernel_norm<float4>;
