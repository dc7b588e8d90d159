// The iq4_nl and mxfp4 mat-vec kernels alone, one thread: our four-row tiles (vec_dot_table_simd.h's
// vec_dot_table_rows_fn, once per byte-dot form this CPU has) and our one-row kernel against ggml's
// one-row vec_dot (ggml-python's libggml-cpu.so, loaded at run time), on the same random weight bytes
// and activation codes (each library's own activation block: ours a float scale, ggml's q8_0 a half).
// Calls alternate (tiles, ggml, one-row, ...), best call kept; prints ns per 32-weight block and
// ggml/ours (above 1: ours faster), and counts tile results (one and two tokens) whose bits differ
// from the one-row kernel's (must be 0). Build and run from the repo:
//
//   g++ -O3 -std=c++17 -mf16c -Isrc -Ishaders benchmarks/table_kernels.cpp
//       src/cpu/kernels/vec_dot_table_simd.cpp -ldl -o /tmp/table_kernels
//   /tmp/table_kernels [path/to/libggml-cpu.so]                 (default: ggml-python's, ggml_cpu_lib.h)
#include <dlfcn.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/kernels/simd.h"
#include "cpu/kernels/vec_dot.h"
#include "cpu/kernels/vec_dot_table_simd.h"
#include "ggml_cpu_lib.h"
#include "quant_blocks.h"

namespace {

using GgmlDot = void (*)(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by, int nrc);

struct GgmlQ8_0 {
    uint16_t d;
    int8_t qs[32];
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

int main(int argc, char** argv) {
    void* h = mb_bench::open_ggml_cpu(argc > 1 ? argv[1] : "");
    if (h == nullptr) return 1;
    const std::vector<mb_bench::Form> forms = mb_bench::byte_dot_forms();
    struct Kind {
        const char* name;
        mb::Type type;
        size_t block;
    };
    const Kind kinds[] = {{"iq4_nl", mb::Type::IQ4_NL, sizeof(mb::block_iq4_nl)},
                          {"mxfp4", mb::Type::MXFP4, sizeof(mb::block_mxfp4)}};
    struct Shape {
        int k, m, calls;
    };
    // whisper base's two shapes (in L2), one streaming from memory, and K with a tail of blocks past
    // the tiles' groups of eight.
    const Shape shapes[] = {{2048, 512, 2000}, {512, 2048, 2000}, {4096, 16384, 15}, {416, 256, 2000}, {384, 1536, 2000}};
    std::printf("%-6s %5s %6s %7s %9s %9s %7s", "type", "K", "rows", "MiB", "ggml ns", "1-row ns", "g/o");
    for (const mb_bench::Form& f : forms) {
        std::printf(" %16s %6s", (std::string(f.name) + " tile ns").c_str(), "g/o");
    }
    std::printf("\n");
    for (const Kind& kd : kinds) {
        auto ggml_dot = reinterpret_cast<GgmlDot>(dlsym(h, (std::string("ggml_vec_dot_") + kd.name + "_q8_0").c_str()));
        const mb::VecDotFn one = mb::vec_dot_table_simd_fn(kd.type);
        if (ggml_dot == nullptr || one == nullptr) continue;
        for (const Shape& s : shapes) {
            const int nb = s.k / 32;
            const size_t row = size_t(nb) * kd.block;
            std::mt19937 rng(1);
            std::vector<uint8_t> w(row * size_t(s.m));
            for (auto& b : w) b = uint8_t(rng());
            for (size_t i = 0; i < w.size() / kd.block; ++i) {
                if (kd.type == mb::Type::IQ4_NL) {
                    const uint16_t d = _cvtss_sh(0.01f + 0.01f * float(rng() % 100) / 100.0f, 0);
                    std::memcpy(&w[i * kd.block], &d, 2);
                } else {
                    w[i * kd.block] = uint8_t(118 + rng() % 8);  // e8m0 scales near 1
                }
            }
            std::vector<mb::BlockQ8Act> y(nb);
            std::vector<GgmlQ8_0> gy(nb);
            for (int i = 0; i < nb; ++i) {
                y[i].d = 0.02f;
                y[i].s = 0;
                gy[i].d = _cvtss_sh(0.02f, 0);
                for (int j = 0; j < 32; ++j) y[i].qs[j] = gy[i].qs[j] = int8_t(int(rng() % 255) - 127);
            }
            std::vector<float> o_tile(s.m), o_ggml(s.m), o_one(s.m);
            const void* acts[2] = {y.data(), y.data()};
            auto run_ggml = [&] {
                for (int r = 0; r < s.m; ++r) ggml_dot(s.k, &o_ggml[r], 0, w.data() + r * row, 0, gy.data(), 0, 1);
            };
            auto run_one = [&] {
                for (int r = 0; r < s.m; ++r) o_one[r] = one(s.k, w.data() + r * row, y.data());
            };
            run_one();
            double best_ggml = 1e30, best_one = 1e30;
            std::vector<double> best_tile;
            int differ = 0;
            for (const mb_bench::Form& f : forms) {
                const mb::VecDotRowsFn tile = mb::vec_dot_table_rows_fn(kd.type, f.dot);
                auto run_tile = [&] {
                    for (int r = 0; r + 4 <= s.m; r += 4) tile(s.k, w.data() + r * row, row, acts, 1, &o_tile[r]);
                };
                run_tile();
                for (int r = 0; r + 4 <= s.m; r += 4) {
                    float two[8];
                    tile(s.k, w.data() + r * row, row, acts, 2, two);
                    for (int q = 0; q < 8; ++q) differ += std::memcmp(&two[q], &o_one[r + q % 4], 4) != 0;
                    for (int q = 0; q < 4; ++q) differ += std::memcmp(&o_tile[r + q], &o_one[r + q], 4) != 0;
                }
                double best = 1e30;
                for (int c = 0; c < s.calls; ++c) {
                    double t0 = now();
                    run_tile();
                    best = std::min(best, now() - t0);
                    t0 = now();
                    run_ggml();
                    best_ggml = std::min(best_ggml, now() - t0);
                    t0 = now();
                    run_one();
                    best_one = std::min(best_one, now() - t0);
                }
                best_tile.push_back(best);
            }
            const double blocks = double(s.m) * nb;
            std::printf("%-6s %5d %6d %7.1f %9.3f %9.3f %7.2f", kd.name, s.k, s.m, double(w.size()) / (1 << 20),
                        best_ggml * 1e9 / blocks, best_one * 1e9 / blocks, best_ggml / best_one);
            for (double b : best_tile) std::printf(" %16.3f %6.2f", b * 1e9 / blocks, best_ggml / b);
            std::printf("%s\n", differ ? ("  " + std::to_string(differ) + " RESULTS DIFFER").c_str() : "");
        }
    }
    return 0;
}
