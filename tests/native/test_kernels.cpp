// Standalone checks of the CPU kernel families (all but MUL_MAT) against naive double-precision
// references written here, on odd shapes, broadcasting, strided views and 1..3 threads, with sentinel
// bytes after every output. Build and run from the repository root, with the SIMD paths and without
// (add -DMB_NO_SIMD for the portable ones):
//   g++ -O2 -std=c++17 -Isrc tests/native/test_kernels.cpp src/cpu/kernels/{binary,unary,norm,soft_max,reduce}.cpp
//       src/cpu/kernels/{flash_attn_ext,copy,rows,im2col,layout,rope}.cpp src/core/{types,tensor,op}.cpp
//       src/cpu/thread_pool.cpp -lpthread -o /tmp/test_kernels && /tmp/test_kernels
#include "check.h"
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/fp16.h"
#include "core/tensor.h"
#include "core/types.h"
#include "cpu/kernels/kernels.h"
#include "cpu/kernels/vec.h"
#include "cpu/thread_pool.h"

#include "core/buffer.h"

namespace mb {
// The backend defines this next to its op table; the harness links the pool directly.
void ComputeParams::barrier() const {
    if (pool) pool->barrier();
}
// Tensors here point at their memory directly and never reach a Buffer (tensor.cpp names this).
void* Buffer::host_ptr(const char* who) const {
    fail<InvalidArgumentError>(who, "no buffers in the kernel harness");
}
}  // namespace mb

