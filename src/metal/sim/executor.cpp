#include "metal/sim/executor.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "metal/sim/fiber.h"
#include "metal/sim/racecheck.h"

#if defined(MB_SIM_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace mb::sim::abi {
#if defined(__ELF__)
__thread LaneInfo* tls_lane __attribute__((tls_model("initial-exec"))) = nullptr;
#else
__thread LaneInfo* tls_lane = nullptr;
#endif
}  // namespace mb::sim::abi

namespace mb::sim {

namespace {

constexpr uint32_t kSimd = abi::kSimdWidth;
constexpr uint32_t kMaxSimdgroups = kMaxThreadsPerThreadgroup / kSimd;
constexpr size_t kCanary = 16;  // guard bytes after each threadgroup buffer
constexpr unsigned char kCanaryByte = 0xcd;
// Threadgroup memory starts as all-ones bytes (NaN as float or half, -1 as integer) in
// every group, so reading memory no thread wrote shows up in results.
constexpr unsigned char kPoisonByte = 0xff;
#if defined(MB_SIM_ASAN)
constexpr size_t kMinStack = 256 * 1024;  // ASan's redzones make frames several times larger
#else
constexpr size_t kMinStack = 16 * 1024;
#endif

// ---------------------------------------------------------------- registry

struct Registry {
    std::unordered_map<std::string_view, const KernelInfo*> by_name;
    std::unordered_set<std::string_view> duplicates;
};

Registry& registry() {
    static Registry r;
    return r;
}

// The racecheck build of the same kernels (src/metal/sim/racecheck.h).
Registry& racecheck_registry() {
    static Registry r;
    return r;
}

const char* op_name(abi::SyncOp op) {
    static const char* const names[] = {
        "simdgroup_barrier",
        "simd_sum", "simd_product", "simd_min", "simd_max", "simd_and", "simd_or", "simd_xor",
        "simd_prefix_inclusive_sum", "simd_prefix_exclusive_sum",
        "simd_prefix_inclusive_product", "simd_prefix_exclusive_product",
        "simd_shuffle", "simd_shuffle_down", "simd_shuffle_up", "simd_shuffle_xor",
        "simd_shuffle_rotate_down", "simd_shuffle_rotate_up",
        "simd_broadcast", "simd_broadcast_first",
        "simd_all", "simd_any", "simd_ballot", "simd_is_first",
    };
    static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(abi::SyncOp::Count));
    auto i = static_cast<size_t>(op);
    return i < static_cast<size_t>(abi::SyncOp::Count) ? names[i] : "simd operation";
}

const char* base_name(const char* path) {
    if (!path) return "?";
    const char* slash = std::strrchr(path, '/');
    return slash ? slash + 1 : path;
}

std::string site(const char* file, uint32_t line) {
    return std::string(base_name(file)) + ":" + std::to_string(line);
}

bool same_site(const char* f1, uint32_t l1, const char* f2, uint32_t l2) {
    return l1 == l2 && (f1 == f2 || (f1 && f2 && std::strcmp(f1, f2) == 0));
}

// ---------------------------------------------------------------- one dispatch

struct Job {
    const Dispatch* dispatch = nullptr;
    const KernelInfo* kernel = nullptr;
    Schedule schedule = Schedule::Lockstep;
    uint64_t n_groups = 0;
    uint32_t n_threads = 0;  // per threadgroup
    size_t stack_size = 0;
    size_t tg_offset[abi::kMaxThreadgroupSlots] = {};
    size_t tg_size[abi::kMaxThreadgroupSlots] = {};
    size_t tg_total = 0;  // bytes of the arena, canaries included
    bool racecheck = false;

    std::atomic<uint64_t> next_group{0};
    std::atomic<uint64_t> first_failure{UINT64_MAX};
    std::mutex error_mutex;
    uint64_t error_group = UINT64_MAX;
    std::string error;

    // Keeps the failure of the lowest group. Groups are claimed in increasing order and
    // no group above a known failure is started, so the report does not depend on how
    // many host threads ran or how they interleaved.
    void record_failure(uint64_t group, std::string message) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (group < error_group) {
            error_group = group;
            error = std::move(message);
        }
        uint64_t seen = first_failure.load(std::memory_order_relaxed);
        while (group < seen && !first_failure.compare_exchange_weak(seen, group)) {
        }
    }
};

// ---------------------------------------------------------------- GPU threads

enum class LaneState : uint8_t { Fresh, Ready, Running, AtBarrier, AtSimd, Exited };

struct Lane {
    abi::LaneInfo info;  // what the shim reads through abi::tls_lane
    FiberContext ctx;
    FiberStack* stack = nullptr;
    abi::Thread ids{};
    LaneState state = LaneState::Fresh;
    uint16_t sg = 0;
    abi::SyncOp op = abi::SyncOp::SimdgroupBarrier;  // where it waits (AtSimd)
    const char* file = nullptr;
    uint32_t line = 0;
};

static_assert(std::is_standard_layout_v<Lane> && offsetof(Lane, info) == 0,
              "the shim's LaneInfo* must convert back to its Lane");

struct SimdGroup {
    // Two banks: a lane reads the result of operation e while faster lanes may already
    // deposit operation e+1, but none can reach e+2 before every lane has left e.
    abi::SimdExchange bank[2];
    uint32_t live = 0;     // lanes that have not returned
    uint32_t arrived = 0;  // lanes waiting at the current operation
    uint32_t epoch = 0;
    abi::SyncOp op = abi::SyncOp::SimdgroupBarrier;
    const char* file = nullptr;
    uint32_t line = 0;
    uint32_t lane0_matrix_ops = 0;
};

