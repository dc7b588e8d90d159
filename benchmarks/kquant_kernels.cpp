// The mat-vec kernels alone, one thread: our four-row tiles (vec_dot_k_avx2.h for the k-quants,
// vec_dot_rows.cpp's float tile for f16) against ggml's one-row vec_dot (ggml-python's libggml-cpu.so,
// loaded at run time), on the same random weight bytes and activations (q8_K for the k-quants; f32
// for our f16 tile, f16 for ggml's, each library's own form), calls alternating (ours, ggml, ours,
// ...), best call kept. Prints ns per 256 weights (a k-quant super-block) and ggml/ours (above 1: ours
// faster). The k-quant tiles run once per byte-dot form this CPU has (avx2; avx-vnni and avx512-vnni,
// whose vpdpwssd replaces vpmaddwd + vpaddd: same results), each with its own ggml/ours column. Small
// matrices stay in L2 (the kernel itself); large ones stream from memory (the kernel and its
// prefetch). Build and run from the repo:
//
//   g++ -O3 -std=c++17 -mf16c -Isrc -Ishaders benchmarks/kquant_kernels.cpp
//       src/cpu/kernels/vec_dot_k_avx2.cpp src/cpu/kernels/vec_dot_rows.cpp
//       src/cpu/kernels/vec_dot_table_simd.cpp -ldl -o /tmp/kquant_kernels
//   /tmp/kquant_kernels [path/to/libggml-cpu.so]                                          (one line each)
//
// (the library defaults to ggml-python's, found with
//  python3 -c "import ggml, os; print(os.path.dirname(ggml.__file__) + '/lib/libggml-cpu.so')")
#include <dlfcn.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"
#include "cpu/kernels/vec_dot_k_avx2.h"
#include "ggml_cpu_lib.h"
#include "quant_blocks.h"

