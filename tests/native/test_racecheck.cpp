// Tests of MetalSim's racecheck (src/metal/sim/racecheck.h) on the planted races of
// tests/kernels/races.metal: each kind is caught, naming the kernel, both threads, the place and both
// .metal lines, and each race-free twin passes with the right result, under both schedules.

#include "check.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "metal/sim/executor.h"
#include "metal/sim/racecheck.h"
#include "test_kargs.h"

namespace sim = mb::sim;

namespace {

const sim::Schedule kSchedules[] = {sim::Schedule::Lockstep, sim::Schedule::RunAhead};

template <class T>
sim::Binding bind(std::vector<T>& v) {
    return sim::Binding{v.data(), v.size() * sizeof(T)};
}
template <class T>
sim::Binding bind(T& s) {
    return sim::Binding{&s, sizeof(T)};
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The line of races.metal that holds `text` (1-based), so the tests follow edits of the kernels.
int line_of(const char* text, int after = 0) {
    FILE* f = std::fopen(MB_RACES_METAL, "r");
    CHECK(f != nullptr, "cannot open %s", MB_RACES_METAL);
    if (!f) return -1;
    char buf[512];
    int n = 0, found = -1;
    while (std::fgets(buf, sizeof buf, f)) {
        ++n;
        if (n > after && std::strstr(buf, text)) {
            found = n;
            break;
        }
    }
    std::fclose(f);
    CHECK(found > 0, "'%s' not in races.metal", text);
    return found;
}

// What a report says for a .metal line. On Linux the line tables are read with addr2line (binutils, there
// with the compiler); elsewhere (macOS: line tables stay in the object files, no addr2line) a report may
// give the code address instead, and says so.
#if defined(__linux__)
constexpr bool kLinesRequired = true;
#else
constexpr bool kLinesRequired = false;
#endif
std::string at(int line) { return "races.metal:" + std::to_string(line); }
bool names_line(const std::string& error, const std::string& prefix, int line) {
    if (error.find(prefix + at(line)) != std::string::npos) return true;
    return !kLinesRequired && error.find(prefix + "code address ") != std::string::npos &&
           error.find("no .metal line") != std::string::npos;
}

sim::Dispatch dispatch(const char* name, test_kargs_mode& args, uint32_t groups, uint32_t threads) {
    sim::Dispatch d;
    d.kernel = sim::find_kernel(name);
    CHECK(d.kernel != nullptr, "kernel %s not registered", name);
    CHECK(sim::find_racecheck_kernel(name) != nullptr, "no racecheck build of %s", name);
    d.grid = {groups, 1, 1};
    d.threads = {threads, 1, 1};
    d.buffers = {bind(args)};
    d.racecheck = true;
    return d;
}

void test_tg_rw() {
    std::printf("threadgroup read-write race\n");
    const int kernel_line = line_of("kernel void kernel_race_tg_rw");
    const int write = line_of("buf[tiitg] = float(tiitg);", kernel_line);
    const int read = line_of("dst[tiitg] = buf[(tiitg + 1) % ntg];", kernel_line);
    for (sim::Schedule s : kSchedules) {
        for (int mode = 0; mode < 2; ++mode) {
            test_kargs_mode args{mode};
            std::vector<float> dst(64, -1.f);
            sim::Dispatch d = dispatch("kernel_race_tg_rw", args, 1, 64);
            d.buffers.push_back(bind(dst));
            d.threadgroup_memory = {64 * 4};
            auto r = sim::run(d, s, 2);
            if (mode == 0) {
                CHECK(!r.ok && contains(r.error, "kernel_race_tg_rw") && contains(r.error, "racecheck") &&
                          contains(r.error, "threadgroup memory race on threadgroup(0) byte ") &&
                          names_line(r.error, " reads at ", read) && names_line(r.error, " writes at ", write) &&
                          contains(r.error, "thread "),
                      "%s", r.error.c_str());
            } else {
                CHECK(r.ok, "%s", r.error.c_str());
                bool right = true;
                for (int i = 0; i < 64; ++i) right = right && dst[i] == float((i + 1) % 64);
                CHECK(right, "twin: wrong result");
            }
        }
    }
    // Without racecheck the racy kernel runs (lockstep hides the race).
    test_kargs_mode args{0};
    std::vector<float> dst(64, -1.f);
    sim::Dispatch d = dispatch("kernel_race_tg_rw", args, 1, 64);
    d.buffers.push_back(bind(dst));
    d.threadgroup_memory = {64 * 4};
    d.racecheck = false;
    auto r = sim::run(d, sim::Schedule::Lockstep, 1);
    CHECK(r.ok, "without racecheck: %s", r.error.c_str());
}

void test_missing_barrier() {
    std::printf("missing barrier in a reduction\n");
    const int kernel_line = line_of("kernel void kernel_race_missing_barrier");
    const int add = line_of("buf[tiitg] += buf[tiitg + s];", kernel_line);
    const int groups = 4, n = 128;
    std::vector<float> src(size_t(groups) * n);
    for (size_t i = 0; i < src.size(); ++i) src[i] = float(i % 7) - 3.f;
    for (sim::Schedule s : kSchedules) {
        for (int mode = 0; mode < 2; ++mode) {
            test_kargs_mode args{mode};
            std::vector<float> dst(groups, 0.f);
            sim::Dispatch d = dispatch("kernel_race_missing_barrier", args, groups, n);
            d.buffers.push_back(bind(src));
            d.buffers.push_back(bind(dst));
            d.threadgroup_memory = {n * 4};
            auto r = sim::run(d, s, 2);
            if (mode == 0) {
                // The read of buf[tiitg + s] by one thread and the write of the same slot by another
                // (both on the loop's line).
                CHECK(!r.ok && contains(r.error, "kernel_race_missing_barrier") &&
                          contains(r.error, "threadgroup memory race") &&
                          names_line(r.error, " reads at ", add) && names_line(r.error, " writes at ", add),
                      "%s", r.error.c_str());
            } else {
                CHECK(r.ok, "%s", r.error.c_str());
                for (int g = 0; g < groups; ++g) {
                    float want = 0.f;
                    for (int i = 0; i < n; ++i) want += src[size_t(g) * n + i];
                    CHECK(dst[g] == want, "twin: group %d sum %g, want %g", g, dst[g], want);
                }
            }
        }
    }
}

void test_simd_exchange() {
    std::printf("lanes of a simdgroup ordered by simdgroup_barrier\n");
    const int kernel_line = line_of("kernel void kernel_race_simd_exchange");
    const int write = line_of("buf[tiitg] = float(tiitg) * 2.0f;", kernel_line);
    for (sim::Schedule s : kSchedules) {
        for (int mode = 0; mode < 2; ++mode) {
            test_kargs_mode args{mode};
            std::vector<float> dst(64, -1.f);
            sim::Dispatch d = dispatch("kernel_race_simd_exchange", args, 1, 64);
            d.buffers.push_back(bind(dst));
            d.threadgroup_memory = {64 * 4};
            auto r = sim::run(d, s, 1);
            if (mode == 0) {
                CHECK(!r.ok && contains(r.error, "threadgroup memory race") &&
                          names_line(r.error, " writes at ", write),
                      "%s", r.error.c_str());
            } else {
                CHECK(r.ok, "%s", r.error.c_str());
                bool right = true;
                for (int i = 0; i < 64; ++i) right = right && dst[i] == float((i - i % 32 + (i % 32 + 1) % 32) * 2);
                CHECK(right, "twin: wrong result");
            }
        }
    }
}

void test_device_write() {
    std::printf("two threadgroups write the same device bytes\n");
    const int kernel_line = line_of("kernel void kernel_race_device_write");
    const int write = line_of("dst[0] = float(tgpig);", kernel_line);
    const int groups = 6;
    for (int threads : {1, 3}) {
        for (int mode = 0; mode < 2; ++mode) {
            test_kargs_mode args{mode};
            std::vector<float> dst(groups, -1.f);
            std::vector<int> counter(1, 0);
            sim::Dispatch d = dispatch("kernel_race_device_write", args, groups, 32);
            d.buffers.push_back(bind(dst));
            d.buffers.push_back(bind(counter));
            auto r = sim::run(d, sim::Schedule::Lockstep, threads);
            if (mode == 0) {
                // Deterministic whatever the host threads: the two lowest threadgroups are named.
                CHECK(!r.ok && contains(r.error, "kernel_race_device_write") &&
                          contains(r.error, "device memory race on buffer(1) byte 0") &&
                          contains(r.error, "threadgroup (0,0,0) thread 0 writes at") &&
                          contains(r.error, "threadgroup (1,0,0) thread 0 writes at") &&
                          names_line(r.error, "thread 0 writes at ", write),
                      "%s", r.error.c_str());
            } else {
                CHECK(r.ok, "%s", r.error.c_str());
                CHECK(counter[0] == groups, "twin: counter %d", counter[0]);
                for (int g = 0; g < groups; ++g) CHECK(dst[g] == float(g), "twin: dst[%d] = %g", g, dst[g]);
            }
        }
    }
}

void test_uninit() {
    std::printf("initcheck: a threadgroup read no thread wrote\n");
    const int kernel_line = line_of("kernel void kernel_race_uninit");
    const int read = line_of("dst[tiitg] = buf[ntg - 1 - tiitg];", kernel_line);
    for (sim::Schedule s : kSchedules) {
        for (int mode = 0; mode < 2; ++mode) {
            test_kargs_mode args{mode};
            std::vector<float> dst(96, -1.f);
            sim::Dispatch d = dispatch("kernel_race_uninit", args, 1, 96);
            d.buffers.push_back(bind(dst));
            d.threadgroup_memory = {96 * 4};
            auto r = sim::run(d, s, 2);
            if (mode == 0) {
                CHECK(!r.ok && contains(r.error, "kernel_race_uninit") && contains(r.error, "initcheck") &&
                          contains(r.error, "thread 0 reads threadgroup(0) byte 380") &&
                          names_line(r.error, " at ", read) && contains(r.error, "no thread of the threadgroup wrote"),
                      "%s", r.error.c_str());
            } else {
                CHECK(r.ok, "%s", r.error.c_str());
                bool right = true;
                for (int i = 0; i < 96; ++i) right = right && dst[i] == float(95 - i);
                CHECK(right, "twin: wrong result");
            }
        }
    }
}

void test_concurrent() {
    std::printf("two dispatches of a concurrent pass, no barrier between them\n");
    const int kernel_line = line_of("kernel void kernel_race_copy");
    const int line = line_of("dst[tpig] = src[tpig] + 1.0f;", kernel_line);
    const int n = 256;
    for (int mode = 0; mode < 2; ++mode) {
        std::vector<float> x(n, 1.f), y(n, 0.f), z(n, 0.f);
        test_kargs_mode args{mode};
        sim::race::Footprint fa, fb;
        // A: x -> y. B: y -> z (reads what A writes) or, the twin, x -> z.
        sim::Dispatch a = dispatch("kernel_race_copy", args, n / 64, 64);
        a.buffers.push_back(bind(x));
        a.buffers.push_back(bind(y));
        a.footprint = &fa;
        sim::Dispatch b = dispatch("kernel_race_copy", args, n / 64, 64);
        b.buffers.push_back(mode == 0 ? bind(y) : bind(x));
        b.buffers.push_back(bind(z));
        b.footprint = &fb;
        auto rb = sim::run(b, sim::Schedule::Lockstep, 2);
        auto ra = sim::run(a, sim::Schedule::Lockstep, 2);
        CHECK(ra.ok && rb.ok, "%s %s", ra.error.c_str(), rb.error.c_str());
        CHECK(!fa.empty() && !fb.empty(), "no footprint");
        const uint32_t grid[3] = {n / 64, 1, 1};
        std::string e = sim::check_concurrent("kernel_race_copy", fa, grid, "kernel_race_copy", fb, grid);
        if (mode == 0) {
            char addr[32];
            const auto y_addr = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(y.data()));
            std::snprintf(addr, sizeof addr, "%#llx", y_addr);
            CHECK(contains(e, "concurrent pass") && contains(e, addr) && contains(e, "writes at") &&
                      contains(e, "reads at") && names_line(e, "writes at ", line) && names_line(e, "reads at ", line),
                  "%s", e.c_str());
        } else {
            CHECK(e.empty(), "twin: %s", e.c_str());
        }
    }
}

}  // namespace

int main() {
    CHECK(sim::racecheck_built(), "the racecheck build of the kernels is missing");
    test_tg_rw();
    test_missing_barrier();
    test_simd_exchange();
    test_device_write();
    test_uninit();
    test_concurrent();
    return mb_check::check_report("test_racecheck");
}