// Lanes that can run. Lockstep: one FIFO in thread order. RunAhead: one FIFO per
// simdgroup, always served from the first non-empty one (the last for reversed groups).
class RunQueue {
public:
    void reset(bool per_simdgroup, bool reverse) {
        // lane >> shift picks the FIFO; a FIFO holds at most `mask + 1` lanes.
        shift_ = per_simdgroup ? 5 : 31;
        mask_ = per_simdgroup ? kSimd - 1 : kMaxThreadsPerThreadgroup - 1;
        reverse_ = reverse;
        nonempty_ = 0;
        std::fill(std::begin(head_), std::end(head_), 0u);
        std::fill(std::begin(count_), std::end(count_), 0u);
    }
    void push(uint32_t lane) {
        const uint32_t q = lane >> shift_;
        slots_[q * kSimd + ((head_[q] + count_[q]) & mask_)] = static_cast<uint16_t>(lane);
        ++count_[q];
        nonempty_ |= 1u << q;
    }
    // -1 when no lane can run.
    int pop() {
        if (!nonempty_) return -1;
        const uint32_t q = reverse_ ? 31u - static_cast<uint32_t>(__builtin_clz(nonempty_))
                                    : static_cast<uint32_t>(__builtin_ctz(nonempty_));
        const int lane = slots_[q * kSimd + head_[q]];
        head_[q] = (head_[q] + 1) & mask_;
        if (--count_[q] == 0) nonempty_ &= ~(1u << q);
        return lane;
    }

private:
    uint16_t slots_[kMaxThreadsPerThreadgroup];
    uint32_t head_[kMaxSimdgroups];
    uint32_t count_[kMaxSimdgroups];
    uint32_t nonempty_ = 0;
    uint32_t shift_ = 31;
    uint32_t mask_ = 0;
    bool reverse_ = false;
};

// ---------------------------------------------------------------- a host thread's executor

class Worker {
public:
    Worker() : lanes_(kMaxThreadsPerThreadgroup) {}

    void run_job(Job& job) {
        try {
            run_groups(job);
        } catch (const std::exception& e) {
            job.record_failure(0, message_prefix(job) + "host failure: " + e.what());
        }
        abi::tls_lane = nullptr;
        race::tls_tracker = nullptr;
        if (rc_on_) rc_->end_dispatch();
        rc_on_ = false;
    }

    // The racecheck state of the last dispatch this worker ran (null when it never ran one).
    race::Tracker* tracker() { return rc_.get(); }

    // --- called by kernels through the abi:: functions, with the caller's LaneInfo

    abi::SimdExchange* simd_exchange(abi::LaneInfo* li, abi::SyncOp op, const abi::SimdSlot& value,
                                     const char* file, uint32_t line, uint32_t* lane_out) {
        if (li == &loop_info_) return loop_simd_exchange(op, value, file, line, lane_out);
        Lane* L = reinterpret_cast<Lane*>(li);
        if (no_simd_reduction_ && is_reduction(op)) missing_feature(op, file, line);
        SimdGroup& sg = sgs_[L->sg];
        abi::SimdExchange& ex = sg.bank[sg.epoch & 1];
        if (sg.arrived == 0) {
            sg.op = op;
            sg.file = file;
            sg.line = line;
            ex.resolved = false;
        } else if (sg.op != op || !same_site(sg.file, sg.line, file, line)) {
            divergent_simd(L, op, file, line);
        }
        ex.in[L->info.lane] = value;
        sg.arrived |= 1u << L->info.lane;
        L->state = LaneState::AtSimd;
        L->op = op;
        L->file = file;
        L->line = line;
        if (sg.arrived == sg.live) complete_simd(L->sg);
        block(L);
        *lane_out = L->info.lane;
        return &ex;
    }

    void threadgroup_barrier(abi::LaneInfo* li, const char* file, uint32_t line) {
        if (li == &loop_info_) {
            note_loop_sync("threadgroup_barrier", file, line);
            return;
        }
        Lane* L = reinterpret_cast<Lane*>(li);
        if (barrier_arrived_ == 0) {
            barrier_file_ = file;
            barrier_line_ = line;
        } else if (!same_site(barrier_file_, barrier_line_, file, line)) {
            divergent_barrier(L, file, line);
        }
        L->state = LaneState::AtBarrier;
        L->file = file;
        L->line = line;
        if (++barrier_arrived_ == n_) {
            barrier_arrived_ = 0;
            if (rc_on_) rc_->barrier();
            for (uint32_t i = 0; i < n_; ++i) make_ready(i);
        }
        block(L);
    }

    void fail_kernel(abi::LaneInfo* li, const char* what, const char* file, uint32_t line) {
        if (li == &loop_info_) {
            if (loop_error_.empty()) loop_error_ = std::string(what) + " (" + site(file, line) + ")";
            return;
        }
        error_ = std::string(what) + " (" + site(file, line) + ")";
        abandon();
    }

private:
    // ------------------------------------------------------------ groups

