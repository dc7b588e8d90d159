// CUMSUM: the running sum along each row (any strides), one threadgroup per row. The row is walked in
// blocks of ntg values (thread t takes value base + t, so loads are coalesced): a block's inclusive
// prefix is the simdgroup's prefix plus the totals of the simdgroups before it, plus the carry of the
// blocks before. ntg is a multiple of 32.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

kernel void kernel_cumsum_f32(
        constant mb_kargs_cumsum & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        threadgroup float * shmem [[threadgroup(0)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        ushort nsg [[simdgroups_per_threadgroup]]) {
    device const char * x = src0 + tgpig.x * args.nb01 + tgpig.y * args.nb02 + tgpig.z * args.nb03;
    device char * y = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    float carry = 0.0f;
    for (int base = 0; base < args.ne00; base += ntg) {
        const int i = base + tpitg;
        const float v = i < args.ne00 ? *((device const float *) (x + i * args.nb00)) : 0.0f;
        const float incl = simd_prefix_inclusive_sum(v);
        const float total = simd_sum(v);
        // shmem may still be read for the previous block.
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (tiisg == 0) {
            shmem[sgitg] = total;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        float before = 0.0f;
        float block = 0.0f;
        for (int j = 0; j < nsg; ++j) {
            const float t = shmem[j];
            before += j < sgitg ? t : 0.0f;
            block += t;
        }
        if (i < args.ne00) {
            *((device float *) (y + i * args.nb0)) = carry + (before + incl);
        }
        carry += block;
    }
}
