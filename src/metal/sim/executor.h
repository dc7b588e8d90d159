// The MSL executor: runs a kernel dispatch (compiled from .metal through
// src/metal/sim/msl_shim.h) on the CPU with GPU semantics.
//
// Each threadgroup runs on one host thread; threadgroups are spread over a small pool.
// A kernel that can never synchronise runs as a plain loop over its threads. Otherwise
// every GPU thread is a fiber: threadgroup_barrier waits for all threads of the group,
// simd_* operations for the active lanes of the simdgroup (32 lanes), and a thread
// that waits at a barrier other threads never reach is reported as an error, never a
// hang or an abort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "metal/sim/kernel_abi.h"

namespace mb::sim {

namespace race {
class Footprint;
}

using abi::KernelInfo;
using FunctionConstantType = abi::FcType;

constexpr uint32_t kMaxThreadsPerThreadgroup = 1024;
constexpr size_t kMaxThreadgroupMemory = 32 * 1024;
constexpr size_t kDefaultFiberStack = 64 * 1024;

// The order in which the threads of a group run between synchronisation points. Both
// are deterministic; a kernel must give the same result under both.
enum class Schedule {
    // Every thread runs to its next synchronisation point, in thread order.
    Lockstep,
    // One simdgroup runs as far as it can (to a threadgroup barrier or its end) before
    // the next starts; odd threadgroups start from the last simdgroup. Exposes missing
    // threadgroup barriers that Lockstep hides.
    RunAhead,
};

struct Dim3 {
    uint32_t x = 1, y = 1, z = 1;
};

struct Binding {
    void* ptr = nullptr;
    size_t size = 0;  // bytes; 0 = unknown (not checked against the kernel's args struct)
};

struct FunctionConstant {
    uint32_t index = 0;
    FunctionConstantType type = FunctionConstantType::Bool;
    int64_t int_value = 0;    // Bool, Int16, UInt16, Int32, UInt32
    float float_value = 0.f;  // Float, Half

    static FunctionConstant boolean(uint32_t index, bool v);
    static FunctionConstant int16(uint32_t index, int16_t v);
    static FunctionConstant uint16(uint32_t index, uint16_t v);
    static FunctionConstant int32(uint32_t index, int32_t v);
    static FunctionConstant uint32(uint32_t index, uint32_t v);
    static FunctionConstant float32(uint32_t index, float v);
    static FunctionConstant float16(uint32_t index, float v);
};

// One dispatchThreadgroups call.
struct Dispatch {
    const KernelInfo* kernel = nullptr;
    Dim3 grid;     // threadgroups per grid
    Dim3 threads;  // threads per threadgroup
    std::vector<Binding> buffers;             // by [[buffer(i)]]; 0 is the args struct
    std::vector<size_t> threadgroup_memory;   // bytes by [[threadgroup(i)]], multiples of 16
    std::vector<FunctionConstant> constants;  // by [[function_constant(i)]]
    size_t stack_size = 0;                    // per GPU thread; 0 = kDefaultFiberStack
    // A GPU without these features (a device profile): a kernel that uses them fails its dispatch,
    // as Apple's compiler refuses such a pipeline there.
    bool no_simd_reduction = false;  // simd_sum/product/min/max/and/or/xor and the prefix sums
    bool no_simd_matrix = false;     // simdgroup_matrix operations
    // Runs the racecheck build of the kernel (src/metal/sim/racecheck.h): a threadgroup-memory race,
    // a read of threadgroup memory no thread wrote, or two threadgroups writing the same device bytes
    // fails the dispatch with a message naming both threads and their .metal lines.
    bool racecheck = false;
    // With racecheck: receives the device bytes the dispatch read and wrote (a concurrent pass's check).
    race::Footprint* footprint = nullptr;
};

struct Result {
    bool ok = true;
    std::string error;  // "[mb::sim::run] kernel_x: ..." when !ok
    // Time the threadgroups took to run, from the first start to the last end (not the validation
    // before, nor the wait for another dispatch's turn); 0 when nothing ran.
    double run_ns = 0;
};

// Kernels of every linked generated source, by host name; nullptr when unknown.
const KernelInfo* find_kernel(std::string_view name);
std::vector<std::string> kernel_names();
// The racecheck build of a kernel, by host name; nullptr when the module was built without it.
const KernelInfo* find_racecheck_kernel(std::string_view name);
bool racecheck_built();

// Two dispatches of one concurrent pass (no barrier between them), by kernel name and footprint: a
// message naming both when one writes a byte the other reads or writes, else "".
std::string check_concurrent(const char* kernel_a, const race::Footprint& a, const uint32_t grid_a[3],
                             const char* kernel_b, const race::Footprint& b, const uint32_t grid_b[3]);

// Runs the dispatch on up to n_threads host threads (<= 0: hardware concurrency) and
// returns when it is complete. Never throws: invalid dispatches, divergent barriers and
// allocation failures come back as !ok. Calls are serialised process-wide (function
// constants are plain globals of the generated code); the buffers are left as the
// kernel wrote them, also on failure.
Result run(const Dispatch& dispatch, Schedule schedule, int n_threads);

}  // namespace mb::sim
