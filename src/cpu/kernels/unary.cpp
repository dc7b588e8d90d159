// SCALE, CLAMP, FILL, LEAKY_RELU, XIELU and the unary activations (the Unary rows of shaders/op_table.h): f32 in,
// f32 out (or f16 in and out, computed in f32), any strides. Packed f32 data is mapped eight lanes at a time
// with AVX2 where the host has it; the transcendental ones go through vec.h's polynomial exp (tanh, sigmoid
// and both GELUs are rational functions of one exp).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/errors.h"
#include "core/fp16.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"

// GCC 12's avx512fintrin.h (PR 105593, fixed in GCC 13) fills undefined lanes from a self-initialised
// variable, which the uninitialized-use warnings report once inlined into the 16-lane bodies below.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace mb {

namespace {

// Each functor maps one float (s) and, where kVec, eight at a time (v).
struct FScale {
    float m, b;
    static constexpr bool kVec = true;
    float s(float x) const { return x * m + b; }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return _mm256_fmadd_ps(x, _mm256_set1_ps(m), _mm256_set1_ps(b)); }
#endif
};

struct FFill {
    float c;
    static constexpr bool kVec = true;
    float s(float) const { return c; }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256) const { return _mm256_set1_ps(c); }
#endif
};

struct FClamp {
    float lo, hi;
    static constexpr bool kVec = true;
    float s(float x) const { return x < lo ? lo : (x > hi ? hi : x); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const {
        // max/min return their second operand when one is NaN: x goes second so NaN stays NaN, as
        // in the scalar form.
        return _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), x));
    }
#endif
};

struct FSqr {
    static constexpr bool kVec = true;
    float s(float x) const { return x * x; }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return _mm256_mul_ps(x, x); }
#endif
};

struct FSqrt {
    static constexpr bool kVec = true;
    float s(float x) const { return std::sqrt(x); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return _mm256_sqrt_ps(x); }
#endif
};

struct FLog {
    static constexpr bool kVec = false;
    float s(float x) const { return std::log(x); }
};

struct FSin {
    static constexpr bool kVec = false;
    float s(float x) const { return std::sin(x); }
};

struct FCos {
    static constexpr bool kVec = false;
    float s(float x) const { return std::cos(x); }
};

struct FGelu {
    static constexpr bool kVec = true;
    float s(float x) const { return vec::gelu(x); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return vec::gelu8(x); }
#endif
};

struct FGeluErf {
    static constexpr bool kVec = true;
    float s(float x) const { return vec::gelu_erf(x); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return vec::gelu_erf8(x); }
    static constexpr bool kVec16 = true;
    MB_TARGET_AVX512 __m512 v16(__m512 x) const { return vec::gelu_erf16(x); }
#endif
};

struct FXSigmoid {
    float k;
    static constexpr bool kVec = true;
    float s(float x) const { return vec::x_sigmoid(x, k); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return vec::x_sigmoid8(x, k); }
#endif
};

struct FRelu {
    static constexpr bool kVec = true;
    float s(float x) const { return x > 0.0f ? x : 0.0f; }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const {
        return _mm256_and_ps(x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
    }
#endif
};

struct FTanh {
    static constexpr bool kVec = true;
    float s(float x) const { return vec::tanh(x); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return vec::tanh8(x); }
#endif
};

struct FSigmoid {
    static constexpr bool kVec = true;
    float s(float x) const { return 1.0f / (1.0f + vec::exp(-x)); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const {
        const __m256 one = _mm256_set1_ps(1.0f);
        return _mm256_div_ps(one, _mm256_add_ps(one, vec::exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    }
#endif
};

struct FNeg {
    static constexpr bool kVec = true;
    float s(float x) const { return -x; }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f)); }
#endif
};

struct FAbs {
    static constexpr bool kVec = true;
    float s(float x) const { return std::fabs(x); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return vec::abs8(x); }
#endif
};

struct FExp {
    static constexpr bool kVec = true;
    float s(float x) const { return vec::exp(x); }
#if defined(MB_VEC_AVX2)
    MB_AVX2 __m256 v(__m256 x) const { return vec::exp8(x); }
#endif
};

// Scalar forms of the rest of ggml's unary set (no vector bodies: rarely on a hot path).
struct FScalar {
    float (*f)(float, float);
    float p;
    static constexpr bool kVec = false;
    float s(float x) const { return f(x, p); }
};

float sgn(float x, float) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); }
float step(float x, float) { return x > 0.0f ? 1.0f : 0.0f; }
float elu(float x, float) { return x > 0.0f ? x : std::expm1(x); }
float hardsigmoid(float x, float) { return std::fmin(1.0f, std::fmax(0.0f, (x + 3.0f) / 6.0f)); }
float hardswish(float x, float) { return x * hardsigmoid(x, 0.0f); }
float softplus(float x, float) { return x > 20.0f ? x : std::log1p(std::exp(x)); }
float floor_(float x, float) { return std::floor(x); }
float ceil_(float x, float) { return std::ceil(x); }
float round_(float x, float) { return std::round(x); }
float trunc_(float x, float) { return std::trunc(x); }
float leaky_relu(float x, float slope) { return x > 0.0f ? x : x * slope; }
float expm1_(float x, float) { return std::expm1(x); }