    void run_groups(Job& job) {
        kernel_ = job.kernel;
        n_ = job.n_threads;
        n_sg_ = (n_ + kSimd - 1) / kSimd;
        const Dispatch& d = *job.dispatch;
        for (uint32_t i = 0; i < abi::kMaxBufferSlots; ++i) {
            group_.buffers[i] = i < d.buffers.size() ? d.buffers[i].ptr : nullptr;
        }
        for (uint32_t i = 0; i < abi::kMaxThreadgroupSlots; ++i) {
            group_.threadgroup[i] = job.tg_size[i] ? arena_ + job.tg_offset[i] : nullptr;
        }
        group_.tptg = abi::U3{d.threads.x, d.threads.y, d.threads.z};
        group_.tgpg = abi::U3{d.grid.x, d.grid.y, d.grid.z};
        // Under racecheck every kernel runs on fibers: the Tracker tells threads apart by the fiber.
        const bool fibers = kernel_->group == nullptr || job.racecheck;
        if (fibers) prepare_stacks(job.stack_size, n_);
        no_simd_reduction_ = d.no_simd_reduction;
        rc_on_ = job.racecheck;
        if (rc_on_) {
            if (!rc_) rc_ = std::make_unique<race::Tracker>();
            std::vector<race::Tracker::Range> device;
            for (size_t i = 1; i < d.buffers.size(); ++i) {
                const auto lo = reinterpret_cast<uintptr_t>(d.buffers[i].ptr);
                if (lo && d.buffers[i].size) device.push_back({lo, lo + d.buffers[i].size});
            }
            rc_->begin_dispatch(arena_, job.tg_total, job.tg_offset, job.tg_size, abi::kMaxThreadgroupSlots,
                                std::move(device), d.footprint);
            race::tls_tracker = rc_.get();
        }

        for (;;) {
            const uint64_t g = job.next_group.fetch_add(1, std::memory_order_relaxed);
            if (g >= job.n_groups || g > job.first_failure.load(std::memory_order_relaxed)) break;
            group_.tgpig = abi::U3{static_cast<uint32_t>(g % d.grid.x),
                                   static_cast<uint32_t>(g / d.grid.x % d.grid.y),
                                   static_cast<uint32_t>(g / d.grid.x / d.grid.y)};
            prepare_arena(job);
            error_.clear();
            if (rc_on_) rc_->begin_group(static_cast<uint32_t>(g));
            if (fibers) {
                run_fibers(job.schedule == Schedule::RunAhead, (g & 1) != 0);
            } else {
                run_loop();
            }
            if (rc_on_ && rc_->race_pending()) error_ = rc_->take_report();
            if (error_.empty() && fibers && d.no_simd_matrix) {
                for (uint32_t s = 0; s < n_sg_; ++s) {
                    if (sgs_[s].lane0_matrix_ops) {
                        error_ = "simdgroup matrix operations: this GPU has none (a device profile without them)";
                        break;
                    }
                }
            }
            if (error_.empty()) check_arena(job);
            if (!error_.empty()) job.record_failure(g, message_prefix(job) + error_);
        }
    }

    void prepare_stacks(size_t size, uint32_t n) {
        if (size != stack_size_) {
            stacks_.clear();
            stack_size_ = size;
        }
        // Stack tops spread over 16 KiB in steps of 13 cache lines.
        while (stacks_.size() < n) {
            stacks_.push_back(std::make_unique<FiberStack>(size, stacks_.size() * 832 % 16384));
        }
    }

    void prepare_arena(const Job& job) {
        if (!job.tg_total) return;
#if defined(MB_SIM_ASAN)
        ASAN_UNPOISON_MEMORY_REGION(arena_, job.tg_total);
#endif
        for (uint32_t i = 0; i < abi::kMaxThreadgroupSlots; ++i) {
            if (!job.tg_size[i]) continue;
            std::memset(arena_ + job.tg_offset[i], kPoisonByte, job.tg_size[i]);
            std::memset(arena_ + job.tg_offset[i] + job.tg_size[i], kCanaryByte, kCanary);
#if defined(MB_SIM_ASAN)
            ASAN_POISON_MEMORY_REGION(arena_ + job.tg_offset[i] + job.tg_size[i], kCanary);
#endif
        }
    }

    void check_arena(const Job& job) {
        if (!job.tg_total) return;
#if defined(MB_SIM_ASAN)
        ASAN_UNPOISON_MEMORY_REGION(arena_, job.tg_total);
#endif
        for (uint32_t i = 0; i < abi::kMaxThreadgroupSlots; ++i) {
            if (!job.tg_size[i]) continue;
            const unsigned char* c = arena_ + job.tg_offset[i] + job.tg_size[i];
            for (size_t k = 0; k < kCanary; ++k) {
                if (c[k] != kCanaryByte) {
                    error_ = "wrote past the end of threadgroup(" + std::to_string(i) + ") (" +
                             std::to_string(job.tg_size[i]) + " bytes)";
                    return;
                }
            }
        }
    }

    std::string message_prefix(const Job& job) const {
        return "[mb::sim::run] " + std::string(job.kernel->name) + ": threadgroup (" +
               std::to_string(group_.tgpig.x) + "," + std::to_string(group_.tgpig.y) + "," +
               std::to_string(group_.tgpig.z) + "): ";
    }

    // A kernel the generator found free of synchronisation: its threads run one after
    // the other on this stack.
    void run_loop() {
        loop_info_ = abi::LaneInfo{0, 0, &loop_lane0_ops_, this};
        abi::tls_lane = &loop_info_;
        loop_error_.clear();
        kernel_->group(group_);
        abi::tls_lane = nullptr;
        if (!loop_error_.empty()) error_ = loop_error_;
    }

    [[gnu::cold, gnu::noinline]] void note_loop_sync(const char* what, const char* file, uint32_t line) {
        if (loop_error_.empty()) {
            loop_error_ = std::string("kernel was generated as free of synchronisation but called ") + what +
                          " (" + site(file, line) + "); tools/metalsim/metal_sim_gen.py missed it";
        }
    }