namespace {

using namespace mb;



constexpr size_t kTail = 64;
constexpr uint8_t kSentinel = 0xA5;

std::mt19937 g_rng(1234);

// A tensor with its own memory (plus sentinel tail); views share a parent's memory.
struct T {
    Tensor t;
    std::shared_ptr<std::vector<uint8_t>> mem;
};

T make(Type type, std::vector<int64_t> ne) {
    T x;
    x.t.type = type;
    for (int i = 0; i < 4; ++i) x.t.ne[i] = i < int(ne.size()) ? ne[i] : 1;
    x.t.n_dims = int(ne.size());
    contiguous_strides(type, x.t.ne, x.t.nb);
    const size_t bytes = x.t.nbytes();
    x.mem = std::make_shared<std::vector<uint8_t>>(bytes + kTail, kSentinel);
    x.t.data = x.mem->data();
    return x;
}

// ggml permute: source dim i goes to position ax[i].
T permuted(const T& a, int a0, int a1, int a2, int a3) {
    T v = a;
    const int ax[4] = {a0, a1, a2, a3};
    for (int i = 0; i < 4; ++i) {
        v.t.ne[ax[i]] = a.t.ne[i];
        v.t.nb[ax[i]] = a.t.nb[i];
    }
    v.t.n_dims = 4;
    return v;
}

bool tail_ok(const T& x) {
    const size_t bytes = x.t.nbytes();
    for (size_t i = bytes; i < x.mem->size(); ++i) {
        if ((*x.mem)[i] != kSentinel) return false;
    }
    return true;
}

// Fills a root tensor with values ~ U(lo, hi), stored in its type.
void fill(T& x, float lo = -2.0f, float hi = 2.0f) {
    std::uniform_real_distribution<float> u(lo, hi);
    const int64_t n0 = x.t.ne[0];
    std::vector<float> row(size_t(std::max<int64_t>(n0, 1)));
    for (int64_t r = 0; r < x.t.nrows(); ++r) {
        for (auto& v : row) v = u(g_rng);
        if (n0 > 0) quantize_row(x.t.type, row.data(), vec::row_ptr(x.t, vec::row_index(x.t, r)), n0);
    }
}

// Element (i0..i3) of any tensor as double (quantized: its block dequantized).
double get(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    const auto& tr = type_traits(t.type);
    if (tr.is_quantized) {
        float blk[32];
        dequantize_row(t.type, at(t, i0 / tr.block_size, i1, i2, i3), blk, tr.block_size);
        return blk[i0 % tr.block_size];
    }
    float v;
    dequantize_row(t.type, at(t, i0, i1, i2, i3), &v, 1);
    return v;
}

using Kernel = void (*)(const ComputeParams&, Tensor&);

void run(Kernel k, Tensor& dst, int nth, size_t wsize = 0) {
    ThreadPool pool(nth);
    std::vector<uint8_t> work(wsize + 64);
    pool.run(nth, [&](int ith) {
        ComputeParams p;
        p.ith = ith;
        p.nth = nth;
        p.wdata = wsize ? work.data() : nullptr;
        p.wsize = wsize;
        p.pool = &pool;
        k(p, dst);
    });
}

// Normalised mean squared error of dst against ref (indexed like dst's elements in row-major order).
double nmse(const Tensor& dst, const std::vector<double>& ref) {
    double num = 0, den = 0;
    size_t k = 0;
    for (int64_t i3 = 0; i3 < dst.ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < dst.ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < dst.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < dst.ne[0]; ++i0, ++k) {
                    const double d = get(dst, i0, i1, i2, i3) - ref[k];
                    num += d * d;
                    den += ref[k] * ref[k];
                }
    if (k != ref.size()) return 1e30;
    return den > 0 ? num / den : num;
}

template <class F>
std::vector<double> ref_of(const int64_t ne[4], F f) {
    std::vector<double> out;
    for (int64_t i3 = 0; i3 < ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < ne[0]; ++i0) out.push_back(f(i0, i1, i2, i3));
    return out;
}

void expect(const char* what, const T& out, const std::vector<double>& ref, double tol) {
    const double e = nmse(out.t, ref);
    CHECK(e <= tol, "%s: nmse %.3g > %.3g", what, e, tol);
    CHECK(tail_ok(out), "%s: bytes after the output were overwritten", what);
}

T node(Op op, Type type, std::vector<int64_t> ne, std::initializer_list<const T*> srcs) {
    T d = make(type, ne);
    d.t.op = op;
    int i = 0;
    for (const T* s : srcs) d.t.src[i++] = s ? const_cast<Tensor*>(&s->t) : nullptr;
    return d;
}

// ---------------------------------------------------------------------------------------------------

void test_exp_accuracy() {
    double worst = 0;
    for (float x = -103.0f; x < 88.7f; x += 0.01373f) {
        const double ref = std::exp(double(x));
        if (ref < 1.2e-38) continue;  // subnormal results: checked absolutely below
        worst = std::max(worst, std::fabs(vec::exp(x) - ref) / ref);
    }
    CHECK(worst < 3e-7, "scalar exp relative error %.3g", worst);
    CHECK(vec::exp(-1000.0f) == 0.0f, "exp(-1000)");
    CHECK(std::isinf(vec::exp(89.0f)) && std::isinf(vec::exp(1e30f)), "exp overflow");
    CHECK(std::isnan(vec::exp(std::nanf(""))), "exp(NaN)");
    CHECK(std::fabs(vec::exp(-95.0f) - std::exp(-95.0)) < 1e-44, "exp subnormal");
#if defined(MB_VEC_AVX2)
    if (vec::use_avx2()) {
        alignas(32) float in[8] = {-1000.f, -95.f, -3.3f, 0.f, 1e-3f, 88.7f, 89.f, std::nanf("")};
        alignas(32) float out[8];
        auto f = [&]() __attribute__((target("avx2,fma,f16c"))) {
            _mm256_store_ps(out, vec::exp8(_mm256_load_ps(in)));
        };
        f();
        for (int i = 0; i < 7; ++i) {
            const double ref = std::exp(double(in[i]));
            CHECK(std::fabs(out[i] - ref) <= 3e-7 * ref + 1e-44 || (std::isinf(out[i]) && ref > 3.4e38), "exp8(%g)=%g",
                  in[i], out[i]);
        }
        CHECK(std::isnan(out[7]), "exp8(NaN)");
    }
#endif
}

void test_binary() {
    const std::vector<std::vector<int64_t>> bshapes = {{37, 5, 3, 2}, {37, 1, 3, 1}, {1, 5, 1, 2}, {1, 1, 1, 1}};
    const Op ops[] = {Op::ADD, Op::SUB, Op::MUL, Op::DIV};
    for (Op op : ops) {
        for (const auto& bs : bshapes) {
            for (Type bt : {Type::F32, Type::F16}) {
                for (int nth : {1, 3}) {
                    T a = make(Type::F32, {37, 5, 3, 2});
                    fill(a);
                    T b = make(bt, bs);
                    fill(b, 0.5f, 2.0f);
                    T d = node(op, Type::F32, {37, 5, 3, 2}, {&a, &b});
                    CHECK(binary_supported(d.t), "binary supported");
                    run(compute_binary, d.t, nth);
                    auto ref = ref_of(d.t.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                        const double x = get(a.t, i0, i1, i2, i3);
                        const double y = get(b.t, i0 % b.t.ne[0], i1 % b.t.ne[1], i2 % b.t.ne[2], i3 % b.t.ne[3]);
                        switch (op) {
                            case Op::ADD: return x + y;
                            case Op::SUB: return x - y;
                            case Op::MUL: return x * y;
                            default: return x / y;
                        }
                    });
                    expect(op_name(op), d, ref, 1e-13);
                }
            }
        }
    }
    // Transposed src0 and src1, and a long single row split across threads.
    T a = make(Type::F32, {9, 13});
    fill(a);
    T b = make(Type::F32, {9, 13});
    fill(b);
    T at_ = permuted(a, 1, 0, 2, 3);
    T bt_ = permuted(b, 1, 0, 2, 3);
    T d = node(Op::ADD, Type::F32, {13, 9}, {&at_, &bt_});
    run(compute_binary, d.t, 2);
    expect("add transposed", d,
           ref_of(d.t.ne,
                  [&](int64_t i0, int64_t i1, int64_t, int64_t) { return get(a.t, i1, i0) + get(b.t, i1, i0); }),
           1e-13);
    T l = make(Type::F32, {100003});
    fill(l);
    T s = make(Type::F32, {1});
    fill(s);
    T dl = node(Op::MUL, Type::F32, {100003}, {&l, &s});
    run(compute_binary, dl.t, 3);
    expect("mul long row", dl,
           ref_of(dl.t.ne, [&](int64_t i0, int64_t, int64_t, int64_t) { return get(l.t, i0) * get(s.t, 0); }), 1e-13);
    // Zero-size dims compute nothing and are fine.
    T z = make(Type::F32, {0, 4});
    T zb = make(Type::F32, {1, 4});
    T dz = node(Op::ADD, Type::F32, {0, 4}, {&z, &zb});
    CHECK(binary_supported(dz.t), "zero-size add supported");
    run(compute_binary, dz.t, 2);
    CHECK(tail_ok(dz), "zero-size add wrote");
    // Unsupported: f16 src0.
    T h = make(Type::F16, {8});
    T dh = node(Op::ADD, Type::F16, {8}, {&h, &h});
    CHECK(!binary_supported(dh.t), "f16 add must be refused");
}