// XIELU's four parameters (params f[0..3] as the builder stored them).
struct FXielu {
    float alpha_n, alpha_p, beta, eps;
    static constexpr bool kVec = false;
    float s(float x) const {
        if (x > 0.0f) return alpha_p * x * x + beta * x;
        return (std::expm1(std::fmin(x, eps)) - x) * alpha_n + beta * x;
    }
};

template <class F>
void map_portable(const F& f, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = f.s(x[i]);
}

#if defined(MB_VEC_AVX2)
template <class F>
MB_AVX2 void map_avx2(const F& f, const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = f.v(_mm256_loadu_ps(x + i));
        const __m256 b = f.v(_mm256_loadu_ps(x + i + 8));
        _mm256_storeu_ps(y + i, a);
        _mm256_storeu_ps(y + i + 8, b);
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f.v(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i m = vec::tail_mask8(n - i);
        _mm256_maskstore_ps(y + i, m, f.v(_mm256_maskload_ps(x + i, m)));
    }
}

// Functors with a 16-lane body (v16, flagged by kVec16) as well take it where the CPU has AVX-512:
// the same operations in wider registers, so the same bits as v.
template <class F, class = void>
struct HasV16 : std::false_type {};
template <class F>
struct HasV16<F, std::void_t<decltype(F::kVec16)>> : std::bool_constant<F::kVec16> {};

template <class F>
MB_TARGET_AVX512 void map_avx512(const F& f, const float* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = f.v16(_mm512_loadu_ps(x + i));
        const __m512 b = f.v16(_mm512_loadu_ps(x + i + 16));
        _mm512_storeu_ps(y + i, a);
        _mm512_storeu_ps(y + i + 16, b);
    }
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f.v16(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(y + i, m, f.v16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
#endif

template <class F>
void map(const F& f, const float* x, float* y, int64_t n) {
    if constexpr (F::kVec) {
#if defined(MB_VEC_AVX2)
        if constexpr (HasV16<F>::value) {
            if (cpu_has_avx512f()) {
                map_avx512(f, x, y, n);
                return;
            }
        }
        if (vec::use_avx2()) {
            map_avx2(f, x, y, n);
            return;
        }
#endif
    }
    map_portable(f, x, y, n);
}

// f16 in and out (ggml's f16 unary ops): each row widened to f32, mapped, and rounded back.
template <class F>
void run_f16(const F& f, const ComputeParams& p, Tensor& dst) {
    const Tensor& a = *dst.src[0];
    const int64_t n = dst.ne[0];
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    std::vector<float> buf(static_cast<size_t>(n));
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        const uint8_t* arow = vec::row_ptr(a, ix);
        uint8_t* orow = vec::row_ptr(dst, ix);
        for (int64_t i = 0; i < n; ++i) {
            buf[size_t(i)] = fp16_to_fp32(*reinterpret_cast<const uint16_t*>(arow + i * a.nb[0]));
        }
        map(f, buf.data(), buf.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            *reinterpret_cast<uint16_t*>(orow + i * dst.nb[0]) = fp32_to_fp16(buf[size_t(i)]);
        }
    }
}

template <class F>
void run(const F& f, const ComputeParams& p, Tensor& dst) {
    const Tensor& a = *dst.src[0];
    if (dst.type == Type::F16) return run_f16(f, p, dst);
    if (a.is_contiguous() && dst.is_contiguous()) {
        // One flat array: cut evenly, so a single long row still uses every thread.
        int64_t e0, e1;
        split_range(dst.nelements(), p.ith, p.nth, &e0, &e1);
        if (e1 > e0) {
            map(f, reinterpret_cast<const float*>(host_data(a)) + e0, reinterpret_cast<float*>(host_data(dst)) + e0,
                e1 - e0);
        }
        return;
    }
    const int64_t n = dst.ne[0];
    int64_t r0, r1;
    split_range(dst.nrows(), p.ith, p.nth, &r0, &r1);
    std::vector<float> in, out;
    for (int64_t r = r0; r < r1; ++r) {
        const vec::RowIndex ix = vec::row_index(dst, r);
        const uint8_t* arow = vec::row_ptr(a, ix);
        uint8_t* orow = vec::row_ptr(dst, ix);
        const float* xp = reinterpret_cast<const float*>(arow);
        if (a.nb[0] != sizeof(float)) {
            in.resize(size_t(n));
            vec::gather_f32(arow, a.nb[0], n, in.data());
            xp = in.data();
        }
        if (dst.nb[0] == sizeof(float)) {
            map(f, xp, reinterpret_cast<float*>(orow), n);
        } else {
            out.resize(size_t(n));
            map(f, xp, out.data(), n);
            vec::scatter_f32(out.data(), n, orow, dst.nb[0]);
        }
    }
}

}  // namespace

