// racecheck: data races and uninitialised threadgroup reads in the kernels MetalSim runs, as
// compute-sanitizer's racecheck and initcheck do for CUDA.
//
// Every generated kernel source is compiled a second time (MB_SIM_RACECHECK, in namespace
// mbsim_racecheck: cmake/MetalSimKernels.cmake) with the compiler's ThreadSanitizer instrumentation
// (-fsanitize=thread) but without its runtime: each load and store of the kernels calls one of the
// __tsan_* entry points defined in racecheck.cpp, which hand it to the Tracker of the running host
// thread. The normal build of the kernels is untouched; a racecheck dispatch runs the other build.
//
// What a Tracker records, and when it reports:
//   - threadgroup memory, per byte, between barriers: the last write and two reads (thread, simdgroup
//     operations passed, code address). A write and another thread's read or write of the same byte
//     with no threadgroup_barrier between them is a race. Lanes of one simdgroup are ordered by any
//     simd_* operation or simdgroup_barrier between their accesses (simdgroups run in lockstep).
//   - initcheck: a read of threadgroup memory that no thread of the threadgroup wrote.
//   - device memory: every non-atomic write (address, bytes, threadgroup, thread); after the
//     dispatch, two threadgroups that wrote the same byte are a race.
//   - for a dispatch of a concurrent pass, a Footprint of the device bytes it read and wrote: two
//     dispatches with no barrier between them where one writes what the other touches are a race.
// Code addresses become .metal lines (addr2line over the debug line tables) only for a report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace mb::sim::race {

// Who made an access: the threadgroup (linear index in the grid), the thread in it, the code.
struct Site {
    const void* pc = nullptr;
    uint32_t group = 0;
    uint32_t tid = 0;
};

// "x.metal:12" for a code address of a racecheck kernel (the innermost frame outside the shim,
// with the .metal line it was called from when that frame is a shader header).
std::string source_line(const void* pc);

// The device bytes one dispatch read and wrote (byte-exact; the first access to each 64-byte line
// kept for the report).
class Footprint {
public:
    void add(uintptr_t addr, size_t n, bool write, const Site& site);
    void merge(const Footprint& other);
    bool empty() const { return pages_.empty(); }

    struct Conflict {
        uintptr_t addr = 0;
        bool a_writes = false;  // else b writes and a reads
        bool other_writes = false;
        Site a, b;
    };
    // The lowest byte that one of a, b writes and the other reads or writes; false when none.
    static bool conflict(const Footprint& a, const Footprint& b, Conflict* out);

private:
    static constexpr size_t kPage = 4096;
    static constexpr size_t kLine = 64;
    struct Page {
        uint64_t read[kPage / 64] = {};
        uint64_t write[kPage / 64] = {};
        Site read_site[kPage / kLine];
        Site write_site[kPage / kLine];
        bool read_seen[kPage / kLine] = {};
        bool write_seen[kPage / kLine] = {};
    };
    Page* page(uintptr_t key);
    std::unordered_map<uintptr_t, std::unique_ptr<Page>> pages_;
    uintptr_t last_key_ = ~uintptr_t(0);
    Page* last_ = nullptr;
};

// A non-atomic device write (coalesced with the same thread's next contiguous one).
struct DeviceWrite {
    uintptr_t addr;
    size_t n;
    Site site;
};

// One host thread's racecheck state over the threadgroups it runs. Its access() is called on the
// GPU threads' fibers: on a race it records the race in plain fields and ends the threadgroup
// through abi::fail; the executor then asks report() on its own stack.
class Tracker {
public:
    struct Range {
        uintptr_t lo, hi;
    };
    // tg_slots: [offset, size) of each threadgroup slot in the arena (size 0: unbound).
    void begin_dispatch(const unsigned char* arena, size_t arena_bytes, const size_t* tg_offset,
                        const size_t* tg_size, uint32_t n_tg_slots, std::vector<Range> device,
                        Footprint* footprint);
    void begin_group(uint32_t group);
    void end_dispatch();
    void set_thread(uint32_t tid) { tid_ = tid; }
    void barrier() { new_epoch(); }
    void simd_done(uint32_t tid) { ++simd_[tid]; }

    void access(const void* p, size_t n, bool write, const void* pc) {
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        if (a - tg_lo_ < tg_len_) {
            tg_access(a - tg_lo_, n, write, pc);
        } else if (a - dev_lo_ < dev_len_) {
            device_access(a, n, write, false, pc);
        }
    }
    void atomic(const void* p, size_t n, const void* pc);

    bool race_pending() const { return race_.kind != RaceKind::None; }
    // The pending race as a message (clears it).
    std::string take_report();

    std::vector<DeviceWrite>& device_writes() { return writes_; }
    Footprint& footprint() { return local_fp_; }

private:
    struct Acc {
        uint32_t epoch = 0;
        uint16_t tid = 0;
        uint16_t simd = 0;
        const void* pc = nullptr;
    };
    struct Cell {
        Acc w, r1, r2;
        uint32_t init = 0;  // the group stamp of the last write
    };
    enum class RaceKind : uint8_t { None, ThreadgroupRace, Uninitialized };
    struct Race {
        RaceKind kind = RaceKind::None;
        size_t offset = 0;  // in the arena
        bool first_writes = false, second_writes = false;
        Acc first;           // the earlier access
        uint32_t second_tid = 0;
        const void* second_pc = nullptr;
    };

    void new_epoch();
    void tg_access(size_t off, size_t n, bool write, const void* pc);
    void device_access(uintptr_t a, size_t n, bool write, bool atomic, const void* pc);
    bool concurrent(const Acc& x) const {
        return x.epoch == epoch_ && x.tid != tid_ &&
               !((x.tid >> 5) == (tid_ >> 5) && x.simd != static_cast<uint16_t>(simd_[tid_]));
    }
    [[noreturn]] void raise(RaceKind kind, size_t off, const Acc& first, bool first_writes, bool second_writes,
                            const void* pc);
    std::string tg_place(size_t off) const;

    std::vector<Cell> cells_;
    uintptr_t tg_lo_ = 0, tg_len_ = 0;
    std::vector<Range> device_;
    uintptr_t dev_lo_ = 0, dev_len_ = 0;
    const size_t* tg_offset_ = nullptr;
    const size_t* tg_size_ = nullptr;
    uint32_t n_tg_slots_ = 0;
    uint32_t epoch_ = 0, stamp_ = 0;
    uint32_t group_ = 0;
    uint32_t tid_ = 0;
    uint32_t simd_[1024] = {};
    Race race_;
    std::vector<DeviceWrite> writes_;
    Footprint local_fp_;
    bool footprint_ = false;
};

// The running host thread's Tracker (null outside a racecheck dispatch).
#if defined(__ELF__)
extern __thread Tracker* tls_tracker __attribute__((tls_model("initial-exec")));
#else
extern __thread Tracker* tls_tracker;
#endif

// After a racecheck dispatch: two threadgroups that wrote the same device byte. `writes` of all host
// threads (sorted here); `describe(addr)` names the buffer; "" when there is no race.
std::string check_device_writes(std::vector<DeviceWrite>& writes, const uint32_t grid[3],
                                const std::string& where_prefix, std::string (*describe)(uintptr_t, const void*),
                                const void* ctx);

// "(x,y,z)" of a linear threadgroup index.
std::string group_name(uint32_t group, const uint32_t grid[3]);

}  // namespace mb::sim::race
