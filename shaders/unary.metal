// SCALE CLAMP and the unary activations over f32: one thread per element, or per float4 when the
// element count is a multiple of 4; views with other strides one threadgroup per row. The op is
// the function constant FC_unary_op.
#include <metal_stdlib>
#include "kargs.h"

using namespace metal;

constant int FC_unary_op [[function_constant(200)]];

// erfc(z) for z >= 0 as t*exp(-z^2 + P(t)), t = 1/(1 + z/2): the Chebyshev fit from Numerical
// Recipes (relative error below 1.2e-7). MSL has no erf.
template <typename T>
static inline T erfc_pos(T z) {
    const T t = 1.0f / (1.0f + 0.5f * z);
    T p = 0.17087277f * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    return t * precise::exp(p - z * z);
}

// NaN tests on the bits: Apple's compiler builds with fast math, under which isnan() and x != x
// may fold to false.
static inline bool nan_bits(float x) {
    return (as_type<uint>(x) & 0x7fffffffu) > 0x7f800000u;
}

static inline bool4 nan_bits(float4 x) {
    return (as_type<uint4>(x) & 0x7fffffffu) > 0x7f800000u;
}

template <typename T>
static inline T sigmoid_of(T x) {
    return 1.0f / (1.0f + exp(-x));
}

template <typename T>
static inline T unary_apply(T x, float p0, float p1) {
    switch (FC_unary_op) {
        case MB_UNARY_SCALE:
            return x * p0 + p1;
        case MB_UNARY_CLAMP:
            // NaN stays NaN (min/max would replace it by a bound).
            return select(select(select(x, T(p1), x > p1), T(p0), x < p0), x, nan_bits(x));
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
            // Fast tanh overflows to NaN for large arguments; the precise one saturates.
            return 0.5f * x * (1.0f + precise::tanh(0.7978845608f * x * (1.0f + 0.044715f * x * x)));
        case MB_UNARY_GELU_ERF: {
            // Through erfc on both sides of zero, so 1 + erf(x) never cancels for negative x.
            const T c = erfc_pos(abs(x) * M_SQRT1_2_F);
            return select(0.5f * x * c, x * (1.0f - 0.5f * c), x >= 0.0f);
        }
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
        default:
            return exp(x);
    }
}

template <typename T>
kernel void kernel_unary(
        constant mb_kargs_unary & args [[buffer(0)]],
        device const T * src0 [[buffer(1)]],
        device T * dst [[buffer(2)]],
        uint tpig [[thread_position_in_grid]]) {
    if (tpig >= args.n) {
        return;
    }
    dst[tpig] = unary_apply(src0[tpig], args.p0, args.p1);
}

typedef decltype(kernel_unary<float>) kernel_unary_t;
typedef decltype(kernel_unary<float4>) kernel_unary_4_t;

template [[host_name("kernel_unary_f32")]] kernel kernel_unary_t kernel_unary<float>;
template [[host_name("kernel_unary_f32_4")]] kernel kernel_unary_4_t kernel_unary<float4>;

// Any strides (transposed or permuted views): one threadgroup per row (i1, i2, i3).
kernel void kernel_unary_f32_rows(
        constant mb_kargs_unary & args [[buffer(0)]],
        device const char * src0 [[buffer(1)]],
        device char * dst [[buffer(2)]],
        uint3 tgpig [[threadgroup_position_in_grid]],
        ushort tpitg [[thread_position_in_threadgroup]],
        ushort ntg [[threads_per_threadgroup]]) {
    device const char * x = src0 + tgpig.x * args.nb01 + tgpig.y * args.nb02 + tgpig.z * args.nb03;
    device char * y = dst + tgpig.x * args.nb1 + tgpig.y * args.nb2 + tgpig.z * args.nb3;
    for (int i0 = tpitg; i0 < args.ne00; i0 += ntg) {
        const float v = *((device const float *) (x + i0 * args.nb00));
        *((device float *) (y + i0 * args.nb0)) = unary_apply(v, args.p0, args.p1);
    }
}
