// Executor benchmark kernels (tests/native/bench_executor.cpp): synchronisation only.
#include <metal_stdlib>
#include "test_kargs.h"

using namespace metal;

// args.mode iterations of one threadgroup barrier each.
kernel void kernel_bench_barriers(
        constant test_kargs_mode & args [[buffer(0)]],
        device float * dst [[buffer(1)]],
        uint tpig [[thread_position_in_grid]]) {
    for (int i = 0; i < args.mode; ++i) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    dst[tpig] = 1.0f;
}

// args.mode iterations of one simd_sum each.
kernel void kernel_bench_simd_sum(
        constant test_kargs_mode & args [[buffer(0)]],
        device float * dst [[buffer(1)]],
        uint tpig [[thread_position_in_grid]]) {
    float s = (float) tpig;
    for (int i = 0; i < args.mode; ++i) {
        s = simd_sum(s) * 0.03125f;
    }
    dst[tpig] = s;
}
