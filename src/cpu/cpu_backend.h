// A CPU backend: computes graphs on the host with its own pool of n_threads threads.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/backend.h"
#include "cpu/scratch.h"
#include "cpu/thread_pool.h"

namespace mb {

class CpuDevice;

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(std::shared_ptr<CpuDevice> device);

    std::string name() const override { return "CPU"; }
    std::shared_ptr<Device> device() const override;
    Status graph_compute_async(Graph& graph) override;

    int n_threads() const { return static_cast<int>(option("n_threads")); }

private:
    std::shared_ptr<CpuDevice> device_;
    std::mutex mutex_;  // one compute at a time per backend: the pool and scratch are its own
    std::unique_ptr<ThreadPool> pool_;
    Scratch scratch_;  // one node's scratch at a time, guarded
};

}  // namespace mb