    // A thread cannot be suspended in a loop-run kernel: the operation sees a simdgroup
    // of one lane, and the group fails.
    [[gnu::cold, gnu::noinline]] abi::SimdExchange* loop_simd_exchange(abi::SyncOp op, const abi::SimdSlot& value,
                                                                       const char* file, uint32_t line,
                                                                       uint32_t* lane_out) {
        note_loop_sync(op_name(op), file, line);
        loop_exchange_.active = 1;
        loop_exchange_.resolved = false;
        loop_exchange_.in[0] = value;
        *lane_out = 0;
        return &loop_exchange_;
    }

    // The failing paths build the message in error_ in a full expression of its own, so
    // that no string is alive on the fiber stack that abandon() leaves for good.
    [[gnu::cold, gnu::noinline, noreturn]] void divergent_simd(Lane* L, abi::SyncOp op, const char* file,
                                                               uint32_t line) {
        const SimdGroup& sg = sgs_[L->sg];
        error_ = "divergent simdgroup operations: lane " + std::to_string(L->info.lane) + " of simdgroup " +
                 std::to_string(L->sg) + " at " + op_name(op) + " (" + site(file, line) +
                 ") while other lanes are at " + op_name(sg.op) + " (" + site(sg.file, sg.line) + ")";
        abandon();
    }

    static bool is_reduction(abi::SyncOp op) {
        return op >= abi::SyncOp::SimdSum && op <= abi::SyncOp::SimdPrefixExclusiveProduct;
    }

    [[gnu::cold, gnu::noinline, noreturn]] void missing_feature(abi::SyncOp op, const char* file, uint32_t line) {
        error_ = std::string(op_name(op)) + " (" + site(file, line) +
                 "): this GPU has no simdgroup reduction (a device profile without it)";
        abandon();
    }

    [[gnu::cold, gnu::noinline, noreturn]] void divergent_barrier(Lane* L, const char* file, uint32_t line) {
        error_ = "divergent threadgroup_barrier: thread " + std::to_string(L->ids.tiitg) + " at " +
                 site(file, line) + " while other threads wait at " + site(barrier_file_, barrier_line_);
        abandon();
    }

    void run_fibers(bool run_ahead, bool reverse) {
        for (uint32_t s = 0; s < n_sg_; ++s) {
            SimdGroup& sg = sgs_[s];
            const uint32_t lanes = std::min(kSimd, n_ - s * kSimd);
            sg.live = lanes == kSimd ? ~0u : (1u << lanes) - 1u;
            sg.arrived = 0;
            sg.epoch = 0;
            sg.lane0_matrix_ops = 0;
        }
        const uint32_t tx = group_.tptg.x, txy = group_.tptg.x * group_.tptg.y;
        queue_.reset(run_ahead, reverse);
        for (uint32_t i = 0; i < n_; ++i) {
            Lane& L = lanes_[i];
            L.info = abi::LaneInfo{i % kSimd, 0, &sgs_[i / kSimd].lane0_matrix_ops, this};
            L.ids.tpitg = abi::U3{i % tx, i % txy / tx, i / txy};
            L.ids.tiitg = i;
            L.state = LaneState::Fresh;
            L.sg = static_cast<uint16_t>(i / kSimd);
            L.stack = nullptr;
            queue_.push(i);
        }
        n_exited_ = 0;
        barrier_arrived_ = 0;
        free_stacks_.clear();
        for (auto& s : stacks_) free_stacks_.push_back(s.get());

        switch_to(main_, &lanes_[queue_.pop()], false);
        // Back here when every thread has returned or the group failed.
        abi::tls_lane = nullptr;
    }

    static void lane_entry(void* self) { static_cast<Worker*>(self)->lane_loop(); }

    [[noreturn]] void lane_loop() {
        for (;;) {
            Lane* L = cur_;
            kernel_->thread(group_, L->ids);
            L->state = LaneState::Exited;
            ++n_exited_;
            SimdGroup& sg = sgs_[L->sg];
            sg.live &= ~(1u << L->info.lane);
            if (sg.arrived && sg.arrived == sg.live) complete_simd(L->sg);
            if (n_exited_ == n_) fiber_switch(L->ctx, main_, true);
            const int next = queue_.pop();
            if (next < 0) deadlock();
            Lane* N = &lanes_[next];
            if (N->state == LaneState::Fresh) {
                // The next thread has not started: it runs on this stack, no switch.
                N->stack = L->stack;
                N->ctx.stack_lo = L->ctx.stack_lo;
                N->ctx.stack_size = L->ctx.stack_size;
                L->stack = nullptr;
                N->state = LaneState::Running;
                cur_ = N;
                abi::tls_lane = &N->info;
                if (rc_on_) rc_->set_thread(N->ids.tiitg);
                continue;
            }
            free_stacks_.push_back(L->stack);
            L->stack = nullptr;
            switch_to(L->ctx, N, true);
        }
    }

    void switch_to(FiberContext& from, Lane* to, bool dying) {
        if (to->state == LaneState::Fresh) {
            to->stack = free_stacks_.back();
            free_stacks_.pop_back();
            fiber_init(to->ctx, *to->stack, &Worker::lane_entry, this);
        }
        to->state = LaneState::Running;
        cur_ = to;
        abi::tls_lane = &to->info;
        if (rc_on_) rc_->set_thread(to->ids.tiitg);
        fiber_switch(from, to->ctx, dying);
    }

    // The running lane waits; another runs until the lane is resumed.
    void block(Lane* L) {
        const int next = queue_.pop();
        if (next < 0) deadlock();
        Lane* N = &lanes_[next];
        if (N == L) {
            L->state = LaneState::Running;
            return;
        }
        switch_to(L->ctx, N, false);
    }

