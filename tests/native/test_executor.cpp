// Tests of the MSL executor (src/metal/sim) on the kernels of tests/kernels/*.metal,
// against plain C++ references. Built and run by tests/native/build.sh; exit status 0
// when every check passes.

#include "check.h"
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "metal/sim/executor.h"
#include "test_kargs.h"

namespace sim = mb::sim;

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif

namespace {



const sim::Schedule kSchedules[] = {sim::Schedule::Lockstep, sim::Schedule::RunAhead};
const char* schedule_name(sim::Schedule s) { return s == sim::Schedule::Lockstep ? "lockstep" : "run-ahead"; }

const sim::KernelInfo* kernel(const char* name) {
    const sim::KernelInfo* k = sim::find_kernel(name);
    CHECK(k != nullptr, "kernel %s not registered", name);
    return k;
}

template <class T>
sim::Binding bind(std::vector<T>& v) {
    return sim::Binding{v.data(), v.size() * sizeof(T)};
}
template <class T>
sim::Binding bind(T& s) {
    return sim::Binding{&s, sizeof(T)};
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::vector<float> random_floats(size_t n, unsigned seed, float lo = -1.f, float hi = 1.f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// ---------------------------------------------------------------- tests

void test_registry() {
    std::printf("registry\n");
    auto names = sim::kernel_names();
    CHECK(names.size() == 23, "%zu kernels", names.size());  // tests/kernels/*.metal, races.metal's 6 included
    CHECK(sim::find_kernel("kernel_test_add_f32") != nullptr, "add_f32");
    CHECK(sim::find_kernel("no_such_kernel") == nullptr, "unknown name");
    const sim::KernelInfo* add = kernel("kernel_test_add_f32");
    CHECK(add && add->group != nullptr, "add runs as a loop (no synchronisation)");
    const sim::KernelInfo* red = kernel("kernel_test_reduce_tree");
    CHECK(red && red->group == nullptr, "reduce runs on fibers");
}

void test_add() {
    std::printf("add f32/f16\n");
    const int n = 1000;
    auto a = random_floats(n, 1), b = random_floats(n, 2);
    test_kargs_binary args{n, 0.5f};
    for (auto s : kSchedules) {
        for (int threads : {1, 2}) {
            std::vector<float> dst(n + 24, -7.f);
            sim::Dispatch d;
            d.kernel = kernel("kernel_test_add_f32");
            d.grid = {4, 1, 1};
            d.threads = {256, 1, 1};
            d.buffers = {bind(args), bind(a), bind(b), bind(dst)};
            auto r = sim::run(d, s, threads);
            CHECK(r.ok, "%s", r.error.c_str());
            CHECK(r.run_ns > 0, "no run time for a dispatch that ran (%g ns)", r.run_ns);
            int bad = 0;
            for (int i = 0; i < n; ++i) bad += dst[i] != a[i] + b[i] * 0.5f;
            for (int i = n; i < n + 24; ++i) bad += dst[i] != -7.f;
            CHECK(bad == 0, "%d wrong (%s, %d threads)", bad, schedule_name(s), threads);
        }
    }
    std::vector<_Float16> ah(n), bh(n), dh(n);
    for (int i = 0; i < n; ++i) {
        ah[i] = static_cast<_Float16>(a[i]);
        bh[i] = static_cast<_Float16>(b[i]);
    }
    sim::Dispatch d;
    d.kernel = kernel("kernel_test_add_f16");
    d.grid = {8, 1, 1};
    d.threads = {128, 1, 1};
    d.buffers = {bind(args), bind(ah), bind(bh), bind(dh)};
    auto r = sim::run(d, sim::Schedule::Lockstep, 2);
    CHECK(r.ok, "%s", r.error.c_str());
    int bad = 0;
    for (int i = 0; i < n; ++i) {
        bad += dh[i] != static_cast<_Float16>(float(ah[i]) + float(bh[i]) * 0.5f);
    }
    CHECK(bad == 0, "%d wrong halfs", bad);
}

void test_gelu4() {
    std::printf("gelu float4\n");
    const int n4 = 300;
    auto src = random_floats(n4 * 4, 3, -4.f, 4.f);
    std::vector<float> dst(n4 * 4);
    test_kargs_binary args{n4, 2.f};
    sim::Dispatch d;
    d.kernel = kernel("kernel_test_gelu4");
    d.grid = {10, 1, 1};
    d.threads = {30, 1, 1};
    d.buffers = {bind(args), bind(src), bind(dst)};
    auto r = sim::run(d, sim::Schedule::Lockstep, 2);
    CHECK(r.ok, "%s", r.error.c_str());
    double worst = 0;
    for (int i = 0; i < n4 * 4; ++i) {
        double x = src[i];
        double ref = 2.0 * 0.5 * x * (1.0 + std::tanh(0.7978845608 * x * (1.0 + 0.044715 * x * x)));
        worst = std::max(worst, std::fabs(ref - dst[i]));
    }
    CHECK(worst < 1e-5, "max error %g", worst);
}

void test_ids() {
    std::printf("position attributes (3-D)\n");
    const sim::Dim3 grid{3, 2, 2}, tg{8, 4, 2};
    const uint32_t tx = grid.x * tg.x, ty = grid.y * tg.y, tz = grid.z * tg.z;
    std::vector<uint32_t> dst(size_t(tx) * ty * tz * 16, 0xdeadbeef);
    for (auto s : kSchedules) {
        sim::Dispatch d;
        d.kernel = kernel("kernel_test_ids");
        d.grid = grid;
        d.threads = tg;
        d.buffers = {sim::Binding{}, bind(dst)};
        auto r = sim::run(d, s, 2);
        CHECK(r.ok, "%s", r.error.c_str());
        int bad = 0;
        for (uint32_t z = 0; z < tz; ++z) {
            for (uint32_t y = 0; y < ty; ++y) {
                for (uint32_t x = 0; x < tx; ++x) {
                    const uint32_t* o = &dst[((size_t(z) * ty + y) * tx + x) * 16];
                    const uint32_t lx = x % tg.x, ly = y % tg.y, lz = z % tg.z;
                    const uint32_t tiitg = (lz * tg.y + ly) * tg.x + lx;
                    const uint32_t expect[16] = {x, y, z, lx, ly, lz, x / tg.x, y / tg.y, z / tg.z,
                                                 64, 12, tiitg, tiitg % 32, tiitg / 32, 2, 32};
                    bad += std::memcmp(o, expect, sizeof expect) != 0;
                }
            }
        }
        CHECK(bad == 0, "%d threads with wrong ids (%s)", bad, schedule_name(s));
    }
}

void test_function_constants() {
    std::printf("function constants\n");
    std::vector<float> src = {1.f, 2.f, 3.f, 4.f}, dst(4);
    sim::Dispatch d;
    d.kernel = kernel("kernel_test_fc");
    d.grid = {1, 1, 1};
    d.threads = {4, 1, 1};
    d.buffers = {sim::Binding{}, bind(src), bind(dst)};

    auto r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(!r.ok && contains(r.error, "function constant 100 (FC_test_square) is not set"), "%s", r.error.c_str());
    CHECK(r.run_ns == 0, "a dispatch refused before it ran took %g ns", r.run_ns);

    d.constants = {sim::FunctionConstant::boolean(100, true)};
    r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(r.ok && dst[3] == 16.f, "squared: %s %g", r.error.c_str(), dst[3]);

    d.constants = {sim::FunctionConstant::boolean(100, false), sim::FunctionConstant::int32(101, 5)};
    r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(r.ok && dst[3] == 1004.f, "offset defined: %s %g", r.error.c_str(), dst[3]);

    d.constants = {sim::FunctionConstant::boolean(100, false)};
    r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(r.ok && dst[3] == 4.f, "offset no longer defined: %g", dst[3]);

    d.constants = {sim::FunctionConstant::int32(100, 1)};
    r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(!r.ok && contains(r.error, "is bool, given int"), "%s", r.error.c_str());
}

void test_misc() {
    std::printf("half4x4 tiles, atomics across host threads, bfloat\n");
    struct Block {
        _Float16 d;
        uint8_t qs[16];
    };
    static_assert(sizeof(Block) == 18, "q4 block layout");
    const int n = 4096;
    std::vector<Block> blocks(n);
    std::mt19937 rng(12);
    for (auto& b : blocks) {
        b.d = static_cast<_Float16>(float(rng() % 1000) / 300.f);
        for (auto& q : b.qs) q = uint8_t(rng());
    }
    for (auto s : kSchedules) {
        std::vector<float> dst(size_t(n) * 16, -1.f);
        std::vector<uint16_t> first(n);
        uint32_t counter = 7;
        sim::Dispatch d;
        d.kernel = kernel("kernel_test_misc");
        d.grid = {n / 64, 1, 1};
        d.threads = {64, 1, 1};
        d.buffers = {sim::Binding{}, {blocks.data(), blocks.size() * sizeof(Block)}, bind(dst), bind(counter),
                     bind(first)};
        auto r = sim::run(d, s, 2);
        CHECK(r.ok, "%s", r.error.c_str());
        CHECK(counter == 7u + n, "atomic counter %u", counter);
        int bad = 0;
        for (int t = 0; t < n; ++t) {
            for (int i = 0; i < 16; ++i) {
                const float v = float(static_cast<_Float16>(float((blocks[t].qs[i] & 15) - 8) * float(blocks[t].d)));
                bad += dst[size_t(t) * 16 + i] != std::min(std::fabs(v), 100.f);
            }
            const float v0 = float(static_cast<_Float16>(float((blocks[t].qs[0] & 15) - 8) * float(blocks[t].d)));
            uint32_t u;
            std::memcpy(&u, &v0, 4);
            const uint16_t rne = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
            bad += first[t] != rne;
        }
        CHECK(bad == 0, "%d wrong (%s)", bad, schedule_name(s));
    }
}

double row_sum(const std::vector<float>& v, int row, int n) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += v[size_t(row) * n + i];
    return s;
}

void test_reductions() {
    std::printf("reductions (threadgroup memory, barriers, simd_sum)\n");
    const int rows = 37, n = 1000;
    auto src = random_floats(size_t(rows) * n, 4);
    test_kargs_reduce args{n};
    struct Case {
        const char* kernel;
        uint32_t threads;
        size_t tg_bytes;
    } cases[] = {
        {"kernel_test_reduce_tree", 256, 256 * 4},
        {"kernel_test_reduce_tree", 1024, 1024 * 4},
        {"kernel_test_reduce_simd", 1024, 32 * 4},
        {"kernel_test_reduce_simd", 96, 32 * 4},
        {"kernel_test_reduce_simd", 40, 32 * 4},
    };
    for (const Case& c : cases) {
        std::vector<float> first;
        for (auto s : kSchedules) {
            for (int threads : {1, 2}) {
                std::vector<float> dst(rows, -1.f);
                sim::Dispatch d;
                d.kernel = kernel(c.kernel);
                d.grid = {rows, 1, 1};
                d.threads = {c.threads, 1, 1};
                d.buffers = {bind(args), bind(src), bind(dst)};
                d.threadgroup_memory = {c.tg_bytes};
                auto r = sim::run(d, s, threads);
                CHECK(r.ok, "%s", r.error.c_str());
                double worst = 0;
                for (int i = 0; i < rows; ++i) worst = std::max(worst, std::fabs(row_sum(src, i, n) - dst[i]));
                CHECK(worst < 1e-3, "%s/%u %s: max error %g", c.kernel, c.threads, schedule_name(s), worst);
                if (first.empty()) first = dst;
                CHECK(std::memcmp(first.data(), dst.data(), rows * sizeof(float)) == 0,
                      "%s/%u: result depends on schedule or host threads", c.kernel, c.threads);
            }
        }
    }
}

void test_missing_barrier() {
    std::printf("missing barrier: lockstep hides it, run-ahead exposes it\n");
    const int rows = 8, n = 512;
    auto src = random_floats(size_t(rows) * n, 5);
    test_kargs_reduce args{n};
    int wrong[2] = {0, 0}, wrong_even = 0;
    for (int si = 0; si < 2; ++si) {
        std::vector<float> dst(rows);
        sim::Dispatch d;
        d.kernel = kernel("kernel_test_reduce_missing_barrier");
        d.grid = {rows, 1, 1};
        d.threads = {256, 1, 1};
        d.buffers = {bind(args), bind(src), bind(dst)};
        d.threadgroup_memory = {32 * 4};
        auto r = sim::run(d, kSchedules[si], 2);
        CHECK(r.ok, "%s", r.error.c_str());
        for (int i = 0; i < rows; ++i) {
            const bool bad = !(std::fabs(row_sum(src, i, n) - dst[i]) < 1e-3);
            wrong[si] += bad;
            wrong_even += si == 1 && i % 2 == 0 && bad;
        }
    }
    CHECK(wrong[0] == 0, "lockstep: %d wrong rows", wrong[0]);
    // Even groups run simdgroup 0 first, and simdgroup 0 writes the result: it reads
    // partial sums not yet written. Odd groups run it last and get lucky.
    CHECK(wrong_even == rows / 2, "run-ahead: %d of %d even rows wrong", wrong_even, rows / 2);
}

void test_simd_ops() {
    std::printf("simd_* functions\n");
    const int n = 64;
    std::vector<int> src(n);
    std::mt19937 rng(6);
    for (auto& v : src) v = int(rng() % 40);
    src[3] = 17;
    for (auto s : kSchedules) {
        std::vector<float> dst(n * 16);
        sim::Dispatch d;
        d.kernel = kernel("kernel_test_simd_ops");
        d.grid = {1, 1, 1};
        d.threads = {n, 1, 1};
        d.buffers = {sim::Binding{}, bind(src), bind(dst)};
        auto r = sim::run(d, s, 1);
        CHECK(r.ok, "%s", r.error.c_str());
        int bad = 0;
        for (int sg = 0; sg < n / 32; ++sg) {
            const int* v = &src[sg * 32];
            float sum = 0, mx = -1e30f, mn = 1e30f;
            int band = ~0, bor = 0, bxor = 0;
            bool any17 = false, allpos = true;
            uint32_t ballot = 0;
            for (int l = 0; l < 32; ++l) {
                sum += float(v[l]);
                mx = std::max(mx, float(v[l]));
                mn = std::min(mn, float(v[l]));
                band &= v[l];
                bor |= v[l];
                bxor ^= v[l];
                any17 = any17 || v[l] == 17;
                allpos = allpos && v[l] >= 0;
                if (v[l] & 1) ballot |= 1u << l;
            }
            float incl = 0;
            for (int l = 0; l < 32; ++l) {
                const float* o = &dst[(sg * 32 + l) * 16];
                const float excl = incl;
                incl += float(v[l]);
                const float expect[16] = {
                    sum, mx, mn, incl, excl,
                    float(v[(l + 5) % 32]),
                    float(l + 3 < 32 ? v[l + 3] : v[l]),
                    float(l >= 2 ? v[l - 2] : v[l]),
                    float(v[l ^ 1]),
                    float(v[7]),
                    float(band), float(bor), float(bxor),
                    any17 ? 1.f : 0.f, allpos ? 1.f : 0.f, float(ballot),
                };
                for (int k = 0; k < 16; ++k) {
                    if (o[k] != expect[k]) {
                        if (bad < 5) std::printf("    sg %d lane %d field %d: %g != %g\n", sg, l, k, o[k], expect[k]);
                        ++bad;
                    }
                }
            }
        }
        CHECK(bad == 0, "%d wrong (%s)", bad, schedule_name(s));
    }

    std::printf("simd_sum over a partial simdgroup\n");
    const int m = 45;
    auto f = random_floats(64, 7);
    for (auto& x : f) x = std::round(x * 100.f);
    std::vector<float> dst(64, -1.f);
    test_kargs_reduce args{m};
    sim::Dispatch d;
    d.kernel = kernel("kernel_test_simd_partial");
    d.grid = {1, 1, 1};
    d.threads = {64, 1, 1};
    d.buffers = {bind(args), bind(f), bind(dst)};
    auto r = sim::run(d, sim::Schedule::RunAhead, 1);
    CHECK(r.ok, "%s", r.error.c_str());
    int bad = 0;
    for (int sg = 0; sg < 2; ++sg) {
        const int lo = sg * 32, hi = std::min(m, lo + 32);
        float sx = 0;
        for (int i = lo; i < hi; ++i) sx += f[i];
        const float expect = sx + float(hi - lo) * 1000.f + f[lo] * 1000000.f;
        for (int i = lo; i < hi; ++i) bad += std::fabs(dst[i] - expect) > 1e-3f * std::fabs(expect);
    }
    for (int i = m; i < 64; ++i) bad += dst[i] != -1.f;
    CHECK(bad == 0, "%d wrong", bad);
}

void test_matmul() {
    std::printf("simdgroup_matrix 8x8 matmul (f32, f16)\n");
    const int M = 64, N = 48, K = 40;
    auto a = random_floats(size_t(M) * K, 8), b = random_floats(size_t(K) * N, 9);
    test_kargs_matmul args{M, N, K};
    for (int half = 0; half < 2; ++half) {
        std::vector<_Float16> ah(a.size()), bh(b.size());
        std::vector<float> ar = a, br = b;
        for (size_t i = 0; i < a.size(); ++i) ar[i] = float(ah[i] = static_cast<_Float16>(a[i]));
        for (size_t i = 0; i < b.size(); ++i) br[i] = float(bh[i] = static_cast<_Float16>(b[i]));
        if (!half) {
            ar = a;
            br = b;
        }
        for (auto s : kSchedules) {
            std::vector<float> c(size_t(M) * N, -5.f);
            sim::Dispatch d;
            d.kernel = kernel(half ? "kernel_test_matmul_f16" : "kernel_test_matmul_f32");
            d.grid = {N / 8, M / 32, 1};
            d.threads = {128, 1, 1};
            d.buffers = {bind(args), half ? bind(ah) : bind(a), half ? bind(bh) : bind(b), bind(c)};
            d.threadgroup_memory = {half ? size_t(128) : size_t(256)};
            auto r = sim::run(d, s, 2);
            CHECK(r.ok, "%s", r.error.c_str());
            double worst = 0;
            for (int i = 0; i < M; ++i) {
                for (int j = 0; j < N; ++j) {
                    double ref = 0;
                    for (int k = 0; k < K; ++k) ref += double(ar[size_t(i) * K + k]) * br[size_t(k) * N + j];
                    worst = std::max(worst, std::fabs(ref - c[size_t(i) * N + j]));
                }
            }
            CHECK(worst < 1e-4, "%s %s: max error %g", half ? "f16" : "f32", schedule_name(s), worst);
        }
    }

    auto ta = random_floats(64, 10), tb = random_floats(64, 11);
    std::vector<float> tc(64);
    sim::Dispatch d;
    d.kernel = kernel("kernel_test_matmul_transposed");
    d.threads = {32, 1, 1};
    d.buffers = {sim::Binding{}, bind(ta), bind(tb), bind(tc)};
    auto r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(r.ok, "%s", r.error.c_str());
    double worst = 0;
    for (int i = 0; i < 8; ++i) {
        for (int j = 0; j < 8; ++j) {
            double ref = 0;
            for (int k = 0; k < 8; ++k) ref += double(ta[k * 8 + i]) * tb[k * 8 + j];
            worst = std::max(worst, std::fabs(ref - tc[i * 8 + j]));
        }
    }
    CHECK(worst < 1e-5, "transposed load: max error %g", worst);
}

void test_divergence() {
    std::printf("divergent barriers and simdgroup operations are errors\n");
    struct Case {
        int mode;
        const char* expect[2];
    } cases[] = {
        {0, {"threads 0-31 wait at threadgroup_barrier (divergent.metal:", "threads 32-63 returned"}},
        {1, {"divergent threadgroup_barrier", "divergent.metal:"}},
        {2, {"divergent simdgroup operations", "simd_max"}},
        {3, {"simdgroup matrix operation in non-uniform control flow", "divergent.metal:"}},
        {4, {"wait at simd_sum (divergent.metal:", "wait at threadgroup_barrier (divergent.metal:"}},
        {5, {"wrote past the end of threadgroup(0) (256 bytes)", "threadgroup (0,0,0)"}},
    };
    for (const Case& c : cases) {
#if defined(TEST_ASAN)
        // Under ASan the canary is poisoned: ASan itself stops at the .metal line.
        if (c.mode == 5) continue;
#endif
        for (auto s : kSchedules) {
            test_kargs_mode args{c.mode};
            std::vector<float> dst(64);
            sim::Dispatch d;
            d.kernel = kernel("kernel_test_divergent");
            d.grid = {3, 1, 1};
            d.threads = {64, 1, 1};
            d.buffers = {bind(args), bind(dst)};
            d.threadgroup_memory = {256};
            auto r = sim::run(d, s, 2);
            CHECK(!r.ok && contains(r.error, "kernel_test_divergent") && contains(r.error, c.expect[0]) &&
                      contains(r.error, c.expect[1]),
                  "mode %d %s: %s", c.mode, schedule_name(s), r.error.c_str());
            CHECK(contains(r.error, "threadgroup (0,0,0)"), "lowest failing group reported: %s", r.error.c_str());
        }
    }
    // The executor stays usable.
    test_add();
}

void test_validation() {
    std::printf("dispatch validation\n");
    std::vector<float> a(16), b(16), c(16);
    test_kargs_binary args{16, 1.f};
    auto base = [&] {
        sim::Dispatch d;
        d.kernel = kernel("kernel_test_add_f32");
        d.grid = {1, 1, 1};
        d.threads = {16, 1, 1};
        d.buffers = {bind(args), bind(a), bind(b), bind(c)};
        return d;
    };
    auto expect = [&](const sim::Dispatch& d, const char* what) {
        auto r = sim::run(d, sim::Schedule::Lockstep, 1);
        CHECK(!r.ok && contains(r.error, what), "expected '%s', got '%s'", what, r.error.c_str());
    };
    auto d = base();
    d.threads = {32, 32, 2};
    expect(d, "2048 threads per threadgroup (32x32x2) exceed the limit of 1024");
    d = base();
    d.threads = {0, 1, 1};
    expect(d, "at least 1");
    d = base();
    d.buffers.resize(3);
    expect(d, "buffer(3) is not bound");
    d = base();
    d.buffers[0].size = 4;
    expect(d, "buffer(0) holds 4 bytes, the kernel reads a 8-byte struct");
    d = base();
    d.threadgroup_memory = {20};
    expect(d, "threadgroup(0) length 20 is not a multiple of 16");
    d = base();
    d.threadgroup_memory = {16384, 16384, 16};
    expect(d, "exceeds 32768");
    d = base();
    d.kernel = kernel("kernel_test_reduce_tree");
    expect(d, "threadgroup(0) has no memory");
    d = base();
    d.grid = {0, 1, 1};
    auto r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(r.ok, "an empty grid does nothing: %s", r.error.c_str());
    d = base();
    d.kernel = nullptr;
    expect(d, "no kernel");
}

}  // namespace

// A GPU without simd reductions or simdgroup matrices (MetalSim's github_paravirtual profile): a
// kernel that uses them fails its dispatch naming the operation, one without them runs.
void test_missing_features() {
    std::printf("kernels needing simd reductions or matrices fail on a GPU without them\n");
    const int rows = 4, n = 256;
    auto src = random_floats(size_t(rows) * n, 11);
    test_kargs_reduce args{n};
    for (const char* name : {"kernel_test_reduce_simd", "kernel_test_reduce_tree"}) {
        std::vector<float> dst(rows, -1.f);
        sim::Dispatch d;
        d.kernel = kernel(name);
        d.grid = {rows, 1, 1};
        d.threads = {256, 1, 1};
        d.buffers = {bind(args), bind(src), bind(dst)};
        d.threadgroup_memory = {256 * 4};
        d.no_simd_reduction = true;
        auto r = sim::run(d, sim::Schedule::Lockstep, 1);
        if (std::strcmp(name, "kernel_test_reduce_simd") == 0) {
            CHECK(!r.ok && contains(r.error, "simd_sum (reduce.metal:") && contains(r.error, "no simdgroup reduction"),
                  "%s", r.error.c_str());
        } else {
            CHECK(r.ok, "%s", r.error.c_str());
        }
    }
    const int M = 64, N = 48, K = 40;
    auto a = random_floats(size_t(M) * K, 8), b = random_floats(size_t(K) * N, 9);
    std::vector<float> c(size_t(M) * N, -5.f);
    test_kargs_matmul margs{M, N, K};
    sim::Dispatch d;
    d.kernel = kernel("kernel_test_matmul_f32");
    d.grid = {N / 8, M / 32, 1};
    d.threads = {128, 1, 1};
    d.buffers = {bind(margs), bind(a), bind(b), bind(c)};
    d.threadgroup_memory = {256};
    d.no_simd_matrix = true;
    auto r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(!r.ok && contains(r.error, "kernel_test_matmul_f32") && contains(r.error, "simdgroup matrix operations"),
          "%s", r.error.c_str());
}

int main() {
    test_registry();
    test_add();
    test_gelu4();
    test_ids();
    test_function_constants();
    test_misc();
    test_reductions();
    test_missing_barrier();
    test_simd_ops();
    test_matmul();
    test_divergence();
    test_validation();
    test_missing_features();
    return mb_check::check_report("test_executor");
}
