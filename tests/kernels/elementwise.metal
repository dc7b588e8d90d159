// Executor tests: plain per-thread kernels (no synchronisation: they run as loops).
#include <metal_stdlib>
#include "test_kargs.h"

using namespace metal;

constant float kHalf = 0.5f;

template <typename T>
kernel void kernel_test_add(
        constant test_kargs_binary & args [[buffer(0)]],
        device const T * a [[buffer(1)]],
        device const T * b [[buffer(2)]],
        device T * dst [[buffer(3)]],
        uint tpig [[thread_position_in_grid]]) {
    if ((int) tpig >= args.n) {
        return;
    }
    dst[tpig] = (T) ((float) a[tpig] + (float) b[tpig] * args.scale);
}

typedef decltype(kernel_test_add<float>) kernel_test_add_t;

template [[host_name("kernel_test_add_f32")]] kernel kernel_test_add_t kernel_test_add<float>;
template [[host_name("kernel_test_add_f16")]] kernel kernel_test_add_t kernel_test_add<half>;

// float4 per thread, with vector conversions and math builtins.
kernel void kernel_test_gelu4(
        constant test_kargs_binary & args [[buffer(0)]],
        device const float4 * src [[buffer(1)]],
        device float4 * dst [[buffer(2)]],
        uint tpig [[thread_position_in_grid]]) {
    const float4 x = src[tpig];
    const half4 h = half4(x);
    const float4 y = kHalf * x * (1.0f + tanh(0.7978845608f * x * (1.0f + 0.044715f * x * x)));
    dst[tpig] = y * args.scale + float4(h - h) + float4(0.0h);
}

// Writes every position attribute of a 3-D dispatch.
kernel void kernel_test_ids(
        device uint * dst [[buffer(1)]],
        uint3 tpig [[thread_position_in_grid]],
        ushort3 tpitg [[thread_position_in_threadgroup]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        uint3 ntg [[threads_per_threadgroup]],
        uint3 ngrid [[threadgroups_per_grid]],
        uint3 tpg [[threads_per_grid]],
        uint tiitg [[thread_index_in_threadgroup]],
        ushort tiisg [[thread_index_in_simdgroup]],
        ushort sgitg [[simdgroup_index_in_threadgroup]],
        uint nsg [[simdgroups_per_threadgroup]],
        uint width [[threads_per_simdgroup]]) {
    const uint idx = (tpig.z * tpg.y + tpig.y) * tpg.x + tpig.x;
    device uint * o = dst + idx * 16;
    o[0] = tpig.x; o[1] = tpig.y; o[2] = tpig.z;
    o[3] = tpitg.x; o[4] = tpitg.y; o[5] = tpitg.z;
    o[6] = tgpig.x; o[7] = tgpig.y; o[8] = tgpig.z;
    o[9] = ntg.x * ntg.y * ntg.z;
    o[10] = ngrid.x * ngrid.y * ngrid.z;
    o[11] = tiitg;
    o[12] = tiisg;
    o[13] = sgitg;
    o[14] = nsg;
    o[15] = width;
}

constant bool FC_test_square [[function_constant(100)]];
constant int FC_test_offset [[function_constant(101)]];
constant float FC_test_unused [[function_constant(102)]];

// Function constants: FC_test_offset only through is_function_constant_defined is not
// required; FC_test_square is.
kernel void kernel_test_fc(
        device const float * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        uint tpig [[thread_position_in_grid]]) {
    float x = src[tpig];
    if (FC_test_square) {
        x = x * x;
    }
    if (is_function_constant_defined(FC_test_offset)) {
        x += 1000.0f;
    }
    dst[tpig] = x;
}

typedef struct {
    half d;
    uint8_t qs[16];
} test_block_q4;

// One 4-bit block per thread through a half4x4 register tile; every thread bumps one
// counter shared by all threadgroups (host threads) and writes its first value as bfloat.
kernel void kernel_test_misc(
        device const test_block_q4 * src [[buffer(1)]],
        device float * dst [[buffer(2)]],
        device atomic_uint * counter [[buffer(3)]],
        device bfloat * first [[buffer(4)]],
        uint tpig [[thread_position_in_grid]]) {
    device const test_block_q4 * b = src + tpig;
    const float d = (float) b->d;
    half4x4 reg;
    for (int i = 0; i < 16; ++i) {
        reg[i / 4][i % 4] = (half) (((b->qs[i] & 0x0F) - 8) * d);
    }
    const float4x4 f = (float4x4) reg;
    device float4 * out = (device float4 *) (dst + tpig * 16);
    for (int i = 0; i < 4; ++i) {
        out[i] = clamp(select(f[i], -f[i], f[i] < 0.0f), 0.0f, 100.0f);
    }
    const uint bits = as_type<uint>(f[0][0]);
    first[tpig] = (bfloat) as_type<float>(bits);
    atomic_fetch_add_explicit(counter, 1u, memory_order_relaxed);
}