    void make_ready(uint32_t lane) {
        lanes_[lane].state = LaneState::Ready;
        queue_.push(lane);
    }

    void complete_simd(uint32_t s) {
        SimdGroup& sg = sgs_[s];
        sg.bank[sg.epoch & 1].active = sg.arrived;
        uint32_t m = sg.arrived;
        sg.arrived = 0;
        ++sg.epoch;
        while (m) {
            const uint32_t b = static_cast<uint32_t>(__builtin_ctz(m));
            m &= m - 1;
            if (rc_on_) rc_->simd_done(s * kSimd + b);
            make_ready(s * kSimd + b);
        }
    }

    // Ends the group with error_: its fibers are never resumed and their stacks are reused.
    [[noreturn]] void abandon() {
        fiber_switch(cur_->ctx, main_, true);
        __builtin_unreachable();
    }

    // No thread can run but some have not returned: they wait for threads that will
    // never arrive. Lists who waits where.
    [[gnu::cold, gnu::noinline, noreturn]] void deadlock() {
        describe_deadlock();
        abandon();
    }

    void describe_deadlock() {
        std::string& msg = error_;
        msg = "threads wait at a barrier or simdgroup operation that the others never reach:";
        uint32_t start = 0;
        std::string prev;
        auto describe = [](const Lane& L) -> std::string {
            switch (L.state) {
                case LaneState::Exited: return "returned";
                case LaneState::AtBarrier: return "wait at threadgroup_barrier (" + site(L.file, L.line) + ")";
                case LaneState::AtSimd:
                    return std::string("wait at ") + op_name(L.op) + " (" + site(L.file, L.line) + ")";
                default: return "runnable";
            }
        };
        for (uint32_t i = 0; i <= n_; ++i) {
            std::string cur = i < n_ ? describe(lanes_[i]) : std::string();
            if (i == n_ || (i > 0 && cur != prev)) {
                msg += (start == 0 ? " threads " : "; threads ") + std::to_string(start);
                if (i - 1 > start) msg += "-" + std::to_string(i - 1);
                msg += " " + prev;
                start = i;
            }
            prev = std::move(cur);
        }
    }

    // ------------------------------------------------------------ state

    const KernelInfo* kernel_ = nullptr;
    bool no_simd_reduction_ = false;
    abi::Group group_{};
    uint32_t n_ = 0;
    uint32_t n_sg_ = 0;
    std::string error_;

    std::vector<Lane> lanes_;
    SimdGroup sgs_[kMaxSimdgroups];
    RunQueue queue_;
    Lane* cur_ = nullptr;
    FiberContext main_;
    uint32_t n_exited_ = 0;
    uint32_t barrier_arrived_ = 0;
    const char* barrier_file_ = nullptr;
    uint32_t barrier_line_ = 0;

    size_t stack_size_ = 0;
    std::vector<std::unique_ptr<FiberStack>> stacks_;
    std::vector<FiberStack*> free_stacks_;

    abi::LaneInfo loop_info_{};
    uint32_t loop_lane0_ops_ = 0;
    abi::SimdExchange loop_exchange_{};
    std::string loop_error_;

    alignas(64) unsigned char arena_[kMaxThreadgroupMemory + abi::kMaxThreadgroupSlots * kCanary];
    std::unique_ptr<race::Tracker> rc_;  // created by the first racecheck dispatch
    bool rc_on_ = false;                 // the current dispatch runs under racecheck
};

// ---------------------------------------------------------------- host threads

// One step of a bounded busy wait: a few pause instructions first, then yielding the
// core, so that a waiter never keeps the awaited thread off a busy machine.
inline void spin_step(int i) {
    if (i < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    } else {
        std::this_thread::yield();
    }
}

// Dispatches are serialised: the calling thread is worker 0 and up to n-1 helpers join.
// Graphs issue many small dispatches back to back, so a helper spins briefly for the
// next one before it sleeps (waking a sleeping thread costs tens of microseconds).
// The pool is never destroyed, so that helpers blocked in wait() at interpreter exit
// are not joined from a static destructor. A forked child has none of the helper
// threads (and maybe a mutex held by a thread that is gone): it starts a new pool.
class Pool {
public:
    static Pool& instance() {
        static const bool created = [] {
            current() = new Pool();
            pthread_atfork(nullptr, nullptr, [] { current() = new Pool(); });
            return true;
        }();
        (void)created;
        return *current();
    }

    std::mutex& dispatch_mutex() { return dispatch_mutex_; }

    // Caller holds dispatch_mutex(): the workers' racecheck state after a dispatch.
    std::vector<race::Tracker*> trackers() {
        std::vector<race::Tracker*> out;
        for (auto& w : workers_) {
            if (w->tracker()) out.push_back(w->tracker());
        }
        return out;
    }

    // Caller holds dispatch_mutex().
    void run(Job& job, int n_threads) {
        uint64_t want = n_threads > 1 ? static_cast<uint64_t>(n_threads - 1) : 0;
        want = std::min<uint64_t>(want, job.n_groups ? job.n_groups - 1 : 0);
        if (workers_.empty()) workers_.push_back(std::make_unique<Worker>());
        while (workers_.size() < want + 1) {
            const int index = static_cast<int>(workers_.size());
            workers_.push_back(std::make_unique<Worker>());
            try {
                std::thread(&Pool::helper_main, this, index, workers_.back().get()).detach();
            } catch (const std::system_error&) {
                workers_.pop_back();
                break;
            }
        }
        const int helpers = static_cast<int>(std::min<uint64_t>(want, workers_.size() - 1));
        if (helpers) {
            job_ = &job;
            wanted_ = helpers;
            running_.store(helpers, std::memory_order_relaxed);
            generation_.fetch_add(1, std::memory_order_release);
            std::lock_guard<std::mutex> lock(mutex_);
            if (sleepers_) wake_.notify_all();
        }
        workers_[0]->run_job(job);
        if (helpers) {
            for (int spin = 0; spin < kSpins && running_.load(std::memory_order_acquire) != 0; ++spin) spin_step(spin);
            std::unique_lock<std::mutex> lock(mutex_);
            done_.wait(lock, [this] { return running_.load(std::memory_order_acquire) == 0; });
        }
    }

private:
    static constexpr int kSpins = 256;

