// The mat-vec read path alone at many threads: our kernels streaming a matrix far larger than the
// caches, with none of the backend around them (no graph, no thread-pool wake-up: the threads spin
// between calls), so that a shortfall of benchmarks/matvec_bandwidth.py at high thread counts can be
// put on the kernels' read pattern or on what surrounds them. Per type and thread count, two ways
// over the same bytes, GB/s of the best call:
//   tile: the four-row tiles the backend runs (vec_dot.h's vec_dot_rows_fn; four row streams per
//         thread, software prefetch, tile_prefetch.h);
//   rows: the one-row kernels (vec_dot_fn; one sequential stream per thread, the hardware
//         prefetchers alone, as ggml reads).
// Jobs as mul_mat.cpp cuts them: --job-kib of weight rows each (the backend's kVecJobBytes is 256),
// every thread first through its own contiguous block of jobs, then helping the others (a shared
// counter per block, a cache line each). Where `tile` falls short of `rows` at a thread count, the
// tiles' read pattern is the lever; where both reach the roof here but the backend does not, it is
// the rest (job split, wake-up). Build from the repo and run (x86-64; add -DMB_FLOAT_PREFETCH_BYTES=N
// or -DMB_TILE_PREFETCH_BYTES=N to try other prefetch distances for the float and quantized tiles):
//
//   g++ -O3 -std=c++17 -mf16c -pthread -Isrc -Ishaders benchmarks/matvec_threads.cpp
//       src/cpu/kernels/vec_dot*.cpp src/core/types.cpp src/core/quants*.cpp -o /tmp/matvec_threads
//   /tmp/matvec_threads [--threads 1 4 8 16] [--k 4096] [--mib 512] [--types f16 q4_K q6_K iq4_nl] [--job-kib 256]
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/types.h"
#include "cpu/kernels/vec_dot.h"
#include "quant_blocks.h"

namespace {

struct Kind {
    const char* name;
    mb::Type type;
    mb::VecType vt;
    int block_elems;
    size_t block_bytes;
    std::vector<size_t> halves;  // byte offsets of the block's half scales
};

const Kind kKinds[] = {
    {"f16", mb::Type::F16, mb::VecType::F32, 1, 2, {}},
    {"q8_0", mb::Type::Q8_0, mb::VecType::Q8, 32, 34, {0}},
    {"q3_K", mb::Type::Q3_K, mb::VecType::Q8K, 256, sizeof(mb::block_q3_K), {108}},
    {"q4_K", mb::Type::Q4_K, mb::VecType::Q8K, 256, sizeof(mb::block_q4_K), {0, 2}},
    {"q6_K", mb::Type::Q6_K, mb::VecType::Q8K, 256, sizeof(mb::block_q6_K), {208}},
    {"iq4_nl", mb::Type::IQ4_NL, mb::VecType::Q8, 32, sizeof(mb::block_iq4_nl), {0}},
};

int64_t g_k = 4096;  // --k

struct alignas(64) Counter {
    std::atomic<int64_t> taken{0};
};

// Threads 1..n-1 spin on `gen` between calls; call() runs fn(thread) on all n, the caller as thread 0.
class Team {
public:
    explicit Team(int n) : n_(n), counters_(size_t(n)) {
        for (int t = 1; t < n; ++t) threads_.emplace_back([this, t] { loop(t); });
    }
    ~Team() {
        stop_.store(true);
        gen_.fetch_add(1);
        for (auto& th : threads_) th.join();
    }
    template <typename Fn>
    void call(int64_t jobs, Fn fn) {
        jobs_ = jobs;
        for (auto& c : counters_) c.taken.store(0, std::memory_order_relaxed);
        body_ = [&](int t) { run(t, fn); };
        done_.store(0);
        gen_.fetch_add(1, std::memory_order_release);
        body_(0);
        done_.fetch_add(1, std::memory_order_acq_rel);
        while (done_.load(std::memory_order_acquire) < n_) _mm_pause();
    }

private:
    template <typename Fn>
    void run(int self, Fn& fn) {
        for (int k = 0; k < n_; ++k) {
            const int t = (self + k) % n_;
            const int64_t first = jobs_ * t / n_, count = jobs_ * (t + 1) / n_ - first;
            std::atomic<int64_t>& taken = counters_[size_t(t)].taken;
            if (t != self && taken.load(std::memory_order_relaxed) >= count) continue;
            for (int64_t j = taken.fetch_add(1); j < count; j = taken.fetch_add(1)) fn(first + j);
        }
    }
    void loop(int t) {
        uint64_t seen = 0;  // gen_ at construction: a call made before this thread starts is still seen
        for (;;) {
            while (gen_.load(std::memory_order_acquire) == seen) _mm_pause();
            seen = gen_.load();
            if (stop_.load()) return;
            body_(t);
            done_.fetch_add(1, std::memory_order_acq_rel);
        }
    }
    int n_;
    std::vector<Counter> counters_;
    std::vector<std::thread> threads_;
    std::function<void(int)> body_;
    int64_t jobs_ = 0;
    alignas(64) std::atomic<uint64_t> gen_{0};
    alignas(64) std::atomic<int> done_{0};
    std::atomic<bool> stop_{false};
};

}  // namespace