double ref_unary(Op op, double x, double p0, double p1) {
    switch (op) {
        case Op::SCALE: return x * p0 + p1;
        case Op::CLAMP: return std::min(std::max(x, p0), p1);
        case Op::SQR: return x * x;
        case Op::SQRT: return std::sqrt(x);
        case Op::LOG: return std::log(x);
        case Op::SIN: return std::sin(x);
        case Op::COS: return std::cos(x);
        case Op::GELU: return 0.5 * x * (1 + std::tanh(0.7978845608 * x * (1 + 0.044715 * x * x)));
        case Op::GELU_ERF: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
        case Op::GELU_QUICK: return x / (1 + std::exp(-1.702 * x));
        case Op::SILU: return x / (1 + std::exp(-x));
        case Op::RELU: return x > 0 ? x : 0;
        case Op::TANH: return std::tanh(x);
        case Op::SIGMOID: return 1 / (1 + std::exp(-x));
        case Op::NEG: return -x;
        case Op::ABS: return std::fabs(x);
        case Op::EXP: return std::exp(x);
        default: return 0;
    }
}

void test_unary() {
    const Op ops[] = {Op::SCALE, Op::CLAMP, Op::SQR,  Op::SQRT, Op::LOG,     Op::SIN, Op::COS, Op::GELU, Op::GELU_ERF,
                      Op::GELU_QUICK, Op::SILU, Op::RELU, Op::TANH, Op::SIGMOID, Op::NEG, Op::ABS, Op::EXP};
    for (Op op : ops) {
        const bool positive = op == Op::SQRT || op == Op::LOG;
        for (int variant = 0; variant < 2; ++variant) {
            T a = make(Type::F32, {1003, 3});
            fill(a, positive ? 0.01f : -9.0f, 9.0f);
            T src = variant ? permuted(a, 1, 0, 2, 3) : a;
            std::vector<int64_t> ne = {src.t.ne[0], src.t.ne[1]};
            T d = node(op, Type::F32, ne, {&src});
            d.t.set_param_f(0, op == Op::CLAMP ? -1.5f : 0.75f);
            d.t.set_param_f(1, op == Op::CLAMP ? 2.5f : -0.25f);
            CHECK(unary_supported(d.t), "unary supported");
            run(compute_unary, d.t, 2);
            auto ref = ref_of(d.t.ne, [&](int64_t i0, int64_t i1, int64_t, int64_t) {
                return ref_unary(op, get(src.t, i0, i1), d.t.param_f(0), d.t.param_f(1));
            });
            expect(op_name(op), d, ref, 1e-12);
            // Elementwise relative accuracy too (NMSE hides small values).
            double worst = 0;
            for (int64_t i1 = 0; i1 < d.t.ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < d.t.ne[0]; ++i0) {
                    const double r = ref[size_t(i1 * d.t.ne[0] + i0)];
                    const double e = std::fabs(get(d.t, i0, i1) - r) / std::max(std::fabs(r), 1e-3);
                    worst = std::max(worst, e);
                }
            CHECK(worst < 2e-6, "%s worst relative error %.3g", op_name(op), worst);
        }
    }
    // Tails shorter than a vector, and tanh near 0 (the Taylor branch).
    T a = make(Type::F32, {5});
    const float xs[5] = {1e-5f, -0.29f, 0.31f, -20.0f, 0.0f};
    std::memcpy(a.t.data, xs, sizeof xs);
    T d = node(Op::TANH, Type::F32, {5}, {&a});
    run(compute_unary, d.t, 1);
    for (int i = 0; i < 5; ++i) {
        const double r = std::tanh(double(xs[i]));
        CHECK(std::fabs(get(d.t, i) - r) <= 2e-7 * std::fabs(r) + 1e-30, "tanh(%g)", xs[i]);
    }
    CHECK(tail_ok(d), "tanh tail");
}

void test_norm() {
    for (Op op : {Op::NORM, Op::RMS_NORM}) {
        for (int variant = 0; variant < 2; ++variant) {
            T a = make(Type::F32, {385, 7, 2});
            fill(a, 3.0f, 5.0f);  // far from zero: a one-pass variance would cancel
            T src = variant ? permuted(a, 0, 2, 1, 3) : a;
            std::vector<int64_t> ne = {src.t.ne[0], src.t.ne[1], src.t.ne[2]};
            T d = node(op, Type::F32, ne, {&src});
            d.t.set_param_f(0, 1e-5f);
            run(compute_norm, d.t, 3);
            std::vector<double> ref;
            for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                    double mean = 0, sq = 0;
                    for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                        mean += get(src.t, i0, i1, i2);
                        sq += get(src.t, i0, i1, i2) * get(src.t, i0, i1, i2);
                    }
                    mean /= double(ne[0]);
                    double var = 0;
                    for (int64_t i0 = 0; i0 < ne[0]; ++i0) var += std::pow(get(src.t, i0, i1, i2) - mean, 2);
                    var /= double(ne[0]);
                    for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                        const double x = get(src.t, i0, i1, i2);
                        ref.push_back(op == Op::NORM ? (x - mean) / std::sqrt(var + 1e-5)
                                                     : x / std::sqrt(sq / double(ne[0]) + 1e-5));
                    }
                }
            expect(op_name(op), d, ref, 1e-11);
        }
    }
}