    static Pool*& current() {
        static Pool* pool = nullptr;
        return pool;
    }

    void helper_main(int index, Worker* worker) {
        uint64_t seen = 0;
        for (;;) {
            uint64_t g = generation_.load(std::memory_order_acquire);
            for (int spin = 0; g == seen && spin < kSpins; ++spin) {
                spin_step(spin);
                g = generation_.load(std::memory_order_acquire);
            }
            if (g == seen) {
                std::unique_lock<std::mutex> lock(mutex_);
                ++sleepers_;
                wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
                --sleepers_;
                g = generation_.load(std::memory_order_acquire);
            }
            seen = g;
            if (index > wanted_) continue;
            worker->run_job(*job_);
            if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                std::lock_guard<std::mutex> lock(mutex_);
                done_.notify_one();
            }
        }
    }

    std::mutex dispatch_mutex_;
    std::vector<std::unique_ptr<Worker>> workers_;  // [0]: the calling thread
    // Written by the caller before generation_ is bumped (release), read after.
    Job* job_ = nullptr;
    int wanted_ = 0;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> running_{0};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable done_;
    int sleepers_ = 0;
};

// ---------------------------------------------------------------- validation

Result failure(const KernelInfo* k, const std::string& what) {
    return Result{false, "[mb::sim::run] " + std::string(k ? k->name : "(no kernel)") + ": " + what, 0.0};
}

size_t fc_size(abi::FcType t) {
    switch (t) {
        case abi::FcType::Bool: return sizeof(bool);
        case abi::FcType::Int16:
        case abi::FcType::UInt16:
        case abi::FcType::Half: return 2;
        default: return 4;
    }
}

const char* fc_type_name(abi::FcType t) {
    switch (t) {
        case abi::FcType::Bool: return "bool";
        case abi::FcType::Int16: return "short";
        case abi::FcType::UInt16: return "ushort";
        case abi::FcType::Int32: return "int";
        case abi::FcType::UInt32: return "uint";
        case abi::FcType::Float: return "float";
        case abi::FcType::Half: return "half";
    }
    return "?";
}

void store_fc(const abi::FcDecl& decl, const FunctionConstant& c) {
    unsigned char bytes[4] = {};
    switch (decl.type) {
        case abi::FcType::Bool: {
            bool v = c.int_value != 0;
            std::memcpy(bytes, &v, sizeof v);
            break;
        }
        case abi::FcType::Int16: {
            auto v = static_cast<int16_t>(c.int_value);
            std::memcpy(bytes, &v, sizeof v);
            break;
        }
        case abi::FcType::UInt16: {
            auto v = static_cast<uint16_t>(c.int_value);
            std::memcpy(bytes, &v, sizeof v);
            break;
        }
        case abi::FcType::Int32: {
            auto v = static_cast<int32_t>(c.int_value);
            std::memcpy(bytes, &v, sizeof v);
            break;
        }
        case abi::FcType::UInt32: {
            auto v = static_cast<uint32_t>(c.int_value);
            std::memcpy(bytes, &v, sizeof v);
            break;
        }
        case abi::FcType::Float: std::memcpy(bytes, &c.float_value, sizeof(float)); break;
        case abi::FcType::Half: {
            auto v = static_cast<_Float16>(c.float_value);
            std::memcpy(bytes, &v, sizeof v);
            break;
        }
    }
    std::memcpy(decl.value, bytes, fc_size(decl.type));
    *decl.defined = true;
}