int main(int argc, char** argv) {
    std::vector<int> threads = {1, 2};
    std::vector<std::string> types = {"f16", "q4_K", "q6_K", "iq4_nl"};
    int64_t mib = 512, job_kib = 256;
    int calls = 7;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto list = [&](auto& out, auto conv) {
            out.clear();
            while (i + 1 < argc && argv[i + 1][0] != '-') out.push_back(conv(argv[++i]));
        };
        if (a == "--threads") {
            list(threads, [](const char* s) { return std::atoi(s); });
        } else if (a == "--types") {
            list(types, [](const char* s) { return std::string(s); });
        } else if (a == "--mib" && i + 1 < argc) {
            mib = std::atoll(argv[++i]);
        } else if (a == "--job-kib" && i + 1 < argc) {
            job_kib = std::atoll(argv[++i]);
        } else if (a == "--k" && i + 1 < argc) {
            g_k = std::atoll(argv[++i]);
        } else if (a == "--calls" && i + 1 < argc) {
            calls = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "unknown argument %s\n", a.c_str());
            return 2;
        }
    }
    std::printf("K = %lld, %lld MiB per type, jobs of %lld KiB, best of %d calls; GB/s of weight bytes\n",
                static_cast<long long>(g_k), static_cast<long long>(mib), static_cast<long long>(job_kib), calls);
    std::printf("%-7s %7s %10s %10s %9s\n", "type", "threads", "tile GB/s", "rows GB/s", "tile/rows");
    for (const std::string& name : types) {
        const Kind* kd = nullptr;
        for (const Kind& k : kKinds) kd = name == k.name ? &k : kd;
        if (kd == nullptr) {
            std::fprintf(stderr, "unknown type %s\n", name.c_str());
            return 2;
        }
        const size_t row = size_t(g_k / kd->block_elems) * kd->block_bytes;
        const int64_t m = std::max<int64_t>(4, (mib << 20) / int64_t(row) / 4 * 4);
        std::vector<uint8_t> w(row * size_t(m));
        std::mt19937 rng(1);
        for (size_t i = 0; i < w.size(); i += 2) {
            const uint16_t h = _cvtss_sh(std::normal_distribution<float>()(rng) * 0.01f, 0);
            std::memcpy(&w[i], &h, 2);  // f16: unit-ish values; other types: patched below
        }
        if (kd->type != mb::Type::F16) {
            for (auto& b : w) b = uint8_t(rng());
            for (size_t blk = 0; blk < w.size() / kd->block_bytes; ++blk) {
                for (size_t off : kd->halves) {
                    const uint16_t h = _cvtss_sh(0.002f + 0.01f * float(rng() % 100) / 100.0f, 0);
                    std::memcpy(&w[blk * kd->block_bytes + off], &h, 2);
                }
            }
        }
        std::vector<float> x(g_k);
        for (auto& v : x) v = std::normal_distribution<float>()(rng);
        std::vector<uint8_t> act(mb::vec_row_bytes(kd->vt, g_k));
        mb::vec_prepare_row(kd->vt, mb::Type::F32, reinterpret_cast<const uint8_t*>(x.data()), sizeof(float), g_k,
                            act.data());
        const mb::VecDotFn one = mb::vec_dot_fn(kd->type, kd->vt);
        const mb::VecDotRowsFn tile = mb::vec_dot_rows_fn(kd->type, kd->vt);
        const int64_t rows_per_job = std::max<int64_t>(4, (job_kib << 10) / int64_t(row) / 4 * 4);
        const int64_t jobs = (m + rows_per_job - 1) / rows_per_job;
        std::vector<float> out(static_cast<size_t>(m));
        const void* acts[1] = {act.data()};
        for (int nth : threads) {
            Team team(nth);
            auto job_tile = [&](int64_t j) {
                const int64_t r1 = std::min(m, (j + 1) * rows_per_job);
                for (int64_t r = j * rows_per_job; r + 4 <= r1; r += 4) {
                    tile(g_k, &w[size_t(r) * row], row, acts, 1, &out[size_t(r)]);
                }
            };
            auto job_rows = [&](int64_t j) {
                const int64_t r1 = std::min(m, (j + 1) * rows_per_job);
                for (int64_t r = j * rows_per_job; r < r1; ++r) {
                    out[size_t(r)] = one(g_k, &w[size_t(r) * row], act.data());
                }
            };
            double best[2] = {1e30, 1e30};
            for (int c = 0; c <= calls; ++c) {  // call 0 warms up
                for (int v = 0; v < 2; ++v) {
                    if (v == 0 && tile == nullptr) continue;
                    const auto t0 = std::chrono::steady_clock::now();
                    if (v == 0) {
                        team.call(jobs, job_tile);
                    } else {
                        team.call(jobs, job_rows);
                    }
                    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    if (c > 0) best[v] = std::min(best[v], s);
                }
            }
            const double gb = double(w.size()) / 1e9;
            std::printf("%-7s %7d %10.1f %10.1f %9.2f\n", kd->name, nth, tile ? gb / best[0] : 0.0, gb / best[1],
                        tile ? best[1] / best[0] : 0.0);
            std::fflush(stdout);
        }
    }
    return 0;
}
