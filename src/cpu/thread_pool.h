// A fork-join pool for per-node work: run(n, fn) calls fn(ith) on n threads (the caller is thread 0)
// and returns when all are done. Tasks may call barrier() to wait for each other between phases.
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
    // Runs fn(0..n-1), n <= size(), and rethrows the first exception a task threw.
    void run(int n, const std::function<void(int)>& fn);
    // Waits until all n tasks of the current run() reach it. Call from every task or from none.
    void barrier();

private:
    void worker(int ith);
    void run_task(int ith);

    int n_threads_;
    std::vector<std::thread> threads_;
    std::mutex mutex_;
    std::condition_variable wake_;
    const std::function<void(int)>* task_ = nullptr;
    int task_n_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
    std::atomic<int> pending_{0};
    std::atomic<int> barrier_count_{0};
    std::atomic<uint64_t> barrier_phase_{0};
    std::mutex error_mutex_;
    std::exception_ptr error_;
};

}  // namespace mb
