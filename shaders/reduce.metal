// SUM_ROWS / MEAN and ARGMAX: one threadgroup per row of src0 (any strides), reductions through
// simd_* and threadgroup memory.
#include <metal_stdlib>
#include "kargs.h"
#include "block_reduce.h"

using namespace metal;

kernel void kernel_sum_rows_f32(
        constant mb_kargs_reduce & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
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
    device const char * x = src0 + i1 * args.nb01 + i2 * args.nb02 + i3 * args.nb03;
    float s = 0.0f;
    for (int i = tpitg; i < args.ne00; i += ntg) {
        s += *((device const float *) (x + i * args.nb00));
    }
    s = block_sum(s, shmem, tiisg, sgitg, nsg);
    if (tpitg == 0) {
        *((device float *) (dst + i1 * args.nb1 + i2 * args.nb2 + i3 * args.nb3)) = args.mean ? s / args.ne00 : s;
    }
}

// SUM: one threadgroup over every element of src0 (any strides), flat index i = i0 + ne00 * row.
kernel void kernel_sum_f32(
        constant mb_kargs_reduce & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device float * dst [[buffer(2)]],
        threadgroup float * shmem [[threadgroup(0)]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        ushort nsg [[simdgroups_per_threadgroup]]) {
    const ulong n = ulong(args.ne00) * ulong(args.ne01) * ulong(args.ne02) * ulong(args.ne03);
    float s = 0.0f;
    for (ulong i = tpitg; i < n; i += ntg) {
        const ulong i0 = i % ulong(args.ne00);
        ulong r = i / ulong(args.ne00);
        const ulong i1 = r % ulong(args.ne01);
        r /= ulong(args.ne01);
        const ulong i2 = r % ulong(args.ne02);
        const ulong i3 = r / ulong(args.ne02);
        s += *((device const float *) (src0 + i0 * args.nb00 + i1 * args.nb01 + i2 * args.nb02 + i3 * args.nb03));
    }
    s = block_sum(s, shmem, tiisg, sgitg, nsg);
    if (tpitg == 0) {
        dst[0] = s;
    }
}

// The first index of the largest value; NaN never wins (a row of NaNs gives 0). Each thread keeps
// its best (value, index), idx < 0 when it saw only NaNs; ties go to the smaller index.
kernel void kernel_argmax_f32(
        constant mb_kargs_reduce & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device int * dst [[buffer(2)]],
        threadgroup float * shmem [[threadgroup(0)]],
        threadgroup int * shidx [[threadgroup(1)]],
        uint tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        ushort nsg [[simdgroups_per_threadgroup]]) {
    device const char * x = src0 + tgpig * args.nb01;
    float best = -INFINITY;
    int idx = -1;
    for (int i = tpitg; i < args.ne00; i += ntg) {
        const float v = *((device const float *) (x + i * args.nb00));
        // NaN tested on the bits: under fast math isnan() may fold to false.
        const bool is_nan = (as_type<uint>(v) & 0x7fffffffu) > 0x7f800000u;
        if (!is_nan && (idx < 0 || v > best)) {
            best = v;
            idx = i;
        }
    }

    // Within the simdgroup: the largest value among lanes that have one, then the smallest index
    // holding it (INT_MAX: none).
    float m = simd_max(best);
    int r = simd_min(idx >= 0 && best == m ? idx : INT_MAX);
    if (tiisg == 0) {
        shmem[sgitg] = m;
        shidx[sgitg] = r;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sgitg == 0) {
        const bool has = tiisg < nsg && shidx[tiisg] != INT_MAX;
        best = has ? shmem[tiisg] : -INFINITY;
        m = simd_max(best);
        r = simd_min(has && best == m ? shidx[tiisg] : INT_MAX);
        if (tiisg == 0) {
            dst[tgpig] = r == INT_MAX ? 0 : r;
        }
    }
}