void test_soft_max() {
    for (int variant = 0; variant < 4; ++variant) {
        const int64_t ne[4] = {37, 11, 4, 2};
        T a = make(Type::F32, {37, 11, 4, 2});
        fill(a, -5.0f, 5.0f);
        T mask = make(variant == 1 ? Type::F32 : Type::F16, {37, 13, 2, 1});
        fill(mask, -3.0f, 1.0f);
        // Some masked-out entries.
        for (int64_t i = 0; i < 37 * 13 * 2; i += 5) {
            const float ninf = -std::numeric_limits<float>::infinity();
            quantize_row(mask.t.type, &ninf, static_cast<uint8_t*>(mask.t.data) + size_t(i) * mask.t.nb[0], 1);
        }
        T sinks = make(Type::F32, {4});
        fill(sinks);
        const bool use_mask = variant != 3;
        const bool use_sinks = variant >= 2;
        const float scale = 0.7f, max_bias = variant == 2 ? 8.0f : 0.0f;
        T d = node(Op::SOFT_MAX, Type::F32, {37, 11, 4, 2},
                   {&a, use_mask ? &mask : nullptr, use_sinks ? &sinks : nullptr});
        d.t.set_param_f(0, scale);
        d.t.set_param_f(1, max_bias);
        CHECK(soft_max_supported(d.t), "soft_max supported");
        run(compute_soft_max, d.t, 2);
        std::vector<double> ref;
        for (int64_t i3 = 0; i3 < ne[3]; ++i3)
            for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                    double slope = 1;
                    if (max_bias > 0) {
                        const int nhl = 4;
                        const double m0 = std::pow(2.0, -max_bias / nhl);
                        slope = std::pow(m0, double(i2 + 1));
                    }
                    std::vector<double> w(static_cast<size_t>(ne[0]));
                    double mx = -INFINITY;
                    for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                        w[size_t(i0)] = get(a.t, i0, i1, i2, i3) * scale +
                                        (use_mask ? slope * get(mask.t, i0, i1, i2 % 2, 0) : 0.0);
                        mx = std::max(mx, w[size_t(i0)]);
                    }
                    const double sk = use_sinks ? get(sinks.t, i2) : -INFINITY;
                    mx = std::max(mx, sk);
                    double sum = std::exp(sk - mx);
                    for (auto& v : w) sum += (v = std::exp(v - mx));
                    for (auto v : w) ref.push_back(v / sum);
                }
        expect("soft_max", d, ref, 1e-12);
    }
}

void test_reduce() {
    T a = make(Type::F32, {301, 7, 3});
    fill(a);
    for (Op op : {Op::SUM_ROWS, Op::MEAN}) {
        T d = node(op, Type::F32, {1, 7, 3}, {&a});
        CHECK(reduce_supported(d.t), "reduce supported");
        run(compute_reduce, d.t, 2);
        auto ref = ref_of(d.t.ne, [&](int64_t, int64_t i1, int64_t i2, int64_t) {
            double s = 0;
            for (int64_t i0 = 0; i0 < 301; ++i0) s += get(a.t, i0, i1, i2);
            return op == Op::MEAN ? s / 301 : s;
        });
        expect(op_name(op), d, ref, 1e-12);
    }
    T b = make(Type::F32, {33, 9});
    fill(b);
    T bt_ = permuted(b, 1, 0, 2, 3);
    T d = node(Op::ARGMAX, Type::I32, {33}, {&bt_});
    CHECK(reduce_supported(d.t), "argmax supported");
    run(compute_reduce, d.t, 2);
    // Rows of the transposed view are the columns of b.
    for (int64_t r = 0; r < 33; ++r) {
        int64_t best = 0;
        for (int64_t i = 1; i < 9; ++i) {
            if (get(b.t, r, i) > get(b.t, r, best)) best = i;
        }
        int32_t got;
        std::memcpy(&got, at(d.t, r), 4);
        CHECK(got == best, "argmax row %lld: %d vs %lld", (long long)r, got, (long long)best);
    }
    CHECK(tail_ok(d), "argmax tail");
}

