// SCALE CLAMP FILL LEAKY_RELU XIELU and the unary activations over f32, and f16 computed in f32 (the Unary
// rows of op_table.h): one thread per element, or per float4 when the element count is a multiple of 4; views with other
// strides one threadgroup per row. The op is the function constant FC_unary_op.
#include <metal_stdlib>
#include "kargs.h"
#include "activations.h"

using namespace metal;

constant int FC_unary_op [[function_constant(200)]];

template <typename T>
static inline T unary_apply(T x, float p0, float p1, float p2, float p3) {
    switch (FC_unary_op) {
        case MB_UNARY_SCALE:
            return x * p0 + p1;
        case MB_UNARY_CLAMP:
            // NaN stays NaN (min/max would replace it by a bound).
            return select(select(select(x, T(p1), x > p1), T(p0), x < p0), x, nan_bits(x));
        case MB_UNARY_FILL:
            return T(p0);
        case MB_UNARY_SQR:
            return x * x;
        case MB_UNARY_SQRT:
            return sqrt(x);
        case MB_UNARY_LOG:
            return log(x);
        case MB_UNARY_SIN:
            return precise::sin(x);
        case MB_UNARY_COS:
            return precise::cos(x);
        case MB_UNARY_GELU:
            return gelu_of(x);
        case MB_UNARY_GELU_ERF:
            return gelu_erf_of(x);
        case MB_UNARY_GELU_QUICK:
            return x * sigmoid_of(1.702f * x);
        case MB_UNARY_SILU:
            return x * sigmoid_of(x);
        case MB_UNARY_RELU:
            return select(T(0.0f), x, x > 0.0f);
        case MB_UNARY_TANH:
            return precise::tanh(x);
        case MB_UNARY_SIGMOID:
            return sigmoid_of(x);
        case MB_UNARY_NEG:
            return -x;
        case MB_UNARY_ABS:
            return abs(x);
        case MB_UNARY_EXP:
            return exp(x);
        case MB_UNARY_SGN:
            return select(select(T(0.0f), T(-1.0f), x < 0.0f), T(1.0f), x > 0.0f);
        case MB_UNARY_STEP:
            return select(T(0.0f), T(1.0f), x > 0.0f);
        case MB_UNARY_ELU:
            return select(precise::exp(x) - 1.0f, x, x > 0.0f);
        case MB_UNARY_HARDSWISH:
            return x * min(T(1.0f), max(T(0.0f), (x + 3.0f) / 6.0f));
        case MB_UNARY_HARDSIGMOID:
            return min(T(1.0f), max(T(0.0f), (x + 3.0f) / 6.0f));
        case MB_UNARY_SOFTPLUS:
            return select(precise::log(1.0f + precise::exp(x)), x, x > 20.0f);
        case MB_UNARY_FLOOR:
            return floor(x);
        case MB_UNARY_CEIL:
            return ceil(x);
        case MB_UNARY_ROUND:
            return round(x);
        case MB_UNARY_TRUNC:
            return trunc(x);
        case MB_UNARY_LEAKY_RELU:
            return select(x * p0, x, x > 0.0f);
        case MB_UNARY_EXPM1:
            return precise::exp(x) - 1.0f;
        case MB_UNARY_XIELU:
            // p0 = alpha_n, p1 = alpha_p, p2 = beta, p3 = eps
            return select((precise::exp(min(x, T(p3))) - 1.0f - x) * p0 + p2 * x, (p1 * x + p2) * x, x > 0.0f);
        default:
            return x;
    }
}

// S: the stored element (float, half, or their 4-vectors), T: the f32 type it is computed in.
template <typename S, typename T>
kernel void kernel_unary(
        constant mb_kargs_unary & args [[buffer(0)]],
        device const S * src0 [[buffer(1)]],
        device S * dst [[buffer(2)]],
        uint tpig [[thread_position_in_grid]]) {
    if (tpig >= args.n) {
        return;
    }
    dst[tpig] = S(unary_apply(T(src0[tpig]), args.p0, args.p1, args.p2, args.p3));
}

typedef decltype(kernel_unary<float, float>) kernel_unary_t;
typedef decltype(kernel_unary<float4, float4>) kernel_unary_4_t;
typedef decltype(kernel_unary<half, float>) kernel_unary_h_t;
typedef decltype(kernel_unary<half4, float4>) kernel_unary_h4_t;

template [[host_name("kernel_unary_f32")]] kernel kernel_unary_t kernel_unary<float, float>;
template [[host_name("kernel_unary_f32_4")]] kernel kernel_unary_4_t kernel_unary<float4, float4>;
template [[host_name("kernel_unary_f16")]] kernel kernel_unary_h_t kernel_unary<half, float>;
template [[host_name("kernel_unary_f16_4")]] kernel kernel_unary_h4_t kernel_unary<half4, float4>;

// Any strides (transposed or permuted views): one threadgroup per row (i1, i2, i3).
template <typename S>
kernel void kernel_unary_rows(
        constant mb_kargs_unary & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    device const char * x = src0 + tgpig.x * args.nb01 + tgpig.y * args.nb02 + tgpig.z * args.nb03;
    device char * y = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    for (int i0 = tpitg; i0 < args.ne00; i0 += ntg) {
        const float v = float(*((device const S *) (x + i0 * args.nb00)));
        *((device S *) (y + i0 * args.nb0)) = S(unary_apply(v, args.p0, args.p1, args.p2, args.p3));
    }
}

typedef decltype(kernel_unary_rows<float>) kernel_unary_rows_t;

template [[host_name("kernel_unary_f32_rows")]] kernel kernel_unary_rows_t kernel_unary_rows<float>;
template [[host_name("kernel_unary_f16_rows")]] kernel kernel_unary_rows_t kernel_unary_rows<half>;
