// Standalone checks of the CPU MUL_MAT kernel against a float64 reference built from the dequantised
// weights. Build and run from the repository root, once with the SIMD kernels and once without
// (add -DMB_NO_SIMD for the portable paths; aarch64-linux-gnu-g++ -static and qemu-aarch64 run the
// NEON paths on x86):
//   g++ -O2 -std=c++17 -pthread -Isrc tests/native/test_mul_mat.cpp src/cpu/kernels/mul_mat.cpp
//       src/cpu/kernels/vec_dot.cpp src/cpu/kernels/vec_dot_rows.cpp src/cpu/kernels/gemm_f32.cpp
//       src/cpu/thread_pool.cpp src/cpu/cache_sizes.cpp
//       src/core/types.cpp src/core/tensor.cpp src/core/op.cpp src/core/buffer.cpp src/core/storage.cpp
//       src/core/buffer_type.cpp src/core/device.cpp
//       -o /tmp/test_mul_mat && /tmp/test_mul_mat
#include "check.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/tensor.h"
#include "core/types.h"
#include "cpu/kernels/kernels.h"
#include "cpu/thread_pool.h"

namespace mb {
// The CPU backend defines this in the library; the harness links no backend.
void ComputeParams::barrier() const {
    if (pool != nullptr && nth > 1) {
        pool->barrier();
    }
}
}  // namespace mb

namespace {

using mb::Tensor;
using mb::Type;



std::mt19937 g_rng(1234);

std::vector<float> randn(size_t n) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) {
        x = dist(g_rng);
    }
    return v;
}

constexpr uint8_t kSentinel = 0xA5;
constexpr size_t kSentinelBytes = 64;

// A b layout: how the activations [k, n, b2, b3] are laid out in memory.
enum class Layout {
    Contiguous,
    Transposed,  // memory [n][k] swapped: element (k, i) at i*4 + k*n*4 (a transpose view)
    Permuted,    // dims 1 and 2 swapped in memory, plus padding between rows
};

const char* layout_name(Layout l) {
    switch (l) {
        case Layout::Contiguous: return "contiguous";
        case Layout::Transposed: return "transposed";
        case Layout::Permuted: return "permuted";
    }
    return "?";
}

struct Case {
    Type wtype;
    Type btype;
    int64_t k, m, n, a2, a3, b2, b3;
    Layout layout;
    int nth;
};

// Errors are normalised by the summed squares of the products a[j,k]*b[i,k] rather than of the
// results: for independent data the two agree in expectation, but a single dot product that cancels
// to near zero would otherwise make a correct result look wrong in the small cases. Float paths (and
// the many-token path, which dequantises weights to f32) only round partial sums in f32, an error
// near sqrt(K) * 2^-24 relative to the terms: 1e-9 is far above that and far below any real bug.
constexpr double kFloatBound = 1e-9;

// On the few-token path quantized weights meet activations quantized to 8 bits per block of 32 with
// d = amax/127, so each activation is off by at most d/2. That bounds every output exactly:
// |got - ref| <= sum_k |a[j,k]| * d(i,k)/2, checked per element with 0.2% slack for the rounding of
// the scale itself, plus f32 rounding of the sums.
// Token counts from which the many-token path runs (mul_mat.cpp): f32 weights, other types.
constexpr int64_t kGemmFromF32 = 12;
constexpr int64_t kGemmFromOther = 24;

bool uses_gemm(const Case& c) {
    return c.n >= (c.wtype == Type::F32 ? kGemmFromF32 : kGemmFromOther);
}

bool uses_q8_activations(const Case& c) {
    return mb::type_traits(c.wtype).is_quantized && !uses_gemm(c);
}

double g_worst[2][2] = {};  // [quantized][gemm path]