namespace {

using GgmlDot = void (*)(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by, int nrc);
using GgmlFromFloat = void (*)(const float* x, uint16_t* y, int64_t n);

struct Kind {
    const char* name;
    mb::Type type;
    size_t block;
    std::vector<size_t> halves;  // byte offsets of the block's half scales (d, dmin)
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
    void* h = mb_bench::open_ggml_cpu(argc > 1 ? argv[1] : "");
    if (h == nullptr) return 1;
    const std::vector<mb_bench::Form> forms = mb_bench::byte_dot_forms();
    const Kind kinds[] = {{"q2_K", mb::Type::Q2_K, sizeof(mb::block_q2_K), {80, 82}},
                          {"q3_K", mb::Type::Q3_K, sizeof(mb::block_q3_K), {108}},
                          {"q4_K", mb::Type::Q4_K, sizeof(mb::block_q4_K), {0, 2}},
                          {"q5_K", mb::Type::Q5_K, sizeof(mb::block_q5_K), {0, 2}},
                          {"q6_K", mb::Type::Q6_K, sizeof(mb::block_q6_K), {208}},
                          {"f16", mb::Type::F16, 512, {}}};  // "block": 256 halves
    struct Shape {
        int k, m, calls;
    };
    const Shape shapes[] = {{512, 2048, 2000}, {2048, 512, 2000}, {4096, 32768, 15}};
    std::printf("%-5s %5s %6s %7s %10s", "type", "K", "rows", "MiB", "ggml ns");
    for (const mb_bench::Form& f : forms) {
        std::printf(" %12s %9s", (std::string(f.name) + " ns").c_str(), "ggml/ours");
    }
    std::printf("\n");
    auto ggml_from_f32 = reinterpret_cast<GgmlFromFloat>(dlsym(h, "ggml_cpu_fp32_to_fp16"));
    for (const Shape& s : shapes) {
        for (const Kind& kd : kinds) {
            const bool f16 = kd.type == mb::Type::F16;
            const std::string sym = f16 ? "ggml_vec_dot_f16" : std::string("ggml_vec_dot_") + kd.name + "_q8_K";
            auto ggml_dot = reinterpret_cast<GgmlDot>(dlsym(h, sym.c_str()));
            if (ggml_dot == nullptr || (f16 && ggml_from_f32 == nullptr)) continue;
            const int nb = s.k / 256;
            const size_t row = size_t(nb) * kd.block;
            std::mt19937 rng(1);
            std::vector<uint8_t> w(row * size_t(s.m));
            if (f16) {
                std::normal_distribution<float> normal;
                for (size_t i = 0; i < w.size() / 2; ++i) {
                    const uint16_t v = _cvtss_sh(normal(rng), 0);
                    std::memcpy(&w[2 * i], &v, 2);
                }
            } else {
                for (auto& b : w) b = uint8_t(rng());
                for (size_t blk = 0; blk < w.size() / kd.block; ++blk) {
                    for (size_t off : kd.halves) {
                        const uint16_t half = _cvtss_sh(0.002f + 0.01f * float(rng() % 100) / 100.0f, 0);
                        std::memcpy(&w[blk * kd.block + off], &half, 2);
                    }
                }
            }
            std::vector<mb::block_q8_K> y(nb);
            std::vector<float> xf(s.k);
            std::vector<uint16_t> xh(s.k);
            if (f16) {
                std::normal_distribution<float> normal;
                for (auto& v : xf) v = normal(rng);
                ggml_from_f32(xf.data(), xh.data(), s.k);
            } else {
                for (auto& b : y) {
                    b.d = 0.02f;
                    for (auto& q : b.qs) q = int8_t(int(rng() % 255) - 127);
                    for (int g = 0; g < 16; ++g) {
                        int sum = 0;
                        for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
                        b.bsums[g] = int16_t(sum);
                    }
                }
            }
            const void* acts[1] = {f16 ? static_cast<const void*>(xf.data()) : static_cast<const void*>(y.data())};
            const void* ggml_act = f16 ? static_cast<const void*>(xh.data()) : static_cast<const void*>(y.data());
            std::vector<float> o2(s.m);
            auto run_ggml = [&] {
                for (int r = 0; r < s.m; ++r) ggml_dot(s.k, &o2[r], 0, w.data() + size_t(r) * row, 0, ggml_act, 0, 1);
            };
            run_ggml();
            double best_ggml = 1e30;
            std::vector<double> best_ours;
            std::string differ;
            for (const mb_bench::Form& f : forms) {
                // f16: the float tile (the same for every form), once.
                const bool first = f.dot == mb::ByteDot::Avx2;
                mb::VecDotRowsFn ours = !f16 ? mb::vec_dot_k_rows_avx2_fn(kd.type, f.dot)
                                        : first ? mb::vec_dot_rows_fn(kd.type, mb::VecType::F32)
                                                : nullptr;
                if (ours == nullptr) {
                    best_ours.push_back(0);
                    continue;
                }
                std::vector<float> o1(s.m);
                auto run_ours = [&] {
                    for (int r = 0; r + 4 <= s.m; r += 4) ours(s.k, w.data() + size_t(r) * row, row, acts, 1, &o1[r]);
                };
                run_ours();
                // ggml's f16 activations are rounded (relative 2^-11 each): for unit normals a sum of K
                // terms then differs by about sqrt(K) * 2^-11 from ours.
                const double scale = f16 ? std::sqrt(double(s.k)) * 4.0 / 2048 : 1e-3;
                double worst = 0;
                for (int r = 0; r < s.m; ++r) {
                    const double err = std::fabs(o1[r] - o2[r]);
                    worst = std::max(worst, f16 ? err / scale : err / (std::fabs(o2[r]) + 1) / scale);
                }
                if (worst > 1) differ += std::string("  ") + f.name + " RESULTS DIFFER";
                double best = 1e30;
                for (int c = 0; c < s.calls; ++c) {
                    auto t0 = std::chrono::steady_clock::now();
                    run_ours();
                    best = std::min(best, seconds_since(t0));
                    t0 = std::chrono::steady_clock::now();
                    run_ggml();
                    best_ggml = std::min(best_ggml, seconds_since(t0));
                }
                best_ours.push_back(best);
            }
            const double sb = double(s.m) * nb;
            std::printf("%-5s %5d %6d %7.1f %10.2f", kd.name, s.k, s.m, double(w.size()) / (1 << 20),
                        best_ggml * 1e9 / sb);
            for (double b : best_ours) {
                if (b == 0) {
                    std::printf(" %12s %9s", "-", "-");
                } else {
                    std::printf(" %12.2f %9.2f", b * 1e9 / sb, best_ggml / b);
                }
            }
            std::printf("%s\n", differ.c_str());
        }
    }
    return 0;
}