// Reference of a CPY: the logical-order f32 values of src, converted with quantize_row into dst's type;
// compared byte for byte (both sides use types.h's converters, so they must agree exactly).
void test_copy() {
    const Type all[] = {Type::F32, Type::F16, Type::BF16, Type::I32,
                        Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q8_0};
    int pairs = 0;
    for (Type st : all) {
        for (Type dt : all) {
            for (int variant = 0; variant < 3; ++variant) {
                // variant 0: contiguous same shape; 1: permuted src; 2: different shape (non-quantized only)
                const bool quant = type_traits(st).is_quantized || type_traits(dt).is_quantized;
                if (variant == 2 && quant) continue;
                if (variant == 1 && type_traits(st).is_quantized) continue;
                T s = make(st, {64, 6, 3});
                fill(s, -3.0f, 3.0f);
                T src = s;
                if (variant == 1) src = permuted(s, 1, 0, 2, 3);  // [6, 64, 3]
                std::vector<int64_t> dne = {src.t.ne[0], src.t.ne[1], src.t.ne[2]};
                if (variant == 1 && quant) {
                    // A quantized dst needs rows of whole blocks: view the permuted src as [64, 6, 3].
                    src = permuted(s, 0, 2, 1, 3);  // [64, 3, 6]
                    dne = {64, 3, 6};
                }
                if (variant == 2) dne = {32, 36};
                T dst = make(dt, dne);
                T d = dst;
                d.t.op = Op::CPY;
                d.t.src[0] = &src.t;
                d.t.src[1] = &dst.t;
                const bool ok = copy_supported(d.t);
                const bool want = st == dt || st == Type::F32 ||
                                  ((st == Type::F16 || st == Type::BF16 || st == Type::I32) && dt == Type::F32) ||
                                  (type_traits(st).is_quantized && (dt == Type::F32 || dt == Type::F16));
                CHECK(ok == want, "cpy %s -> %s supported=%d", type_traits(st).name, type_traits(dt).name, ok);
                if (!ok) continue;
                ++pairs;
                run(compute_copy, d.t, 2);
                // Expected bytes.
                std::vector<float> vals;
                for (int64_t i3 = 0; i3 < src.t.ne[3]; ++i3)
                    for (int64_t i2 = 0; i2 < src.t.ne[2]; ++i2)
                        for (int64_t i1 = 0; i1 < src.t.ne[1]; ++i1)
                            for (int64_t i0 = 0; i0 < src.t.ne[0]; ++i0)
                                vals.push_back(float(get(src.t, i0, i1, i2, i3)));
                std::vector<uint8_t> want_bytes(dst.t.nbytes());
                if (st == dt && (variant == 0 || type_traits(st).is_quantized)) {
                    // Same-type copies move the stored bytes untouched (NaN payloads and all).
                    std::memcpy(want_bytes.data(), s.t.data, want_bytes.size());
                } else {
                    quantize_row(dt, vals.data(), want_bytes.data(), int64_t(vals.size()));
                }
                const bool same = std::memcmp(want_bytes.data(), dst.t.data, want_bytes.size()) == 0;
                CHECK(same, "cpy %s -> %s variant %d bytes differ",
                      type_traits(st).name, type_traits(dt).name, variant);
                CHECK(tail_ok(dst), "cpy %s -> %s tail", type_traits(st).name, type_traits(dt).name);
            }
        }
    }
    CHECK(pairs > 40, "copy pairs tested: %d", pairs);
    // CONT of a permuted 4-D f32 view.
    T a = make(Type::F32, {5, 7, 3, 2});
    fill(a);
    T v = permuted(a, 2, 0, 3, 1);  // ne = [7, 2, 5, 3]
    T d = node(Op::CONT, Type::F32, {v.t.ne[0], v.t.ne[1], v.t.ne[2], v.t.ne[3]}, {&v});
    run(compute_copy, d.t, 3);
    expect("cont permuted", d,
           ref_of(d.t.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { return get(v.t, i0, i1, i2, i3); }), 0);
    // A strided destination (a transposed view of the target, as a KV cache store does).
    T src = make(Type::F32, {6, 10});
    fill(src);
    T target = make(Type::F16, {10, 6});
    T tv = permuted(target, 1, 0, 2, 3);  // [6, 10] view, nb0 = 20 bytes
    T c = tv;
    c.t.op = Op::CPY;
    c.t.src[0] = &src.t;
    c.t.src[1] = &tv.t;
    CHECK(copy_supported(c.t), "cpy into transposed f16 view");
    run(compute_copy, c.t, 2);
    double err = 0;
    for (int64_t i = 0; i < 6; ++i)
        for (int64_t j = 0; j < 10; ++j) err = std::max(err, std::fabs(get(target.t, j, i) - get(src.t, i, j)) / 4.0);
    CHECK(err < 1e-3, "cpy into transposed view error %.3g", err);
    CHECK(tail_ok(target), "transposed view tail");
}

