// The process-wide cap on the SIMD instruction sets that native code may use: the CPU kernels
// (cpu/kernels/simd.h) and core's element conversions (types.cpp) both read it, so one setting
// governs every SIMD path of the process. The CPU device's prop "max_isa" sets it (dev.set_prop;
// CpuIsa values); before any set_prop the environment variable MB_CPU_MAX_ISA ("portable", "avx2"
// or "avx512") does. The cap lets one machine run and compare every path, and rules out a path on a
// machine where it misbehaves. Readers look at it on every call, so a change applies from the next
// one. (NEON paths on arm64 are not capped.)
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace mb {

enum class CpuIsa { Portable = 0, Avx2 = 1, Avx512 = 2 };

inline std::atomic<int>& cpu_isa_cap_slot() {
    static std::atomic<int> slot{[] {
        const char* v = std::getenv("MB_CPU_MAX_ISA");
        if (v != nullptr && std::strcmp(v, "portable") == 0) return int(CpuIsa::Portable);
        if (v != nullptr && std::strcmp(v, "avx2") == 0) return int(CpuIsa::Avx2);
        return int(CpuIsa::Avx512);
    }()};
    return slot;
}

inline CpuIsa cpu_isa_cap() { return CpuIsa(cpu_isa_cap_slot().load(std::memory_order_relaxed)); }
inline void set_cpu_isa_cap(CpuIsa cap) { cpu_isa_cap_slot().store(int(cap), std::memory_order_relaxed); }

}  // namespace mb
