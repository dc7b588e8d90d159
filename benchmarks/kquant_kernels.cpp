// The k-quant mat-vec kernels alone, one thread: our four-row AVX2 tile (vec_dot_k_avx2.h) against
// ggml's one-row vec_dot (ggml-python's libggml-cpu.so, loaded at run time), on the same random weight
// bytes and q8_K activations, calls alternating (ours, ggml, ours, ...), best call kept. Prints ns per
// 256-value super-block and ggml/ours (above 1: ours faster). Small matrices stay in L2 (the kernel
// itself); large ones stream from memory (the kernel and its prefetch). Build and run from the repo:
//
//   g++ -O3 -std=c++17 -mf16c -Isrc -Ishaders benchmarks/kquant_kernels.cpp
//       src/cpu/kernels/vec_dot_k_avx2.cpp -ldl -o /tmp/kquant_kernels       (one line)
//   /tmp/kquant_kernels [path/to/libggml-cpu.so]
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

#include "cpu/kernels/vec_dot_k_avx2.h"
#include "quant_blocks.h"

namespace {

using GgmlDot = void (*)(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy, size_t by, int nrc);

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
    std::string lib = argc > 1 ? argv[1] : "";
    if (lib.empty()) {
        FILE* p = popen("python3 -c \"import ggml, os; print(os.path.dirname(ggml.__file__))\"", "r");
        char buf[4096] = {};
        if (p == nullptr || fgets(buf, sizeof buf, p) == nullptr) {
            std::fprintf(stderr, "ggml-python not found; pass the path of libggml-cpu.so\n");
            return 1;
        }
        pclose(p);
        lib = std::string(buf, strcspn(buf, "\n")) + "/lib/libggml-cpu.so";
    }
    void* h = dlopen(lib.c_str(), RTLD_NOW);
    if (h == nullptr) {
        std::fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    if (auto init = reinterpret_cast<void (*)()>(dlsym(h, "ggml_cpu_init"))) init();  // its fp16 tables
    const Kind kinds[] = {{"q2_K", mb::Type::Q2_K, sizeof(mb::block_q2_K), {80, 82}},
                          {"q3_K", mb::Type::Q3_K, sizeof(mb::block_q3_K), {108}},
                          {"q4_K", mb::Type::Q4_K, sizeof(mb::block_q4_K), {0, 2}},
                          {"q5_K", mb::Type::Q5_K, sizeof(mb::block_q5_K), {0, 2}},
                          {"q6_K", mb::Type::Q6_K, sizeof(mb::block_q6_K), {208}}};
    struct Shape {
        int k, m, calls;
    };
    const Shape shapes[] = {{512, 2048, 2000}, {2048, 512, 2000}, {4096, 32768, 15}};
    std::printf("%-5s %5s %6s %9s %9s %10s %10s\n", "type", "K", "rows", "MiB", "ours ns", "ggml ns", "ggml/ours");
    for (const Shape& s : shapes) {
        for (const Kind& kd : kinds) {
            const std::string sym = std::string("ggml_vec_dot_") + kd.name + "_q8_K";
            auto ggml_dot = reinterpret_cast<GgmlDot>(dlsym(h, sym.c_str()));
            mb::VecDotRowsFn ours = mb::vec_dot_k_rows_avx2_fn(kd.type);
            if (ggml_dot == nullptr || ours == nullptr) continue;
            const int nb = s.k / 256;
            const size_t row = size_t(nb) * kd.block;
            std::mt19937 rng(1);
            std::vector<uint8_t> w(row * size_t(s.m));
            for (auto& b : w) b = uint8_t(rng());
            for (size_t blk = 0; blk < w.size() / kd.block; ++blk) {
                for (size_t off : kd.halves) {
                    const uint16_t half = _cvtss_sh(0.002f + 0.01f * float(rng() % 100) / 100.0f, 0);
                    std::memcpy(&w[blk * kd.block + off], &half, 2);
                }
            }
            std::vector<mb::block_q8_K> y(nb);
            for (auto& b : y) {
                b.d = 0.02f;
                for (auto& q : b.qs) q = int8_t(int(rng() % 255) - 127);
                for (int g = 0; g < 16; ++g) {
                    int sum = 0;
                    for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
                    b.bsums[g] = int16_t(sum);
                }
            }
            std::vector<float> o1(s.m), o2(s.m);
            const void* acts[1] = {y.data()};
            auto run_ours = [&] {
                for (int r = 0; r + 4 <= s.m; r += 4) ours(s.k, w.data() + size_t(r) * row, row, acts, 1, &o1[r]);
            };
            auto run_ggml = [&] {
                for (int r = 0; r < s.m; ++r) ggml_dot(s.k, &o2[r], 0, w.data() + size_t(r) * row, 0, y.data(), 0, 1);
            };
            run_ours();
            run_ggml();
            double worst = 0;
            for (int r = 0; r < s.m; ++r) worst = std::max(worst, double(std::fabs(o1[r] - o2[r]) / (std::fabs(o2[r]) + 1)));
            double best_ours = 1e30, best_ggml = 1e30;
            for (int c = 0; c < s.calls; ++c) {
                auto t0 = std::chrono::steady_clock::now();
                run_ours();
                best_ours = std::min(best_ours, seconds_since(t0));
                t0 = std::chrono::steady_clock::now();
                run_ggml();
                best_ggml = std::min(best_ggml, seconds_since(t0));
            }
            const double sb = double(s.m) * nb;
            std::printf("%-5s %5d %6d %9.1f %9.2f %10.2f %10.2f%s\n", kd.name, s.k, s.m, double(w.size()) / (1 << 20),
                        best_ours * 1e9 / sb, best_ggml * 1e9 / sb, best_ggml / best_ours,
                        worst > 1e-3 ? "  RESULTS DIFFER" : "");
        }
    }
    return 0;
}