void test_rows() {
    for (Type st : {Type::F32, Type::F16, Type::BF16, Type::Q4_0, Type::Q5_1, Type::Q8_0, Type::I32}) {
        T a = make(st, {64, 10, 3});
        fill(a, -5.0f, 5.0f);
        T idx = make(Type::I32, {4, 3});
        const int32_t iv[12] = {9, 0, 3, 3, 1, 2, 8, 7, 5, 5, 5, 0};
        std::memcpy(idx.t.data, iv, sizeof iv);
        T d = node(Op::GET_ROWS, Type::F32, {64, 4, 3}, {&a, &idx});
        CHECK(rows_supported(d.t), "get_rows supported");
        run(compute_rows, d.t, 2);
        expect("get_rows", d, ref_of(d.t.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t) {
                   return get(a.t, i0, iv[i2 * 4 + i1], i2);
               }),
               0);
    }
    // Out-of-range index raises.
    T a = make(Type::F32, {8, 4});
    fill(a);
    T idx = make(Type::I32, {2});
    const int32_t bad[2] = {1, 4};
    std::memcpy(idx.t.data, bad, sizeof bad);
    T d = node(Op::GET_ROWS, Type::F32, {8, 2}, {&a, &idx});
    bool threw = false;
    try {
        run(compute_rows, d.t, 2);
    } catch (const OutOfRangeError& e) {
        threw = std::strstr(e.what(), "GET_ROWS") != nullptr;
    }
    CHECK(threw, "get_rows out of range must throw OutOfRangeError");
    // SET_ROWS into f16 and q8_0.
    for (Type dt : {Type::F32, Type::F16, Type::Q8_0}) {
        T target = make(dt, {64, 9, 2});
        fill(target);
        T before = make(dt, {64, 9, 2});
        std::memcpy(before.t.data, target.t.data, target.t.nbytes());
        T src = make(Type::F32, {64, 3, 2});
        fill(src);
        T ix = make(Type::I32, {3, 2});
        const int32_t rv[6] = {8, 0, 4, 1, 2, 3};
        std::memcpy(ix.t.data, rv, sizeof rv);
        T n = target;
        n.t.op = Op::SET_ROWS;
        n.t.src[0] = &src.t;
        n.t.src[1] = &ix.t;
        n.t.src[2] = &target.t;
        CHECK(rows_supported(n.t), "set_rows supported");
        run(compute_rows, n.t, 2);
        std::vector<float> row(64);
        std::vector<uint8_t> conv(row_size(dt, 64));
        bool ok = true;
        for (int64_t i2 = 0; i2 < 2; ++i2)
            for (int64_t r = 0; r < 9; ++r) {
                int written = -1;
                for (int i = 0; i < 3; ++i) {
                    if (rv[i2 * 3 + i] == r) written = i;
                }
                const uint8_t* got = at(target.t, 0, r, i2);
                if (written < 0) {
                    ok &= std::memcmp(got, at(before.t, 0, r, i2), conv.size()) == 0;
                } else {
                    for (int64_t i0 = 0; i0 < 64; ++i0) row[size_t(i0)] = float(get(src.t, i0, written, i2));
                    quantize_row(dt, row.data(), conv.data(), 64);
                    ok &= std::memcmp(got, conv.data(), conv.size()) == 0;
                }
            }
        CHECK(ok, "set_rows into %s", type_traits(dt).name);
        CHECK(tail_ok(target), "set_rows tail");
    }
}

void test_im2col() {
    struct Case {
        bool is_2d;
        int s0, s1, p0, p1, d0, d1;
        Type dt;
    };
    const Case cases[] = {{false, 1, 0, 1, 0, 1, 0, Type::F16}, {false, 2, 0, 1, 0, 1, 0, Type::F32},
                          {false, 3, 0, 2, 0, 2, 0, Type::F32}, {true, 1, 2, 1, 0, 1, 2, Type::F32},
                          {true, 2, 1, 0, 1, 1, 1, Type::F16}};
    for (const Case& c : cases) {
        T kernel, data, d;
        if (!c.is_2d) {
            kernel = make(Type::F16, {3, 5, 4});
            data = make(Type::F32, {23, 5, 2});
            fill(data);
            const int64_t ol = (23 + 2 * c.p0 - c.d0 * 2 - 1) / c.s0 + 1;
            d = node(Op::IM2COL, c.dt, {15, ol, 2}, {&kernel, &data});
        } else {
            kernel = make(Type::F32, {3, 2, 4, 6});
            data = make(Type::F32, {11, 9, 4, 2});
            fill(data);
            const int64_t ow = (11 + 2 * c.p0 - c.d0 * 2 - 1) / c.s0 + 1;
            const int64_t oh = (9 + 2 * c.p1 - c.d1 * 1 - 1) / c.s1 + 1;
            d = node(Op::IM2COL, c.dt, {24, ow, oh, 2}, {&kernel, &data});
        }
        const int32_t params[7] = {c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, c.is_2d};
        std::memcpy(d.t.op_params, params, sizeof params);
        CHECK(im2col_supported(d.t), "im2col supported");
        run(compute_im2col, d.t, 3);
        auto ref = ref_of(d.t.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) -> double {
            double v;
            if (!c.is_2d) {
                const int64_t ic = i0 / 3, k = i0 % 3;
                const int64_t x = i1 * c.s0 + k * c.d0 - c.p0;
                v = (x < 0 || x >= 23) ? 0.0 : get(data.t, x, ic, i2);
            } else {
                const int64_t ic = i0 / 6, kh = (i0 / 3) % 2, kw = i0 % 3;
                const int64_t x = i1 * c.s0 + kw * c.d0 - c.p0;
                const int64_t y = i2 * c.s1 + kh * c.d1 - c.p1;
                v = (x < 0 || x >= 11 || y < 0 || y >= 9) ? 0.0 : get(data.t, x, y, ic, i3);
            }
            return c.dt == Type::F16 ? double(fp16_to_fp32(fp32_to_fp16(float(v)))) : v;
        });
        expect("im2col", d, ref, 0);
    }
}

