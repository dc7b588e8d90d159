// Reductions over a whole threadgroup for the row kernels (norm, soft_max, reduce): simd_* within
// each simdgroup, then the partials of the simdgroups through threadgroup memory `shmem` (one
// float per simdgroup, so 32 floats cover 1024 threads). Every thread of the threadgroup must call
// them, in simdgroup-uniform control flow; every thread gets the result.
#pragma once

// Included after <metal_stdlib> by the .metal file.
using namespace metal;

static inline float block_sum(float x, threadgroup float * shmem, ushort tiisg, ushort sgitg, ushort nsg) {
    x = simd_sum(x);
    // shmem may still be read by a previous reduction of this threadgroup.
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tiisg == 0) {
        shmem[sgitg] = x;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    x = tiisg < nsg ? shmem[tiisg] : 0.0f;
    return simd_sum(x);
}

static inline float block_max(float x, threadgroup float * shmem, ushort tiisg, ushort sgitg, ushort nsg) {
    x = simd_max(x);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tiisg == 0) {
        shmem[sgitg] = x;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    x = tiisg < nsg ? shmem[tiisg] : -INFINITY;
    return simd_max(x);
}

static inline float hsum(float x) {
    return x;
}

static inline float hsum(float4 x) {
    return (x.x + x.y) + (x.z + x.w);
}

static inline float hmax(float x) {
    return x;
}

static inline float hmax(float4 x) {
    return max(max(x.x, x.y), max(x.z, x.w));
}