void run_case(const Case& c) {
    const size_t row_bytes = mb::row_size(c.wtype, c.k);
    // Weights: quantize random values; the reference uses the dequantised weights.
    std::vector<uint8_t> a_mem(row_bytes * size_t(c.m * c.a2 * c.a3) + 1);
    std::vector<double> a_ref(size_t(c.k * c.m * c.a2 * c.a3));
    for (int64_t r = 0; r < c.m * c.a2 * c.a3; ++r) {
        std::vector<float> w = randn(size_t(c.k));
        mb::quantize_row(c.wtype, w.data(), a_mem.data() + r * row_bytes, c.k);
        std::vector<float> back(size_t(c.k));
        mb::dequantize_row(c.wtype, a_mem.data() + r * row_bytes, back.data(), c.k);
        for (int64_t i = 0; i < c.k; ++i) {
            a_ref[size_t(r * c.k + i)] = back[size_t(i)];
        }
    }
    Tensor a;
    a.type = c.wtype;
    a.ne[0] = c.k;
    a.ne[1] = c.m;
    a.ne[2] = c.a2;
    a.ne[3] = c.a3;
    mb::contiguous_strides(a.type, a.ne, a.nb);
    a.data = a_mem.data();

    // Activations: logical (k, i, i2, i3) -> value, stored per layout.
    const size_t es = c.btype == Type::F32 ? 4 : 2;
    const int64_t nb_total = c.k * c.n * c.b2 * c.b3;
    std::vector<float> bv = randn(size_t(nb_total));
    std::vector<double> b_ref(static_cast<size_t>(nb_total));
    Tensor b;
    b.type = c.btype;
    b.ne[0] = c.k;
    b.ne[1] = c.n;
    b.ne[2] = c.b2;
    b.ne[3] = c.b3;
    size_t pad = 0;
    switch (c.layout) {
        case Layout::Contiguous:
            mb::contiguous_strides(b.type, b.ne, b.nb);
            break;
        case Layout::Transposed:
            b.nb[0] = es * size_t(c.n);
            b.nb[1] = es;
            b.nb[2] = es * size_t(c.n * c.k);
            b.nb[3] = b.nb[2] * size_t(c.b2);
            break;
        case Layout::Permuted:
            pad = 3;
            b.nb[0] = es;
            b.nb[2] = es * size_t(c.k + pad);
            b.nb[1] = b.nb[2] * size_t(c.b2);
            b.nb[3] = b.nb[1] * size_t(c.n);
            break;
    }
    const size_t b_bytes = b.nb[3] * size_t(c.b3) + es * pad + 16;
    std::vector<uint8_t> b_mem(b_bytes, 0);
    for (int64_t i3 = 0; i3 < c.b3; ++i3) {
        for (int64_t i2 = 0; i2 < c.b2; ++i2) {
            for (int64_t i1 = 0; i1 < c.n; ++i1) {
                for (int64_t i0 = 0; i0 < c.k; ++i0) {
                    const size_t li = size_t(((i3 * c.b2 + i2) * c.n + i1) * c.k + i0);
                    uint8_t* p = b_mem.data() + i0 * b.nb[0] + i1 * b.nb[1] + i2 * b.nb[2] + i3 * b.nb[3];
                    if (c.btype == Type::F32) {
                        std::memcpy(p, &bv[li], 4);
                        b_ref[li] = bv[li];
                    } else {
                        const uint16_t h = mb::fp32_to_fp16(bv[li]);
                        std::memcpy(p, &h, 2);
                        b_ref[li] = mb::fp16_to_fp32(h);
                    }
                }
            }
        }
    }
    b.data = b_mem.data();

    Tensor dst;
    dst.type = Type::F32;
    dst.op = mb::Op::MUL_MAT;
    dst.src[0] = &a;
    dst.src[1] = &b;
    dst.ne[0] = c.m;
    dst.ne[1] = c.n;
    dst.ne[2] = c.b2;
    dst.ne[3] = c.b3;
    mb::contiguous_strides(dst.type, dst.ne, dst.nb);
    const size_t dst_bytes = size_t(c.m * c.n * c.b2 * c.b3) * 4;
    std::vector<uint8_t> dst_mem(dst_bytes + kSentinelBytes, kSentinel);
    dst.data = dst_mem.data();

    char name[256];
    std::snprintf(name, sizeof name, "%s x %s k=%lld m=%lld n=%lld a=[%lld,%lld] b=[%lld,%lld] %s nth=%d",
                  mb::type_traits(c.wtype).name, mb::type_traits(c.btype).name, (long long)c.k, (long long)c.m,
                  (long long)c.n, (long long)c.a2, (long long)c.a3, (long long)c.b2, (long long)c.b3,
                  layout_name(c.layout), c.nth);

    CHECK(mb::mul_mat_supported(dst), "%s: not supported", name);
    const size_t ws = mb::mul_mat_work_size(dst, c.nth);
    // Scratch deliberately misaligned by 8 bytes (the kernel must align it itself) and full of
    // garbage (mul_mat_prepare must set up every counter the kernel reads).
    std::vector<uint8_t> scratch(ws + 8, 0xA5);
    mb::ThreadPool pool(c.nth);
    mb::ComputeParams params;
    params.nth = c.nth;
    params.wdata = ws ? scratch.data() + 8 : nullptr;
    params.wsize = ws;
    params.pool = &pool;
    mb::mul_mat_prepare(params, dst);
    pool.run(c.nth, [&](int ith) {
        mb::ComputeParams p = params;
        p.ith = ith;
        mb::compute_mul_mat(p, dst);
    });

    for (size_t i = 0; i < kSentinelBytes; ++i) {
        CHECK(dst_mem[dst_bytes + i] == kSentinel, "%s: byte %zu after dst overwritten", name, i);
    }

    const int64_t r2 = c.b2 / c.a2, r3 = c.b3 / c.a3;
    double err = 0.0, ref2 = 0.0;
    bool finite = true;
    for (int64_t i3 = 0; i3 < c.b3; ++i3) {
        for (int64_t i2 = 0; i2 < c.b2; ++i2) {
            const int64_t am = (i3 / r3) * c.a2 + i2 / r2;
            for (int64_t i = 0; i < c.n; ++i) {
                const double* brow = b_ref.data() + size_t(((i3 * c.b2 + i2) * c.n + i) * c.k);
                for (int64_t j = 0; j < c.m; ++j) {
                    const double* arow = a_ref.data() + size_t((am * c.m + j) * c.k);
                    double ref = 0.0;
                    double terms = 0.0;
                    double abs_terms = 0.0;
                    double q8_bound = 0.0;
                    for (int64_t kk = 0; kk < c.k; ++kk) {
                        ref += arow[kk] * brow[kk];
                        terms += (arow[kk] * brow[kk]) * (arow[kk] * brow[kk]);
                        abs_terms += std::fabs(arow[kk] * brow[kk]);
                        if (uses_q8_activations(c)) {
                            double amax = 0.0;
                            for (int64_t q = kk / 32 * 32; q < kk / 32 * 32 + 32; ++q) {
                                amax = std::max(amax, std::fabs(brow[q]));
                            }
                            q8_bound += std::fabs(arow[kk]) * amax / 127.0 * 0.502;
                        }
                    }
                    float got;
                    std::memcpy(&got, dst_mem.data() + size_t(((i3 * c.b2 + i2) * c.n + i) * c.m + j) * 4, 4);
                    finite = finite && std::isfinite(got);
                    if (uses_q8_activations(c)) {
                        const double bound = q8_bound + 1e-5 * abs_terms;
                        CHECK(std::fabs(got - ref) <= bound, "%s: out[%lld,%lld] = %.9g, reference %.9g, bound %.3g",
                              name, (long long)i, (long long)j, got, ref, bound);
                    }
                    err += (got - ref) * (got - ref);
                    ref2 += terms;
                }
            }
        }
    }
    CHECK(finite, "%s: non-finite output", name);
    if (c.k == 0) {
        CHECK(err == 0.0, "%s: K=0 must give zeros (err %g)", name, err);
        return;
    }
    const double nmse = ref2 > 0 ? err / ref2 : err;
    double& worst = g_worst[mb::type_traits(c.wtype).is_quantized][uses_gemm(c)];
    worst = std::max(worst, nmse);
    if (!uses_q8_activations(c)) {
        CHECK(nmse < kFloatBound, "%s: normalised error %.3g >= %.3g", name, nmse, kFloatBound);
    }
}