void test_layout() {
    for (int dim = 0; dim < 4; ++dim) {
        std::vector<int64_t> na = {5, 4, 3, 2}, nb = na, nd = na;
        nb[size_t(dim)] = 3;
        nd[size_t(dim)] = na[size_t(dim)] + 3;
        T a = make(Type::F32, na), b = make(Type::F32, nb);
        fill(a);
        fill(b);
        T d = node(Op::CONCAT, Type::F32, nd, {&a, &b});
        d.t.op_params[0] = dim;
        CHECK(layout_supported(d.t), "concat supported");
        run(compute_layout, d.t, 2);
        expect("concat", d, ref_of(d.t.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                   int64_t i[4] = {i0, i1, i2, i3};
                   if (i[dim] < a.t.ne[dim]) return get(a.t, i0, i1, i2, i3);
                   i[dim] -= a.t.ne[dim];
                   return get(b.t, i[0], i[1], i[2], i[3]);
               }),
               0);
    }
    T a = make(Type::F16, {3, 2, 1});
    fill(a);
    T at_ = permuted(a, 1, 0, 2, 3);  // [2, 3, 1]
    T d = node(Op::REPEAT, Type::F16, {6, 3, 4}, {&at_});
    CHECK(layout_supported(d.t), "repeat supported");
    run(compute_layout, d.t, 2);
    expect("repeat", d, ref_of(d.t.ne,
                               [&](int64_t i0, int64_t i1, int64_t, int64_t) { return get(at_.t, i0 % 2, i1 % 3); }),
           0);
    T p = make(Type::F32, {5, 3, 2});
    fill(p);
    T dp = node(Op::PAD, Type::F32, {8, 3, 4, 2}, {&p});
    const int32_t pads[4] = {3, 0, 2, 1};
    std::memcpy(dp.t.op_params, pads, sizeof pads);
    CHECK(layout_supported(dp.t), "pad supported");
    run(compute_layout, dp.t, 3);
    expect("pad", dp, ref_of(dp.t.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
               return (i0 < 5 && i1 < 3 && i2 < 2 && i3 < 1) ? get(p.t, i0, i1, i2) : 0.0;
           }),
           0);
}

void test_rope() {
    for (int mode : {0, 2}) {
        for (int yarn = 0; yarn < 2; ++yarn) {
            const int64_t D = 24, H = 3, Tn = 5;
            const int n_dims = 16;
            T a = make(Type::F32, {D, H, Tn});
            fill(a);
            T pos = make(Type::I32, {Tn});
            const int32_t pv[5] = {0, 1, 7, 100, 2047};
            std::memcpy(pos.t.data, pv, sizeof pv);
            T d = node(Op::ROPE, Type::F32, {D, H, Tn}, {&a, &pos});
            const float freq_base = 10000.0f, freq_scale = yarn ? 0.25f : 1.0f, ext = yarn ? 1.0f : 0.0f;
            const float attn = yarn ? 1.1f : 1.0f, beta_fast = 32.0f, beta_slow = 1.0f;
            const int n_ctx_orig = 512;
            d.t.op_params[0] = n_dims;
            d.t.op_params[1] = mode;
            d.t.op_params[2] = n_ctx_orig;
            const float f[6] = {freq_base, freq_scale, ext, attn, beta_fast, beta_slow};
            for (int i = 0; i < 6; ++i) d.t.set_param_f(3 + i, f[i]);
            CHECK(rope_supported(d.t), "rope supported");
            run(compute_rope, d.t, 2);
            auto corr = [&](double nrot) {
                return n_dims * std::log(n_ctx_orig / (nrot * 2 * M_PI)) / (2 * std::log(double(freq_base)));
            };
            const double lo = std::max(0.0, std::floor(corr(beta_fast)));
            const double hi = std::min(double(n_dims - 1), std::ceil(corr(beta_slow)));
            auto ref = ref_of(d.t.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t) -> double {
                if (i0 >= n_dims) return get(a.t, i0, i1, i2);
                int64_t pair, j0, j1;
                if (mode == 0) {
                    pair = i0 / 2;
                    j0 = pair * 2;
                    j1 = j0 + 1;
                } else {
                    pair = i0 % (n_dims / 2);
                    j0 = pair;
                    j1 = pair + n_dims / 2;
                }
                const double ex = pv[i2] * std::pow(double(freq_base), -2.0 * pair / n_dims);
                double th = freq_scale * ex, ms = attn;
                if (yarn) {
                    const double y = (pair - lo) / std::max(0.001, hi - lo);
                    const double mix = (1 - std::min(1.0, std::max(0.0, y))) * ext;
                    th = th * (1 - mix) + ex * mix;
                    ms *= 1 + 0.1 * std::log(1.0 / freq_scale);
                }
                const double x0 = get(a.t, j0, i1, i2), x1 = get(a.t, j1, i1, i2);
                return i0 == j0 ? (x0 * std::cos(th) - x1 * std::sin(th)) * ms
                               : (x0 * std::sin(th) + x1 * std::cos(th)) * ms;
            });
            expect("rope", d, ref, 1e-12);
        }
    }
}

