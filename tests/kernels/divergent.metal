// Executor tests: kernels that break the rules and must be reported, not hang or crash.
#include <metal_stdlib>
#include "test_kargs.h"

using namespace metal;

kernel void kernel_test_divergent(
        constant test_kargs_mode & args [[buffer(0)]],
        device float * dst [[buffer(1)]],
        threadgroup float * buf [[threadgroup(0)]],
        uint tiitg [[thread_index_in_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]]) {
    if (args.mode == 0) {
        // Half of the threads return before the barrier.
        if (tiitg >= 32) {
            return;
        }
        buf[tiitg] = 1.0f;
        threadgroup_barrier(mem_flags::mem_threadgroup);
    } else if (args.mode == 1) {
        // Two different barriers.
        if (tiitg < 32) {
            threadgroup_barrier(mem_flags::mem_threadgroup);
        } else {
            threadgroup_barrier(mem_flags::mem_threadgroup);
        }
    } else if (args.mode == 2) {
        // Lanes of one simdgroup at different simd operations.
        float x = 1.0f;
        if (tiisg < 16) {
            x = simd_sum(x);
        } else {
            x = simd_max(x);
        }
        dst[tiitg] = x;
    } else if (args.mode == 3) {
        // A simdgroup matrix operation that lane 0 skips.
        simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
        if (tiisg != 0) {
            simdgroup_store(m, dst, 8);
        }
    } else if (args.mode == 4) {
        // Lanes of a simdgroup wait at a simd operation while the others wait at a
        // threadgroup barrier.
        if (tiisg < 8) {
            dst[tiitg] = simd_sum(1.0f);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    } else if (args.mode == 5) {
        // Writes past the end of its threadgroup buffer.
        buf[tiitg + 64] = 2.0f;
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}