bool unary_supported(const Tensor& dst) {
    if (op_family(dst.op) != OpFamily::Unary) return false;
    const Tensor* a = dst.src[0];
    return a != nullptr && (a->type == Type::F32 || a->type == Type::F16) && dst.type == a->type &&
           vec::same_shape(*a, dst);
}

void compute_unary(const ComputeParams& p, Tensor& dst) {
    if (dst.is_empty()) return;
    switch (dst.op) {
        case Op::SCALE: return run(FScale{dst.param_f(0), dst.param_f(1)}, p, dst);
        case Op::CLAMP: return run(FClamp{dst.param_f(0), dst.param_f(1)}, p, dst);
        case Op::FILL: return run(FFill{dst.param_f(0)}, p, dst);
        case Op::SQR: return run(FSqr{}, p, dst);
        case Op::SQRT: return run(FSqrt{}, p, dst);
        case Op::LOG: return run(FLog{}, p, dst);
        case Op::SIN: return run(FSin{}, p, dst);
        case Op::COS: return run(FCos{}, p, dst);
        case Op::GELU: return run(FGelu{}, p, dst);
        case Op::GELU_ERF: return run(FGeluErf{}, p, dst);
        case Op::GELU_QUICK: return run(FXSigmoid{vec::kGeluQuick}, p, dst);
        case Op::SILU: return run(FXSigmoid{1.0f}, p, dst);
        case Op::RELU: return run(FRelu{}, p, dst);
        case Op::TANH: return run(FTanh{}, p, dst);
        case Op::SIGMOID: return run(FSigmoid{}, p, dst);
        case Op::NEG: return run(FNeg{}, p, dst);
        case Op::ABS: return run(FAbs{}, p, dst);
        case Op::EXP: return run(FExp{}, p, dst);
        case Op::SGN: return run(FScalar{sgn, 0.0f}, p, dst);
        case Op::STEP: return run(FScalar{step, 0.0f}, p, dst);
        case Op::ELU: return run(FScalar{elu, 0.0f}, p, dst);
        case Op::HARDSWISH: return run(FScalar{hardswish, 0.0f}, p, dst);
        case Op::HARDSIGMOID: return run(FScalar{hardsigmoid, 0.0f}, p, dst);
        case Op::SOFTPLUS: return run(FScalar{softplus, 0.0f}, p, dst);
        case Op::FLOOR: return run(FScalar{floor_, 0.0f}, p, dst);
        case Op::CEIL: return run(FScalar{ceil_, 0.0f}, p, dst);
        case Op::ROUND: return run(FScalar{round_, 0.0f}, p, dst);
        case Op::TRUNC: return run(FScalar{trunc_, 0.0f}, p, dst);
        case Op::LEAKY_RELU: return run(FScalar{leaky_relu, dst.param_f(0)}, p, dst);
        case Op::EXPM1: return run(FScalar{expm1_, 0.0f}, p, dst);
        case Op::XIELU: return run(FXielu{dst.param_f(0), dst.param_f(1), dst.param_f(2), dst.param_f(3)}, p, dst);
        default: break;
    }
    fail<InvalidArgumentError>("compute_unary", "not a unary op: ", op_name(dst.op));
}

}  // namespace mb
