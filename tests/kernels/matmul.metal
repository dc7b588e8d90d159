// Executor tests: 8x8 simdgroup matrices. c (m x n) = a (m x k) * b (k x n), row-major;
// each simdgroup computes one 8x8 tile of c, staging b through threadgroup memory.
#include <metal_stdlib>
#include "test_kargs.h"

using namespace metal;

template <typename T, typename M>
kernel void kernel_test_matmul(
        constant test_kargs_matmul & args [[buffer(0)]],
        device const T * a [[buffer(1)]],
        device const T * b [[buffer(2)]],
        device float * c [[buffer(3)]],
        threadgroup T * tb [[threadgroup(0)]],
        uint2 tgpig [[threadgroup_position_in_grid]],
        ushort tiitg [[thread_index_in_threadgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        ushort nsg [[simdgroups_per_threadgroup]]) {
    const int row0 = (tgpig.y * nsg + sgitg) * 8;
    const int col0 = tgpig.x * 8;
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (int k0 = 0; k0 < args.k; k0 += 8) {
        // The threadgroup stages the 8x8 block of b shared by its simdgroups.
        for (int i = tiitg; i < 64; i += nsg * 32) {
            tb[i] = b[(k0 + i / 8) * args.n + col0 + i % 8];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        M ma;
        M mb;
        simdgroup_load(ma, a + row0 * args.k + k0, args.k);
        simdgroup_load(mb, tb, 8);
        simdgroup_multiply_accumulate(acc, ma, mb, acc);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    simdgroup_store(acc, c + row0 * args.n + col0, args.n);
}

typedef decltype(kernel_test_matmul<float, simdgroup_float8x8>) kernel_test_matmul_t;

template [[host_name("kernel_test_matmul_f32")]] kernel kernel_test_matmul_t kernel_test_matmul<float, simdgroup_float8x8>;
template [[host_name("kernel_test_matmul_f16")]] kernel kernel_test_matmul_t kernel_test_matmul<half, simdgroup_half8x8>;

// Transposed load: c (8 x 8) = a^T * b with a given row-major.
kernel void kernel_test_matmul_transposed(
        device const float * a [[buffer(1)]],
        device const float * b [[buffer(2)]],
        device float * c [[buffer(3)]],
        ushort tiisg [[thread_index_in_simdgroup]]) {
    simdgroup_float8x8 ma;
    simdgroup_float8x8 mb;
    simdgroup_float8x8 mc;
    simdgroup_load(ma, a, 8, ulong2(0, 0), true);
    simdgroup_load(mb, b, 8);
    simdgroup_multiply(mc, ma, mb);
    simdgroup_store(mc, c, 8);
    (void) tiisg;
}