// Checks the dispatch against the kernel and Metal's limits; fills the job's layout.
Result prepare(const Dispatch& d, Job& job) {
    const KernelInfo* k = d.kernel;
    if (!k) return failure(nullptr, "no kernel");
    if (registry().duplicates.count(k->name)) {
        return failure(k, "more than one generated source registers this kernel name");
    }
    const uint64_t threads = uint64_t(d.threads.x) * d.threads.y * d.threads.z;
    if (threads == 0) return failure(k, "threads per threadgroup must be at least 1 in each dimension");
    if (threads > kMaxThreadsPerThreadgroup || threads > k->max_threads) {
        return failure(k, std::to_string(threads) + " threads per threadgroup (" + std::to_string(d.threads.x) +
                              "x" + std::to_string(d.threads.y) + "x" + std::to_string(d.threads.z) +
                              ") exceed the limit of " +
                              std::to_string(std::min(kMaxThreadsPerThreadgroup, k->max_threads)));
    }
    job.n_threads = static_cast<uint32_t>(threads);
    job.n_groups = uint64_t(d.grid.x) * d.grid.y * d.grid.z;

    if (d.buffers.size() > abi::kMaxBufferSlots) {
        return failure(k, std::to_string(d.buffers.size()) + " buffer bindings exceed the 31 slots");
    }
    if (d.threadgroup_memory.size() > abi::kMaxThreadgroupSlots) {
        return failure(k, std::to_string(d.threadgroup_memory.size()) +
                              " threadgroup memory bindings exceed the 31 slots");
    }
    size_t total = 0, arena = 0;
    for (size_t i = 0; i < d.threadgroup_memory.size(); ++i) {
        const size_t n = d.threadgroup_memory[i];
        if (n % 16 != 0) {
            return failure(k, "threadgroup(" + std::to_string(i) + ") length " + std::to_string(n) +
                                  " is not a multiple of 16");
        }
        total += n;
        if (total > kMaxThreadgroupMemory) {
            return failure(k, "threadgroup memory of " + std::to_string(total) + "+ bytes exceeds " +
                                  std::to_string(kMaxThreadgroupMemory));
        }
        if (n) {
            job.tg_offset[i] = arena;
            job.tg_size[i] = n;
            arena += n + kCanary;
        }
    }
    job.tg_total = arena;

    for (uint32_t p = 0; p < k->n_params; ++p) {
        const abi::Param& prm = k->params[p];
        if (prm.kind == abi::ParamKind::Buffer) {
            const bool bound = prm.slot < d.buffers.size() && d.buffers[prm.slot].ptr;
            if (!bound) {
                if (prm.optional) continue;
                return failure(k, "buffer(" + std::to_string(prm.slot) + ") is not bound");
            }
            const size_t size = d.buffers[prm.slot].size;
            if (prm.min_size && size && size < prm.min_size) {
                return failure(k, "buffer(" + std::to_string(prm.slot) + ") holds " + std::to_string(size) +
                                      " bytes, the kernel reads a " + std::to_string(prm.min_size) +
                                      "-byte struct");
            }
        } else if (prm.kind == abi::ParamKind::Threadgroup) {
            if (prm.slot >= d.threadgroup_memory.size() || d.threadgroup_memory[prm.slot] == 0) {
                return failure(k, "threadgroup(" + std::to_string(prm.slot) + ") has no memory");
            }
        }
    }

    for (uint32_t i = 0; i < k->n_constants; ++i) {
        const abi::FcDecl& decl = k->constants[i];
        const FunctionConstant* value = nullptr;
        for (const FunctionConstant& c : d.constants) {
            if (c.index == decl.index) value = &c;
        }
        if (value && value->type != decl.type) {
            return failure(k, "function constant " + std::to_string(decl.index) + " (" + decl.name + ") is " +
                                  fc_type_name(decl.type) + ", given " + fc_type_name(value->type));
        }
    }
    for (uint32_t i = 0; i < k->n_required; ++i) {
        const abi::FcDecl& decl = k->constants[k->required[i]];
        bool given = false;
        for (const FunctionConstant& c : d.constants) given = given || c.index == decl.index;
        if (!given) {
            return failure(k, "function constant " + std::to_string(decl.index) + " (" + decl.name +
                                  ") is not set");
        }
    }

    job.stack_size = std::max(d.stack_size ? d.stack_size : kDefaultFiberStack, kMinStack);
    return Result{};
}

void apply_constants(const Dispatch& d) {
    const KernelInfo* k = d.kernel;
    for (uint32_t i = 0; i < k->n_constants; ++i) {
        const abi::FcDecl& decl = k->constants[i];
        std::memset(decl.value, 0, fc_size(decl.type));
        *decl.defined = false;
        for (const FunctionConstant& c : d.constants) {
            if (c.index == decl.index) store_fc(decl, c);
        }
    }
}

}  // namespace

// ---------------------------------------------------------------- abi entry points

namespace abi {

void register_kernels(const KernelInfo* kernels, size_t n, bool racecheck) {
    Registry& r = racecheck ? racecheck_registry() : registry();
    for (size_t i = 0; i < n; ++i) {
        if (!r.by_name.emplace(kernels[i].name, &kernels[i]).second) r.duplicates.insert(kernels[i].name);
    }
}

SimdExchange* simd_exchange(SyncOp op, const SimdSlot& value, const char* file, uint32_t line, uint32_t* lane) {
    if (LaneInfo* li = tls_lane) {
        return static_cast<Worker*>(li->owner)->simd_exchange(li, op, value, file, line, lane);
    }
    // A kernel function called outside a dispatch behaves as a one-lane simdgroup.
    static thread_local SimdExchange outside{};
    outside.active = 1;
    outside.resolved = false;
    outside.in[0] = value;
    *lane = 0;
    return &outside;
}

void threadgroup_barrier(const char* file, uint32_t line) {
    if (LaneInfo* li = tls_lane) static_cast<Worker*>(li->owner)->threadgroup_barrier(li, file, line);
}

void fail(const char* what, const char* file, uint32_t line) {
    if (LaneInfo* li = tls_lane) static_cast<Worker*>(li->owner)->fail_kernel(li, what, file, line);
}

}  // namespace abi

// ---------------------------------------------------------------- public API

FunctionConstant FunctionConstant::boolean(uint32_t index, bool v) {
    return FunctionConstant{index, FunctionConstantType::Bool, v ? 1 : 0, 0.f};
}
FunctionConstant FunctionConstant::int16(uint32_t index, int16_t v) {
    return FunctionConstant{index, FunctionConstantType::Int16, v, 0.f};
}
FunctionConstant FunctionConstant::uint16(uint32_t index, uint16_t v) {
    return FunctionConstant{index, FunctionConstantType::UInt16, v, 0.f};
}
FunctionConstant FunctionConstant::int32(uint32_t index, int32_t v) {
    return FunctionConstant{index, FunctionConstantType::Int32, v, 0.f};
}
FunctionConstant FunctionConstant::uint32(uint32_t index, uint32_t v) {
    return FunctionConstant{index, FunctionConstantType::UInt32, v, 0.f};
}
FunctionConstant FunctionConstant::float32(uint32_t index, float v) {
    return FunctionConstant{index, FunctionConstantType::Float, 0, v};
}
FunctionConstant FunctionConstant::float16(uint32_t index, float v) {
    return FunctionConstant{index, FunctionConstantType::Half, 0, v};
}

