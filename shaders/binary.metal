// ADD SUB MUL DIV: dst = src0 (op) src1, src1 broadcast over dst by modulo on every dim. A fused
// chain of ADDs (FC_bin_n > 1) adds every operand in one pass, so the intermediate sums never
// reach memory.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

constant int FC_bin_op [[function_constant(100)]];
constant int FC_bin_n [[function_constant(101)]];

static inline float bin_apply(float a, float b) {
    if (FC_bin_op == MB_BIN_SUB) {
        return a - b;
    }
    if (FC_bin_op == MB_BIN_MUL) {
        return a * b;
    }
    if (FC_bin_op == MB_BIN_DIV) {
        return a / b;
    }
    return a + b;
}

static inline float4 bin_apply4(float4 a, float4 b) {
    if (FC_bin_op == MB_BIN_SUB) {
        return a - b;
    }
    if (FC_bin_op == MB_BIN_MUL) {
        return a * b;
    }
    if (FC_bin_op == MB_BIN_DIV) {
        return a / b;
    }
    return a + b;
}

// Operand k of a chain. Kernel parameters cannot be indexed, and k is a loop counter the compiler
// unrolls (FC_bin_n is constant), so this folds to one pointer per iteration.
static inline device const char * bin_operand(int k,
        device const char * s0, device const char * s1, device const char * s2, device const char * s3,
        device const char * s4, device const char * s5, device const char * s6, device const char * s7) {
    switch (k) {
        case 0: return s0;
        case 1: return s1;
        case 2: return s2;
        case 3: return s3;
        case 4: return s4;
        case 5: return s5;
        case 6: return s6;
        default: return s7;
    }
}

// One threadgroup per dst row (i1, i2, i3); its threads stride over the row.
template <typename T1>
kernel void kernel_bin(
        constant mb_kargs_bin & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        device const char * src1_0 [[buffer(3)]],
        device const char * src1_1 [[buffer(4)]],
        device const char * src1_2 [[buffer(5)]],
        device const char * src1_3 [[buffer(6)]],
        device const char * src1_4 [[buffer(7)]],
        device const char * src1_5 [[buffer(8)]],
        device const char * src1_6 [[buffer(9)]],
        device const char * src1_7 [[buffer(10)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    const int i1 = tgpig.x;
    const int i2 = tgpig.y;
    const int i3 = tgpig.z;

    device const char * x = src0 + i1 * args.nb01 + i2 * args.nb02 + i3 * args.nb03;
    device char * y = dst + i1 * args.nb1 + i2 * args.nb2 + i3 * args.nb3;

    // Row offsets of the operands, fixed for the whole row.
    ulong row1[MB_BIN_MAX_SRC1];
    for (int k = 0; k < FC_bin_n; ++k) {
        row1[k] = (i1 % args.ne1x[k][1]) * args.nb1x[k][1] + (i2 % args.ne1x[k][2]) * args.nb1x[k][2] +
                  (i3 % args.ne1x[k][3]) * args.nb1x[k][3];
    }

    for (int i0 = tpitg; i0 < args.ne0; i0 += ntg) {
        float v = *((device const float *) (x + i0 * args.nb00));
        for (int k = 0; k < FC_bin_n; ++k) {
            device const char * s = bin_operand(k, src1_0, src1_1, src1_2, src1_3, src1_4, src1_5, src1_6, src1_7);
            const ulong off = row1[k] + (i0 % args.ne1x[k][0]) * args.nb1x[k][0];
            v = bin_apply(v, (float) *((device const T1 *) (s + off)));
        }
        *((device float *) (y + i0 * args.nb0)) = v;
    }
}

typedef decltype(kernel_bin<float>) kernel_bin_t;

template [[host_name("kernel_bin_f32")]] kernel kernel_bin_t kernel_bin<float>;
template [[host_name("kernel_bin_f32_f16")]] kernel kernel_bin_t kernel_bin<half>;

// src0 and dst contiguous, every operand one contiguous row of ne00 % 4 == 0 floats: one thread
// per float4 of dst, the row index found by a modulo.
kernel void kernel_bin_row_c4_f32(
        constant mb_kargs_bin & args [[buffer(0)]],
        device const float4 * src0 [[buffer(1)]],
        device float4 * dst [[buffer(2)]],
        device const char * src1_0 [[buffer(3)]],
        device const char * src1_1 [[buffer(4)]],
        device const char * src1_2 [[buffer(5)]],
        device const char * src1_3 [[buffer(6)]],
        device const char * src1_4 [[buffer(7)]],
        device const char * src1_5 [[buffer(8)]],
        device const char * src1_6 [[buffer(9)]],
        device const char * src1_7 [[buffer(10)]],
        uint tpig [[thread_position_in_grid]]) {
    const uint n4 = (uint) (args.ne0 / 4) * (uint) args.ne1 * (uint) args.ne2 * (uint) args.ne3;
    if (tpig >= n4) {
        return;
    }
    const uint r4 = (uint) (args.ne00 / 4);
    const uint j = tpig % r4;
    float4 v = src0[tpig];
    for (int k = 0; k < FC_bin_n; ++k) {
        device const float4 * s =
            (device const float4 *) bin_operand(k, src1_0, src1_1, src1_2, src1_3, src1_4, src1_5, src1_6, src1_7);
        v = bin_apply4(v, s[j]);
    }
    dst[tpig] = v;
}