void test_shapes() {
    const Type quant[] = {Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q8_0};
    const Type floats[] = {Type::F32, Type::F16, Type::BF16};
    const int64_t mn[] = {1, 2, 7, 33, 64, 129};
    for (Type t : floats) {
        for (int64_t m : mn) {
            for (int64_t n : mn) {
                run_case({t, Type::F32, 77, m, n, 1, 1, 1, 1, Layout::Contiguous, 2});
            }
        }
        run_case({t, Type::F32, 5, 9, 13, 1, 1, 1, 1, Layout::Contiguous, 1});
        run_case({t, Type::F32, 300, 40, 50, 1, 1, 1, 1, Layout::Contiguous, 3});
        run_case({t, Type::F32, 600, 35, 20, 1, 1, 1, 1, Layout::Contiguous, 2});
        // Several k blocks, pairs of weight panels plus a part panel, pairs of token groups plus a rest.
        run_case({t, Type::F32, 800, 100, 77, 1, 1, 1, 1, Layout::Contiguous, 2});
        for (int64_t n : {kGemmFromF32 - 1, kGemmFromF32, kGemmFromOther - 1, kGemmFromOther}) {
            run_case({t, Type::F32, 400, 21, n, 1, 1, 1, 1, Layout::Contiguous, 2});
        }
    }
    for (Type t : quant) {
        for (int64_t m : mn) {
            for (int64_t n : mn) {
                run_case({t, Type::F32, 96, m, n, 1, 1, 1, 1, Layout::Contiguous, 2});
            }
        }
        run_case({t, Type::F32, 32 * 19, 37, 45, 1, 1, 1, 1, Layout::Contiguous, 2});
        run_case({t, Type::F32, 32 * 25, 100, 77, 1, 1, 1, 1, Layout::Contiguous, 3});
        // Either side of the switch between the two paths.
        run_case({t, Type::F32, 32 * 13, 21, kGemmFromOther - 1, 1, 1, 1, 1, Layout::Contiguous, 2});
        run_case({t, Type::F32, 32 * 13, 21, kGemmFromOther, 1, 1, 1, 1, Layout::Contiguous, 2});
        run_case({t, Type::F32, 32 * 19, 37, 3, 1, 1, 1, 1, Layout::Contiguous, 3});
    }
    // Many slots: the mat-vec blocks per slot, slots with no rows (m < slots), helping other slots.
    for (Type t : {Type::F32, Type::F16, Type::Q4_0, Type::Q8_0}) {
        for (int64_t m : {3, 37, 384}) {
            for (int64_t n : {1, 5}) {
                run_case({t, Type::F32, 64, m, n, 1, 1, 1, 1, Layout::Contiguous, 16});
            }
        }
        run_case({t, Type::F32, 64, 100, 3, 1, 1, 4, 1, Layout::Contiguous, 7});
    }
    // f16 x f16 as conv_1d uses it.
    for (int64_t n : mn) {
        run_case({Type::F16, Type::F16, 240, 33, n, 1, 1, 1, 1, Layout::Contiguous, 2});
        run_case({Type::F16, Type::F16, 45, 7, n, 1, 1, 1, 1, Layout::Transposed, 2});
    }
}

