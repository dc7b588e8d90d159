// Executor tests: reductions through threadgroup memory and simdgroup functions.
#include <metal_stdlib>
#include "test_kargs.h"

using namespace metal;

// Tree reduction in threadgroup memory: one threadgroup per row of args.n floats.
kernel void kernel_test_reduce_tree(
        constant test_kargs_reduce & args [[buffer(0)]],
        device const float * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        threadgroup float * buf [[threadgroup(0)]],
        uint tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]]) {
    device const float * row = src + tgpig * args.n;
    float s = 0.0f;
    for (int i = tiitg; i < args.n; i += ntg) {
        s += row[i];
    }
    buf[tiitg] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint w = ntg / 2; w > 0; w /= 2) {
        if (tiitg < w) {
            buf[tiitg] += buf[tiitg + w];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tiitg == 0) {
        dst[tgpig] = buf[0];
    }
}

static inline float block_sum(float x, threadgroup float * buf, ushort tiisg, ushort sgitg, uint nsg) {
    x = simd_sum(x);
    if (tiisg == 0) {
        buf[sgitg] = x;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    x = tiisg < nsg ? buf[tiisg] : 0.0f;
    return simd_sum(x);
}

// Two-level sum: simd_sum per simdgroup, partial sums through threadgroup memory.
kernel void kernel_test_reduce_simd(
        constant test_kargs_reduce & args [[buffer(0)]],
        device const float * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        threadgroup float * buf [[threadgroup(0)]],
        uint tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        uint nsg [[simdgroups_per_threadgroup]]) {
    device const float * row = src + tgpig * args.n;
    float s = 0.0f;
    for (int i = tiitg; i < args.n; i += ntg) {
        s += row[i];
    }
    s = block_sum(s, buf, tiisg, sgitg, nsg);
    if (tiitg == 0) {
        dst[tgpig] = s;
    }
}

// The same with a bug: simdgroup_barrier orders only the simdgroup's own lanes, so
// reading the other simdgroups' partial sums races. Lockstep happens to order every
// write before every read; RunAhead does not.
kernel void kernel_test_reduce_missing_barrier(
        constant test_kargs_reduce & args [[buffer(0)]],
        device const float * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        threadgroup float * buf [[threadgroup(0)]],
        uint tgpig [[threadgroup_position_in_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        uint ntg [[threads_per_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        uint nsg [[simdgroups_per_threadgroup]]) {
    device const float * row = src + tgpig * args.n;
    float s = 0.0f;
    for (int i = tiitg; i < args.n; i += ntg) {
        s += row[i];
    }
    s = simd_sum(s);
    if (tiisg == 0) {
        buf[sgitg] = s;
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    s = tiisg < nsg ? buf[tiisg] : 0.0f;
    s = simd_sum(s);
    if (tiitg == 0) {
        dst[tgpig] = s;
    }
}

// Every simd_* function once; one 16-float record per thread.
kernel void kernel_test_simd_ops(
        device const int * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        uint tpig [[thread_position_in_grid]],
        ushort tiisg [[thread_index_in_simdgroup]]) {
    const int v = src[tpig];
    const float f = (float) v;
    device float * o = dst + tpig * 16;
    o[0] = simd_sum(f);
    o[1] = simd_max(f);
    o[2] = simd_min(f);
    o[3] = simd_prefix_inclusive_sum(f);
    o[4] = simd_prefix_exclusive_sum(f);
    o[5] = simd_shuffle(f, (tiisg + 5) % 32);
    o[6] = simd_shuffle_down(f, 3);
    o[7] = simd_shuffle_up(f, 2);
    o[8] = simd_shuffle_xor(f, 1);
    o[9] = simd_broadcast(f, 7);
    o[10] = (float) simd_and(v);
    o[11] = (float) simd_or(v);
    o[12] = (float) simd_xor(v);
    o[13] = simd_any(v == 17) ? 1.0f : 0.0f;
    o[14] = simd_all(v >= 0) ? 1.0f : 0.0f;
    o[15] = (float) (uint) (simd_vote::vote_t) simd_ballot((v & 1) != 0);
}

// Partial simdgroup: lanes past args.n return first; simd_sum covers the others.
kernel void kernel_test_simd_partial(
        constant test_kargs_reduce & args [[buffer(0)]],
        device const float * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        uint tpig [[thread_position_in_grid]]) {
    if ((int) tpig >= args.n) {
        return;
    }
    const float4 v = float4(src[tpig], 1.0f, 2.0f, 3.0f);
    const float4 s = simd_sum(v);
    dst[tpig] = s.x + s.y * 1000.0f + simd_broadcast_first(src[tpig]) * 1000000.0f;
}
