// The contract between kernels compiled from .metal files (src/metal/sim/msl_shim.h plus the
// registration code tools/metalsim/metal_sim_gen.py writes) and the executor that runs them.
// Plain C++17 without macros, so both the kernel side (where `device`, `thread`, ...
// are macros) and the host side can include it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mb::sim::abi {

constexpr uint32_t kMaxBufferSlots = 31;       // [[buffer(0..30)]], as Metal
constexpr uint32_t kMaxThreadgroupSlots = 31;  // [[threadgroup(0..30)]]
constexpr uint32_t kSimdWidth = 32;

struct U3 {
    uint32_t x, y, z;
};

// What all GPU threads of one threadgroup share.
struct Group {
    void* buffers[kMaxBufferSlots];
    void* threadgroup[kMaxThreadgroupSlots];
    U3 tgpig;  // threadgroup_position_in_grid
    U3 tptg;   // threads_per_threadgroup
    U3 tgpg;   // threadgroups_per_grid
};

// What tells one GPU thread from the others of its threadgroup.
struct Thread {
    U3 tpitg;        // thread_position_in_threadgroup
    uint32_t tiitg;  // thread_index_in_threadgroup
};

using ThreadFn = void (*)(const Group&, const Thread&);
using GroupFn = void (*)(const Group&);

enum class ParamKind : uint8_t { Buffer, Threadgroup, Builtin };

struct Param {
    ParamKind kind;
    uint8_t slot;       // buffer or threadgroup index
    bool optional;      // guarded by a function constant: may be left unbound
    uint32_t min_size;  // sizeof the referent for `constant T&` / `device T&`; 0 for pointers
};

enum class FcType : uint8_t { Bool, Int16, UInt16, Int32, UInt32, Float, Half };

// A program-scope `constant T name [[function_constant(index)]]`, turned into a global
// that the executor sets before each dispatch.
struct FcDecl {
    uint32_t index;
    FcType type;
    const char* name;
    void* value;
    bool* defined;
};

struct KernelInfo {
    const char* name;    // host name, e.g. "kernel_add_f32"
    const char* source;  // the .metal file
    ThreadFn thread;     // one GPU thread (used on a fiber)
    GroupFn group;       // a whole threadgroup as a plain loop; null when the kernel may synchronise
    const Param* params;
    uint32_t n_params;
    uint32_t max_threads;         // [[max_total_threads_per_threadgroup]] or 1024
    const FcDecl* constants;      // every function constant of the source file
    uint32_t n_constants;
    const uint16_t* required;     // indices into constants that the kernel reads
    uint32_t n_required;
};

// Called once per generated source file, from a static initialiser. `racecheck`: the racecheck build
// of the file (its memory accesses instrumented, src/metal/sim/racecheck.h), kept apart by name.
void register_kernels(const KernelInfo* kernels, size_t n, bool racecheck);

// --- synchronisation, called by the shim on behalf of the running GPU thread ---

enum class SyncOp : uint32_t {
    SimdgroupBarrier,
    SimdSum, SimdProduct, SimdMin, SimdMax, SimdAnd, SimdOr, SimdXor,
    SimdPrefixInclusiveSum, SimdPrefixExclusiveSum,
    SimdPrefixInclusiveProduct, SimdPrefixExclusiveProduct,
    SimdShuffle, SimdShuffleDown, SimdShuffleUp, SimdShuffleXor,
    SimdShuffleRotateDown, SimdShuffleRotateUp,
    SimdBroadcast, SimdBroadcastFirst,
    SimdAll, SimdAny, SimdBallot, SimdIsFirst,
    Count
};

constexpr uint32_t kSimdSlotBytes = 16;  // largest value a simd_* op exchanges (float4)

struct SimdSlot {
    alignas(16) unsigned char bytes[kSimdSlotBytes];
};

// One simd_* operation of one simdgroup: every active lane deposits its value in
// `in`; the first lane that reads a reduction result computes it into `out`.
struct SimdExchange {
    SimdSlot in[kSimdWidth];
    SimdSlot out[kSimdWidth];
    uint32_t active;  // lanes that took part (lanes that had not returned)
    bool resolved;
};

// Deposits the calling lane's value and returns once every active lane of its
// simdgroup has reached the same operation; *lane receives the caller's lane index.
SimdExchange* simd_exchange(SyncOp op, const SimdSlot& value, const char* file, uint32_t line,
                            uint32_t* lane);

// Returns once every thread of the threadgroup has reached this barrier.
void threadgroup_barrier(const char* file, uint32_t line);

// Ends the threadgroup with an error (in a thread that cannot be suspended, records it).
void fail(const char* what, const char* file, uint32_t line);

// Per GPU thread state that the shim reads inline. Simdgroup matrix operations are
// simdgroup-uniform, so only lane 0 performs them; the counters check that the other
// lanes follow the same path.
struct LaneInfo {
    uint32_t lane;               // thread_index_in_simdgroup
    uint32_t matrix_ops;         // matrix operations skipped by this lane
    uint32_t* lane0_matrix_ops;  // matrix operations lane 0 performed
    void* owner;                 // the executor's state for this host thread
};

// The running GPU thread's LaneInfo (null outside a dispatch), set at every fiber switch.
// initial-exec: a read is one instruction instead of a __tls_get_addr call; one pointer
// fits the static TLS that glibc keeps for dlopen'ed modules.
#if defined(__ELF__)
extern __thread LaneInfo* tls_lane __attribute__((tls_model("initial-exec")));
#else
extern __thread LaneInfo* tls_lane;
#endif

}  // namespace mb::sim::abi