void test_flash_attn() {
    struct Case {
        int64_t d, dv, nq, nkv, h, hkv, b;
        Type kv;
        bool mask;
        float max_bias, softcap;
    };
    const Case cases[] = {
        {64, 64, 37, 150, 4, 2, 1, Type::F16, true, 0.0f, 0.0f},
        {64, 64, 1, 77, 3, 3, 2, Type::F16, true, 0.0f, 0.0f},
        {40, 24, 9, 33, 2, 1, 1, Type::F32, false, 0.0f, 0.0f},
        {32, 32, 70, 65, 4, 4, 1, Type::Q4_0, true, 2.0f, 0.0f},
        {64, 64, 5, 20, 2, 2, 1, Type::F16, true, 0.0f, 30.0f},
        {17, 5, 3, 4, 1, 1, 1, Type::F32, true, 0.0f, 0.0f},
        {64, 64, 300, 45, 2, 2, 1, Type::F16, true, 0.0f, 0.0f},
    };
    for (const Case& c : cases) {
        T q = make(Type::F32, {c.d, c.nq, c.h, c.b});
        T k = make(c.kv, {c.d, c.nkv, c.hkv, c.b});
        T v = make(c.kv, {c.dv, c.nkv, c.hkv, c.b});
        fill(q);
        fill(k);
        fill(v);
        const int64_t nqp = (c.nq + 7) / 8 * 8;
        T mask = make(Type::F16, {c.nkv, nqp, 1, 1});
        fill(mask, -2.0f, 0.5f);
        // Causal-style -inf entries, leaving one row fully masked in the last case.
        for (int64_t iq = 0; iq < nqp; ++iq)
            for (int64_t j = 0; j < c.nkv; ++j) {
                if (j > iq + c.nkv - c.nq || (c.nkv == 4 && iq == 1)) {
                    const uint16_t ninf = 0xFC00;
                    std::memcpy(at(mask.t, j, iq), &ninf, 2);
                }
            }
        T d = node(Op::FLASH_ATTN_EXT, Type::F32, {c.dv, c.h, c.nq, c.b}, {&q, &k, &v, c.mask ? &mask : nullptr});
        const float scale = 1.0f / std::sqrt(float(c.d));
        d.t.set_param_f(0, scale);
        d.t.set_param_f(1, c.max_bias);
        d.t.set_param_f(2, c.softcap);
        CHECK(flash_attn_ext_supported(d.t), "flash_attn_ext supported");
        for (int nth : {1, 2}) {
            std::memset(d.t.data, 0, d.t.nbytes());
            run(compute_flash_attn_ext, d.t, nth, flash_attn_ext_work_size(d.t, nth));
            std::vector<double> ref;
            for (int64_t b = 0; b < c.b; ++b)
                for (int64_t iq = 0; iq < c.nq; ++iq)
                    for (int64_t h = 0; h < c.h; ++h) {
                        const int64_t hk = h / (c.h / c.hkv);
                        double slope = 1;
                        if (c.max_bias > 0) {
                            int64_t nhl = 1;
                            while (nhl * 2 <= c.h) nhl *= 2;
                            const double m0 = std::pow(2.0, -c.max_bias / nhl),
                                         m1 = std::pow(2.0, -c.max_bias / 2 / nhl);
                            slope = h < nhl ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - nhl) + 1);
                        }
                        std::vector<double> s(static_cast<size_t>(c.nkv));
                        double mx = -INFINITY;
                        for (int64_t j = 0; j < c.nkv; ++j) {
                            double dot = 0;
                            for (int64_t e = 0; e < c.d; ++e) dot += get(q.t, e, iq, h, b) * get(k.t, e, j, hk, b);
                            dot *= scale;
                            if (c.softcap > 0) dot = c.softcap * std::tanh(dot / c.softcap);
                            if (c.mask) dot += slope * get(mask.t, j, iq);
                            s[size_t(j)] = dot;
                            mx = std::max(mx, dot);
                        }
                        double sum = 0;
                        for (auto& x : s) sum += (x = (mx == -INFINITY ? 0.0 : std::exp(x - mx)));
                        for (int64_t e = 0; e < c.dv; ++e) {
                            double o = 0;
                            for (int64_t j = 0; j < c.nkv; ++j) o += s[size_t(j)] * get(v.t, e, j, hk, b);
                            ref.push_back(sum > 0 ? o / sum : 0.0);
                        }
                    }
            const std::string what = "flash_attn_ext case d=" + std::to_string(c.d) + " nkv=" + std::to_string(c.nkv);
            expect(what.c_str(), d, ref, 1e-10);
        }
    }
}

}  // namespace

int main() {
    std::printf("SIMD path: %s\n", vec::use_avx2() ? "avx2" : "portable");
    const std::pair<const char*, std::function<void()>> tests[] = {
        {"exp", test_exp_accuracy}, {"binary", test_binary},   {"unary", test_unary},   {"norm", test_norm},
        {"soft_max", test_soft_max}, {"reduce", test_reduce}, {"copy", test_copy},     {"rows", test_rows},
        {"im2col", test_im2col},    {"layout", test_layout},  {"rope", test_rope},     {"flash_attn", test_flash_attn},
    };
    for (const auto& [name, fn] : tests) {
        const int before = mb_check::failures;
        try {
            fn();
        } catch (const std::exception& e) {
            ++mb_check::failures;
            std::printf("FAIL %s threw: %s\n", name, e.what());
        }
        std::printf("%-12s %s\n", name, mb_check::failures == before ? "ok" : "FAILED");
    }
    return mb_check::check_report("test_kernels");
}
