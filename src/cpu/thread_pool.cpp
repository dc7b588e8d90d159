#include "cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace mb {

namespace {

using Clock = std::chrono::steady_clock;

// How long an idle worker spins before parking. Inside a graph compute the next node follows within
// microseconds, and a node that runs on one thread (small element-wise work) leaves the others
// waiting a little longer. After a compute, a caller that alternates short graphs with host work (a
// decoder step) finds the workers still spinning if it comes back within the after-burst spin
// (set_spin_after_burst_us; the CPU backend's `spin_us` option). Waking a parked worker costs tens
// of microseconds to milliseconds (more in VMs), against a few microseconds of work per thread in a
// small mat-vec: a call that finds the workers parked runs mostly on the calling thread.
constexpr auto kSpinInBurst = std::chrono::microseconds(2000);
// Past this much spinning, an idle worker also yields its core now and then, so that on a machine
// with more runnable threads than cores the threads that do have work get to run.
constexpr auto kSpinBeforeYield = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// Waits until done() holds: spins briefly (slots take microseconds), then yields the core so that on
// a busy machine the threads being waited for can run.
template <typename Done>
void wait_until(Done done) {
    for (int spin = 0; !done(); ++spin) {
        if (spin < 4096) {
            cpu_relax();
        } else {
            std::this_thread::yield();
        }
    }
}

uint64_t open_state(uint64_t g) { return 3 * g; }

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads), slots_(size_t(n_threads_)) {
    for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_seq_cst);
    wake_parked();
    for (auto& t : threads_) t.join();
}

void ThreadPool::wake_parked() {
#if defined(__linux__)
    wake_seq_.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&wake_seq_), FUTEX_WAKE_PRIVATE, n_threads_, nullptr, nullptr, 0);
#else
    {
        std::lock_guard<std::mutex> lock(park_mutex_);
        wake_seq_.fetch_add(1, std::memory_order_seq_cst);
    }
    park_cv_.notify_all();
#endif
}

uint64_t ThreadPool::await_run(uint64_t seen) {
    for (;;) {
        const auto start = Clock::now();
        for (uint32_t spin = 1;; ++spin) {
            const uint64_t g = gen_.load(std::memory_order_acquire);
            if (g != seen) return g;
            if (stop_.load(std::memory_order_relaxed)) return 0;
            cpu_relax();
            if (spin % 64 == 0) {
                const auto idle = Clock::now() - start;
                const std::chrono::microseconds after_burst(spin_after_burst_us_.load(std::memory_order_relaxed));
                const auto limit = in_burst_.load(std::memory_order_relaxed) ? kSpinInBurst : after_burst;
                if (idle > limit) break;
                if (idle > kSpinBeforeYield && spin % 1024 == 0) std::this_thread::yield();
            }
        }
        // Park. The publisher stores gen_ then reads parked_; we raise parked_ then read gen_: with
        // sequentially consistent order one of us sees the other, so no wake-up is lost.
        parked_.fetch_add(1, std::memory_order_seq_cst);
        const uint32_t seq = wake_seq_.load(std::memory_order_seq_cst);
        const uint64_t g = gen_.load(std::memory_order_seq_cst);
        if (g == seen && !stop_.load(std::memory_order_seq_cst)) {
#if defined(__linux__)
            syscall(SYS_futex, reinterpret_cast<uint32_t*>(&wake_seq_), FUTEX_WAIT_PRIVATE, seq, nullptr, nullptr, 0);
#else
            std::unique_lock<std::mutex> lock(park_mutex_);
            park_cv_.wait(lock, [&] { return wake_seq_.load(std::memory_order_seq_cst) != seq; });
#endif
        }
        parked_.fetch_sub(1, std::memory_order_seq_cst);
        // Woken by a run, a burst or stop: the spin loop above sees which.
    }
}

void ThreadPool::begin_burst() {
    in_burst_.store(true, std::memory_order_relaxed);
    if (parked_.load(std::memory_order_seq_cst) > 0) wake_parked();
}

void ThreadPool::end_burst() { in_burst_.store(false, std::memory_order_relaxed); }

void ThreadPool::run_task(int slot) {
    try {
        (*task_)(slot);
    } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
    }
}

void ThreadPool::work(int first, uint64_t g) {
    // A worker may read the slot count of a later run; its claims then fail, as they name run g.
    const int n = task_n_.load(std::memory_order_acquire);
    // Workers past the run's slots stay out: they would race the owners for their slots (and move
    // rows off the cores whose caches hold them); the caller runs any slot whose owner is late.
    if (first >= n) return;
    for (int k = 0; k < n; ++k) {
        Slot& slot = slots_[size_t((first + k) % n)];
        uint64_t open = open_state(g);
        if (slot.state.load(std::memory_order_relaxed) != open ||
            !slot.state.compare_exchange_strong(open, open + 1, std::memory_order_acq_rel)) {
            continue;
        }
        run_task((first + k) % n);
        slot.state.store(open + 2, std::memory_order_release);
    }
}

void ThreadPool::worker(int w) {
    uint64_t seen = 0;
    for (;;) {
        const uint64_t g = await_run(seen);
        if (g == 0) return;
        seen = g;
        work(w, g);
    }
}

void ThreadPool::run(int n, const std::function<void(int)>& fn) {
    if (n > n_threads_) n = n_threads_;
    if (n <= 1) {
        task_n_.store(1, std::memory_order_relaxed);  // barrier() inside fn is then a no-op
        fn(0);
        return;
    }
    const uint64_t g = gen_.load(std::memory_order_relaxed) + 1;
    error_ = nullptr;
    task_ = &fn;
    task_n_.store(n, std::memory_order_relaxed);
    barrier_count_.store(0, std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) slots_[size_t(i)].state.store(open_state(g), std::memory_order_relaxed);
    gen_.store(g, std::memory_order_seq_cst);
    if (parked_.load(std::memory_order_seq_cst) > 0) wake_parked();
    work(0, g);
    for (int i = 0; i < n; ++i) {
        const Slot& slot = slots_[size_t(i)];
        wait_until([&] { return slot.state.load(std::memory_order_acquire) == open_state(g) + 2; });
    }
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
}

void ThreadPool::barrier() {
    const int n = task_n_.load(std::memory_order_relaxed);
    if (n <= 1) return;
    const uint64_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_acq_rel);
        return;
    }
    wait_until([&] { return barrier_phase_.load(std::memory_order_acquire) != phase; });
}

}  // namespace mb