void test_broadcast_and_layouts() {
    const Type all[] = {Type::F32, Type::F16, Type::BF16, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1, Type::Q8_0};
    const Layout layouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Permuted};
    for (Type t : all) {
        for (Layout l : layouts) {
            for (int64_t n : {int64_t(1), int64_t(5), int64_t(20)}) {
                run_case({t, Type::F32, 64, 19, n, 2, 3, 4, 6, l, 2});
                run_case({t, Type::F32, 64, 19, n, 1, 1, 3, 2, l, 3});
            }
        }
    }
}

void test_zero_sizes() {
    for (Type t : {Type::F32, Type::Q4_0, Type::F16}) {
        run_case({t, Type::F32, 0, 5, 3, 1, 1, 1, 1, Layout::Contiguous, 2});    // K = 0: zeros
        run_case({t, Type::F32, 0, 5, 30, 1, 1, 1, 1, Layout::Contiguous, 2});
        run_case({t, Type::F32, 64, 5, 0, 1, 1, 1, 1, Layout::Contiguous, 2});   // N = 0
        run_case({t, Type::F32, 64, 0, 5, 1, 1, 1, 1, Layout::Contiguous, 2});   // M = 0
        run_case({t, Type::F32, 64, 5, 5, 1, 1, 0, 1, Layout::Contiguous, 2});   // no matrices
    }
}

void test_supported() {
    Tensor a, b, dst;
    a.type = Type::F32;
    b.type = Type::F32;
    a.ne[0] = b.ne[0] = 64;
    a.ne[1] = 3;
    b.ne[1] = 5;
    mb::contiguous_strides(a.type, a.ne, a.nb);
    mb::contiguous_strides(b.type, b.ne, b.nb);
    dst.op = mb::Op::MUL_MAT;
    dst.src[0] = &a;
    dst.src[1] = &b;
    dst.ne[0] = 3;
    dst.ne[1] = 5;
    mb::contiguous_strides(dst.type, dst.ne, dst.nb);
    CHECK(mb::mul_mat_supported(dst), "plain f32 case");
    b.type = Type::F16;
    mb::contiguous_strides(b.type, b.ne, b.nb);
    CHECK(!mb::mul_mat_supported(dst), "f32 x f16 is not a supported pairing");
    b.type = Type::F32;
    mb::contiguous_strides(b.type, b.ne, b.nb);
    a.nb[0] = 8;
    CHECK(!mb::mul_mat_supported(dst), "weights with strided rows");
    mb::contiguous_strides(a.type, a.ne, a.nb);
    a.type = Type::I32;
    CHECK(!mb::mul_mat_supported(dst), "i32 weights");
    a.type = Type::F32;
    dst.nb[1] = 64;
    CHECK(!mb::mul_mat_supported(dst), "non-contiguous dst");
}

}  // namespace

int main() {
    test_supported();
    test_shapes();
    test_broadcast_and_layouts();
    test_zero_sizes();
    std::printf("worst normalised error: float few-token %.3g, float gemm %.3g, quantized few-token %.3g, "
                "quantized gemm %.3g\n",
                g_worst[0][0], g_worst[0][1], g_worst[1][0], g_worst[1][1]);
    return mb_check::check_report("test_mul_mat");
}
