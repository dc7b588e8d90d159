// Activation helpers shared by the unary and GLU kernels (MSL has no erf).
#pragma once

// Included after <metal_stdlib> by the .metal file.
using namespace metal;

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
static inline T gelu_of(T x) {
    // Fast tanh overflows to NaN for large arguments; the precise one saturates.
    return 0.5f * x * (1.0f + precise::tanh(0.7978845608f * x * (1.0f + 0.044715f * x * x)));
}

template <typename T>
static inline T gelu_erf_of(T x) {
    // Through erfc on both sides of zero, so 1 + erf(x) never cancels for negative x.
    const T c = erfc_pos(abs(x) * M_SQRT1_2_F);
    return select(0.5f * x * c, x * (1.0f - 0.5f * c), x >= 0.0f);
}
