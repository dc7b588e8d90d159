// A fork-join pool for per-node work: run(n, fn) calls fn(slot) for every slot 0..n-1 and returns when
// all are done. Tasks may call barrier() to wait for each other between phases.
//
// Slots are claimed, not assigned: worker w claims slot w (so a node's static split lands on the
// same cores call after call and their caches stay warm), then helps with slots still open; the
// calling thread, once done with slot 0, runs every slot no worker has claimed yet. A run therefore
// never waits for a worker that is parked or not scheduled (a busy machine, another library's
// spinning threads): it waits only for slots already running. Workers spin between runs, longer
// inside a burst (a graph compute), then park on a futex; begin_burst() wakes them ahead of a graph's
// first node.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mb {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }
    // Runs fn(0..n-1), n <= size(), each slot exactly once on some thread of the pool or the caller,
    // and rethrows the first exception a task threw. Not re-entrant: one run at a time.
    void run(int n, const std::function<void(int)>& fn);
    // Waits until all n slots of the current run() reach it. Call from every slot or from none; a
    // run whose slots meet at a barrier needs n threads at once, so it does wait for the workers.
    void barrier();
    // Brackets a burst of runs (one graph compute): wakes parked workers now, so that they are
    // spinning by the first run, and keeps them spinning longer between runs until end_burst().
    void begin_burst();
    void end_burst();
    // How long an idle worker spins after a burst before it parks (default kDefaultSpinAfterBurstUs).
    // Longer keeps a caller that alternates computes with host work on warm workers, at the cost of
    // cores kept busy for that long after every compute. Takes effect at the workers' next wait.
    static constexpr int64_t kDefaultSpinAfterBurstUs = 500;
    void set_spin_after_burst_us(int64_t us) { spin_after_burst_us_.store(us, std::memory_order_relaxed); }

private:
    struct alignas(64) Slot {
        // 3g: open in run g; 3g+1: claimed; 3g+2: done.
        std::atomic<uint64_t> state{0};
    };

    void worker(int w);
    // Claims and runs open slots of run g, trying slot `first` first.
    void work(int first, uint64_t g);
    void run_task(int slot);
    // Spins, then parks, until a run newer than `seen` is published; 0 when the pool stops.
    uint64_t await_run(uint64_t seen);
    void wake_parked();

    int n_threads_;
    std::vector<std::thread> threads_;
    std::vector<Slot> slots_;
    const std::function<void(int)>* task_ = nullptr;
    std::atomic<int> task_n_{0};
    alignas(64) std::atomic<uint64_t> gen_{0};
    alignas(64) std::atomic<int> parked_{0};
    std::atomic<uint32_t> wake_seq_{0};  // the futex word parked workers sleep on
    std::atomic<bool> in_burst_{false};
    std::atomic<int64_t> spin_after_burst_us_{kDefaultSpinAfterBurstUs};
    std::atomic<bool> stop_{false};
    alignas(64) std::atomic<int> barrier_count_{0};
    std::atomic<uint64_t> barrier_phase_{0};
    std::mutex error_mutex_;
    std::exception_ptr error_;
#if !defined(__linux__)
    std::mutex park_mutex_;  // parking without a futex: a condition variable on wake_seq_
    std::condition_variable park_cv_;
#endif
};

}  // namespace mb
