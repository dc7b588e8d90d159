// Throughput of the MSL executor: prints numbers, checks nothing (timing is never a
// pass/fail criterion). Built by tests/native/build.sh; run <build-dir>/bench_executor.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <vector>

#include "metal/sim/executor.h"
#include "test_kargs.h"

namespace sim = mb::sim;

namespace {

double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Best of reps: wall seconds, and process CPU seconds (all host threads together),
// which a machine shared with other work disturbs less.
struct Times {
    double wall = 1e30, cpu = 1e30;
};

template <class F>
Times best_seconds(int reps, F f) {
    Times best;
    for (int i = 0; i < reps; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        double c0 = cpu_now();
        f();
        double c1 = cpu_now();
        auto t1 = std::chrono::steady_clock::now();
        best.wall = std::min(best.wall, std::chrono::duration<double>(t1 - t0).count());
        best.cpu = std::min(best.cpu, c1 - c0);
    }
    return best;
}

void run_or_die(const sim::Dispatch& d, sim::Schedule s, int threads) {
    auto r = sim::run(d, s, threads);
    if (!r.ok) {
        std::printf("dispatch failed: %s\n", r.error.c_str());
        std::exit(1);
    }
}

}  // namespace

int main() {
    const sim::Schedule schedules[] = {sim::Schedule::Lockstep, sim::Schedule::RunAhead};
    const char* sname[] = {"lockstep", "run-ahead"};

    // Synchronisation cost: each barrier or simd_sum suspends and resumes every thread.
    for (const char* k : {"kernel_bench_barriers", "kernel_bench_simd_sum"}) {
        for (uint32_t threads : {32u, 256u, 1024u}) {
            const int iters = 2000;
            test_kargs_mode args{iters};
            std::vector<float> dst(threads);
            sim::Dispatch d;
            d.kernel = sim::find_kernel(k);
            d.threads = {threads, 1, 1};
            d.buffers = {{&args, sizeof args}, {dst.data(), dst.size() * 4}};
            Times t = best_seconds(3, [&] { run_or_die(d, sim::Schedule::Lockstep, 1); });
            std::printf("%-24s %4u threads: %6.2f ns CPU per thread per sync point\n", k, threads,
                        t.cpu * 1e9 / (double(iters) * threads));
        }
    }

    // Elementwise add over 1M floats, 256-thread groups (loop path, no fibers).
    {
        const int n = 1 << 20;
        std::vector<float> a(n, 1.f), b(n, 2.f), c(n);
        test_kargs_binary args{n, 1.f};
        sim::Dispatch d;
        d.kernel = sim::find_kernel("kernel_test_add_f32");
        d.grid = {n / 256, 1, 1};
        d.threads = {256, 1, 1};
        d.buffers = {{&args, sizeof args}, {a.data(), n * 4u}, {b.data(), n * 4u}, {c.data(), n * 4u}};
        for (int threads : {1, 2}) {
            Times t = best_seconds(5, [&] { run_or_die(d, sim::Schedule::Lockstep, threads); });
            std::printf("add f32 1M elements, %d host thread(s): wall %7.2f ms, CPU %5.2f ns/element\n", threads,
                        t.wall * 1e3, t.cpu * 1e9 / n);
        }
    }

    // Row sums: 1024 rows x 1024 floats, one 256-thread group per row.
    for (const char* k : {"kernel_test_reduce_simd", "kernel_test_reduce_tree"}) {
        const int rows = 1024, n = 1024;
        std::vector<float> src(size_t(rows) * n, 1.f), dst(rows);
        test_kargs_reduce args{n};
        sim::Dispatch d;
        d.kernel = sim::find_kernel(k);
        d.grid = {rows, 1, 1};
        d.threads = {256, 1, 1};
        d.buffers = {{&args, sizeof args}, {src.data(), src.size() * 4}, {dst.data(), dst.size() * 4}};
        d.threadgroup_memory = {256 * 4};
        for (int si = 0; si < 2; ++si) {
            for (int threads : {1, 2}) {
                Times t = best_seconds(3, [&] { run_or_die(d, schedules[si], threads); });
                std::printf("%-24s 1M floats, %-9s %d host thread(s): wall %7.2f ms, CPU %6.2f ns/element\n", k,
                            sname[si], threads, t.wall * 1e3, t.cpu * 1e9 / (double(rows) * n));
            }
        }
    }

    // simdgroup_matrix matmul 256 x 256 x 256.
    for (const char* k : {"kernel_test_matmul_f32", "kernel_test_matmul_f16"}) {
        const int M = 256, N = 256, K = 256;
        const bool half = k[std::char_traits<char>::length(k) - 2] == '1';
        std::vector<float> a(size_t(M) * K, 0.5f), b(size_t(K) * N, 0.25f), c(size_t(M) * N);
        std::vector<_Float16> ah(a.size(), _Float16(0.5f)), bh(b.size(), _Float16(0.25f));
        test_kargs_matmul args{M, N, K};
        sim::Dispatch d;
        d.kernel = sim::find_kernel(k);
        d.grid = {N / 8, M / 32, 1};
        d.threads = {128, 1, 1};
        d.buffers = {{&args, sizeof args},
                     half ? sim::Binding{ah.data(), ah.size() * 2} : sim::Binding{a.data(), a.size() * 4},
                     half ? sim::Binding{bh.data(), bh.size() * 2} : sim::Binding{b.data(), b.size() * 4},
                     {c.data(), c.size() * 4}};
        d.threadgroup_memory = {half ? size_t(128) : size_t(256)};
        for (int threads : {1, 2}) {
            Times t = best_seconds(3, [&] { run_or_die(d, sim::Schedule::Lockstep, threads); });
            std::printf("%-24s 256^3, %d host thread(s): wall %7.2f ms, %5.2f GFLOP per CPU second\n", k, threads,
                        t.wall * 1e3, 2.0 * M * N * K / t.cpu * 1e-9);
        }
    }

    // Fixed cost of a dispatch: one small threadgroup.
    {
        std::vector<float> a(32, 1.f), b(32, 2.f), c(32);
        test_kargs_binary args{32, 1.f};
        sim::Dispatch d;
        d.kernel = sim::find_kernel("kernel_test_add_f32");
        d.threads = {32, 1, 1};
        d.buffers = {{&args, sizeof args}, {a.data(), 128}, {b.data(), 128}, {c.data(), 128}};
        const int reps = 20000;
        Times t = best_seconds(3, [&] {
            for (int i = 0; i < reps; ++i) run_or_die(d, sim::Schedule::Lockstep, 2);
        });
        std::printf("dispatch of 1 group x 32 threads: wall %6.2f us\n", t.wall * 1e6 / reps);
        d.grid = {2, 1, 1};
        c.resize(64);
        a.resize(64, 1.f);
        b.resize(64, 2.f);
        args.n = 64;
        d.buffers = {{&args, sizeof args}, {a.data(), 256}, {b.data(), 256}, {c.data(), 256}};
        t = best_seconds(3, [&] {
            for (int i = 0; i < reps / 4; ++i) run_or_die(d, sim::Schedule::Lockstep, 2);
        });
        std::printf("dispatch of 2 groups on 2 host threads: wall %6.2f us\n", t.wall * 1e6 / (reps / 4));
    }
    return 0;
}
