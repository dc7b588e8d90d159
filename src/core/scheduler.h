// The scheduler (ggml_backend_sched): runs one graph over several backends. Each node goes to a
// backend that can run it, preferring the one whose memory already holds its weights and, among the
// rest, the earlier backends in the list; what no earlier backend supports falls back to later ones
// (put the CPU last). Tensors crossing from one backend's memory to another's are copied.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/allocation.h"
#include "core/backend.h"

namespace mb {

class Buffer;
class Context;
class Graph;
struct Tensor;

struct Placement {
    Tensor* node;
    int backend;         // index into the scheduler's backends
    std::string reason;  // why this backend
};

class Scheduler {
public:
    // Throws InvalidArgumentError for an empty list or repeated backends.
    explicit Scheduler(std::vector<std::shared_ptr<Backend>> backends);
    ~Scheduler();

    const std::vector<std::shared_ptr<Backend>>& backends() const { return backends_; }

    // Where each node of the graph runs and why. Throws UnsupportedOpError for a node no backend can run.
    std::vector<Placement> plan(const Graph& graph) const;
    // Places the graph's unplaced nodes, copies inputs across backends, and computes split by split.
    // Returns ABORTED if a backend's abort callback stopped it.
    //
    // Memory: the graph's outputs (and nodes flagged input/output) without memory get a buffer of
    // their own on their first compute, held by those tensors: they stay valid until the next compute
    // of a graph that writes them, whatever else any scheduler computes. Every other unplaced node
    // is an intermediate: placed in this scheduler's scratch memory (one buffer per backend, reused
    // by every compute) for this compute only, and unplaced when it ends (kTensorScratch), so that a
    // later read raises instead of returning another compute's values. A node left in a freed buffer
    // is placed again. Computes from several threads take turns; computes of graphs sharing unplaced
    // nodes take turns across schedulers too. One from inside a running compute of this scheduler (a
    // backend's abort callback) raises DeviceError instead of waiting for itself.
    Status graph_compute(Graph& graph);

    // Number of splits (runs of consecutive nodes on one backend) and input copies of the last compute.
    int n_splits() const { return n_splits_; }
    int n_copies() const { return n_copies_; }

private:
    int backend_of_buffer(const Tensor& t) const;
    std::vector<Placement> plan_nodes(const Graph& graph) const;

    std::vector<std::shared_ptr<Backend>> backends_;
    std::vector<std::shared_ptr<Buffer>> scratch_;  // per backend: intermediates of the running compute
    struct CachedPlans {
        std::weak_ptr<Context> context;
        std::vector<std::pair<const Tensor*, uint32_t>> key;
        std::vector<MemoryPlan> plans;  // per backend
    };
    std::vector<CachedPlans> plan_cache_;  // recent graphs' scratch plans, oldest first
    std::shared_ptr<Context> copies_ctx_;
    int n_splits_ = 0;
    int n_copies_ = 0;
    std::mutex compute_mutex_;
    std::atomic<std::thread::id> computing_thread_{};
};

// Reads a tensor's elements into `dst` as a contiguous block (rows gathered by strides), and the reverse.
void read_packed(const Tensor& t, void* dst);
void write_packed(Tensor& t, const void* src);

}  // namespace mb
