#include "cpu/thread_pool.h"

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace mb {

namespace {

// Waits until done() holds: spins briefly (nodes take microseconds), then yields the core so that on
// a busy machine the threads being waited for can run.
template <typename Done>
void wait_until(Done done) {
    for (int spin = 0; !done(); ++spin) {
        if (spin < 4096) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        } else {
            std::this_thread::yield();
        }
    }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    for (int i = 1; i < n_threads_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
}

void ThreadPool::run_task(int ith) {
    try {
        (*task_)(ith);
    } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
    }
}

void ThreadPool::worker(int ith) {
    uint64_t seen = 0;
    for (;;) {
        // Spin briefly: nodes follow each other within microseconds during a graph.
        for (int spin = 0; spin < 20000 && __atomic_load_n(&generation_, __ATOMIC_ACQUIRE) == seen &&
                           !__atomic_load_n(&stop_, __ATOMIC_ACQUIRE);
             ++spin) {
#if defined(__x86_64__)
            __builtin_ia32_pause();
#endif
        }
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        if (ith < task_n_) {
            run_task(ith);
            pending_.fetch_sub(1, std::memory_order_acq_rel);
        }
    }
}

void ThreadPool::run(int n, const std::function<void(int)>& fn) {
    if (n > n_threads_) n = n_threads_;
    if (n <= 1) {
        task_n_ = 1;  // barrier() inside fn is then a no-op
        fn(0);
        return;
    }
    error_ = nullptr;
    barrier_count_.store(0);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        task_ = &fn;
        task_n_ = n;
        pending_.store(n - 1);
        __atomic_add_fetch(&generation_, 1, __ATOMIC_RELEASE);
    }
    wake_.notify_all();
    run_task(0);
    wait_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
}

void ThreadPool::barrier() {
    int n = task_n_;
    if (n <= 1) return;
    uint64_t phase = barrier_phase_.load(std::memory_order_acquire);
    if (barrier_count_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
        barrier_count_.store(0, std::memory_order_relaxed);
        barrier_phase_.fetch_add(1, std::memory_order_acq_rel);
        return;
    }
    wait_until([&] { return barrier_phase_.load(std::memory_order_acquire) != phase; });
}

}  // namespace mb