const KernelInfo* find_kernel(std::string_view name) {
    const Registry& r = registry();
    auto it = r.by_name.find(name);
    return it == r.by_name.end() ? nullptr : it->second;
}

const KernelInfo* find_racecheck_kernel(std::string_view name) {
    const Registry& r = racecheck_registry();
    auto it = r.by_name.find(name);
    return it == r.by_name.end() ? nullptr : it->second;
}

bool racecheck_built() { return !racecheck_registry().by_name.empty(); }

std::string check_concurrent(const char* kernel_a, const race::Footprint& a, const uint32_t grid_a[3],
                             const char* kernel_b, const race::Footprint& b, const uint32_t grid_b[3]) {
    race::Footprint::Conflict c;
    if (!race::Footprint::conflict(a, b, &c)) return {};
    auto who = [](const char* kernel, const uint32_t grid[3], const race::Site& s, bool writes) {
        return std::string(kernel) + " (threadgroup " + race::group_name(s.group, grid) + " thread " +
               std::to_string(s.tid) + (writes ? " writes" : " reads") + " at " + race::source_line(s.pc) + ")";
    };
    char addr[32];
    std::snprintf(addr, sizeof addr, "%#llx", static_cast<unsigned long long>(c.addr));
    const bool a_writes = c.a_writes;
    const bool b_writes = c.a_writes ? c.other_writes : true;
    return "[mb::sim::run] racecheck: two dispatches of a concurrent pass with no memory barrier between them "
           "touch device address " + std::string(addr) + ": " + who(kernel_a, grid_a, c.a, a_writes) + " and " +
           who(kernel_b, grid_b, c.b, b_writes) + " (the first access of each to that 64-byte line)";
}

std::vector<std::string> kernel_names() {
    std::vector<std::string> names;
    for (const auto& kv : registry().by_name) names.emplace_back(kv.first);
    std::sort(names.begin(), names.end());
    return names;
}

namespace {

// "buffer(2) byte 64" for a device address of a dispatch.
std::string buffer_place(uintptr_t addr, const void* ctx) {
    const Dispatch& d = *static_cast<const Dispatch*>(ctx);
    int best = -1;
    for (size_t i = 1; i < d.buffers.size(); ++i) {
        const auto lo = reinterpret_cast<uintptr_t>(d.buffers[i].ptr);
        if (lo && addr >= lo && addr < lo + d.buffers[i].size &&
            (best < 0 || lo > reinterpret_cast<uintptr_t>(d.buffers[best].ptr))) {
            best = static_cast<int>(i);
        }
    }
    if (best < 0) return "device memory";
    return "buffer(" + std::to_string(best) + ") byte " +
           std::to_string(addr - reinterpret_cast<uintptr_t>(d.buffers[best].ptr));
}

}  // namespace

Result run(const Dispatch& dispatch_in, Schedule schedule, int n_threads) {
    try {
        Dispatch racecheck_dispatch;
        const bool racecheck = dispatch_in.racecheck;
        if (racecheck && dispatch_in.kernel) {
            const KernelInfo* twin = find_racecheck_kernel(dispatch_in.kernel->name);
            if (!twin) {
                return failure(dispatch_in.kernel,
                               "racecheck: this build has no racecheck build of the kernel (built without "
                               "-fsanitize=thread support: MB_SIM_RACECHECK is off)");
            }
            racecheck_dispatch = dispatch_in;
            racecheck_dispatch.kernel = twin;
        }
        const Dispatch& dispatch = racecheck ? racecheck_dispatch : dispatch_in;
        Job job;
        job.dispatch = &dispatch;
        job.kernel = dispatch.kernel;
        job.schedule = schedule;
        job.racecheck = racecheck;
        Result r = prepare(dispatch, job);
        if (!r.ok || job.n_groups == 0) return r;
        if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        Pool& pool = Pool::instance();
        std::lock_guard<std::mutex> lock(pool.dispatch_mutex());
        apply_constants(dispatch);
        const auto start = std::chrono::steady_clock::now();
        pool.run(job, n_threads);
        const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
        if (racecheck) {
            std::vector<race::DeviceWrite> writes;
            for (race::Tracker* t : pool.trackers()) {
                writes.insert(writes.end(), t->device_writes().begin(), t->device_writes().end());
                t->device_writes().clear();
                if (dispatch.footprint) dispatch.footprint->merge(t->footprint());
                t->footprint() = race::Footprint();
            }
            if (job.error_group != UINT64_MAX) return Result{false, job.error, ns};
            const uint32_t grid[3] = {dispatch.grid.x, dispatch.grid.y, dispatch.grid.z};
            std::string e = race::check_device_writes(
                writes, grid, "[mb::sim::run] " + std::string(dispatch_in.kernel->name) + ": ", &buffer_place,
                &dispatch);
            if (!e.empty()) return Result{false, e, ns};
        }
        if (job.error_group != UINT64_MAX) return Result{false, job.error, ns};
        return Result{true, std::string(), ns};
    } catch (const std::exception& e) {
        return failure(dispatch_in.kernel, std::string("host failure: ") + e.what());
    }
}

}  // namespace mb::sim
