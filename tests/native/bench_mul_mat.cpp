// Times the CPU MUL_MAT kernel alone (no Python, no graph): weights of one type times f32 activations,
// through the thread pool as the CPU backend runs it. For kernel work on machines where the Python
// package is not built; benchmarks/ops.py is the side-by-side comparison with peers.
//   g++ -O2 -std=c++17 -pthread -Isrc tests/native/bench_mul_mat.cpp src/cpu/kernels/mul_mat.cpp
//       src/cpu/kernels/vec_dot.cpp src/cpu/kernels/vec_dot_rows.cpp src/cpu/kernels/gemm_f32.cpp
//       src/cpu/thread_pool.cpp src/cpu/cache_sizes.cpp src/core/types.cpp src/core/tensor.cpp src/core/op.cpp
//       src/core/buffer.cpp
//       src/core/storage.cpp src/core/buffer_type.cpp src/core/device.cpp -o /tmp/bench_mul_mat
//   /tmp/bench_mul_mat TYPE N K M THREADS [SECONDS]      (MB_CPU_MAX_ISA=avx2 caps the kernels)
// prints the best time of repeated runs and GFLOP/s (2*N*K*M per run).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/types.h"
#include "cpu/kernels/kernels.h"
#include "cpu/thread_pool.h"

namespace mb {
void ComputeParams::barrier() const {
    if (pool != nullptr && nth > 1) {
        pool->barrier();
    }
}
}  // namespace mb

int main(int argc, char** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: %s TYPE N K M THREADS [SECONDS]\n", argv[0]);
        return 2;
    }
    const std::string tname = argv[1];
    const int64_t n = std::atoll(argv[2]), k = std::atoll(argv[3]), m = std::atoll(argv[4]);
    const int nth = std::atoi(argv[5]);
    const double seconds = argc > 6 ? std::atof(argv[6]) : 1.0;
    mb::Type wtype = mb::Type::F32;
    bool found = false;
    for (mb::Type t : {mb::Type::F32, mb::Type::F16, mb::Type::BF16, mb::Type::Q4_0, mb::Type::Q4_1, mb::Type::Q5_0,
                       mb::Type::Q5_1, mb::Type::Q8_0}) {
        if (tname == mb::type_traits(t).name) {
            wtype = t;
            found = true;
        }
    }
    if (!found || n < 1 || k < 1 || m < 1 || nth < 1) {
        std::fprintf(stderr, "bad arguments\n");
        return 2;
    }
    std::mt19937 rng(1);
    std::normal_distribution<float> dist;
    std::vector<float> w(size_t(m * k)), x(size_t(n * k));
    for (auto& v : w) v = dist(rng);
    for (auto& v : x) v = dist(rng);
    const size_t row_bytes = mb::row_size(wtype, k);
    std::vector<uint8_t> a_mem(row_bytes * size_t(m));
    for (int64_t r = 0; r < m; ++r) {
        mb::quantize_row(wtype, w.data() + r * k, a_mem.data() + size_t(r) * row_bytes, k);
    }
    mb::Tensor a, b, dst;
    a.type = wtype;
    a.ne[0] = k;
    a.ne[1] = m;
    mb::contiguous_strides(a.type, a.ne, a.nb);
    a.data = a_mem.data();
    b.type = mb::Type::F32;
    b.ne[0] = k;
    b.ne[1] = n;
    mb::contiguous_strides(b.type, b.ne, b.nb);
    b.data = x.data();
    std::vector<float> out(size_t(m * n));
    dst.type = mb::Type::F32;
    dst.op = mb::Op::MUL_MAT;
    dst.src[0] = &a;
    dst.src[1] = &b;
    dst.ne[0] = m;
    dst.ne[1] = n;
    mb::contiguous_strides(dst.type, dst.ne, dst.nb);
    dst.data = out.data();
    if (!mb::mul_mat_supported(dst)) {
        std::fprintf(stderr, "unsupported shape\n");
        return 2;
    }
    const size_t ws = mb::mul_mat_work_size(dst, nth);
    std::vector<uint8_t> scratch(ws + 64);
    mb::ThreadPool pool(nth);
    mb::ComputeParams params;
    params.nth = nth;
    params.wdata = scratch.data();
    params.wsize = scratch.size();
    params.pool = &pool;
    auto once = [&] {
        mb::mul_mat_prepare(params, dst);
        pool.run(nth, [&](int ith) {
            mb::ComputeParams p = params;
            p.ith = ith;
            mb::compute_mul_mat(p, dst);
        });
    };
    once();
    double best = 1e30, spent = 0.0;
    int runs = 0;
    while (spent < seconds || runs < 3) {
        const auto t0 = std::chrono::steady_clock::now();
        once();
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::min(best, dt);
        spent += dt;
        ++runs;
    }
    const char* isa = std::getenv("MB_CPU_MAX_ISA");
    std::printf("%s %lldx%lldx%lld threads=%d isa-cap=%s: best %.3f ms, %.1f GFLOP/s (%d runs)\n", tname.c_str(),
                (long long)n, (long long)k, (long long)m, nth, isa ? isa : "none", best * 1e3,
                2.0 * double(n) * double(k) * double(m) / best * 1e-9, runs);
    return 0;
}
