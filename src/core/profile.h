// Per-node profile of a graph on a backend (ggml's perf print, as data): each computing node is run
// alone, as a one-node graph computed and waited for (Backend::graph_compute_timed), and timed twice:
// on the host clock around the compute, and on the backend's device clock where it has one (Metal:
// GPU time per dispatch from counter samples, else per command buffer; MetalSim: the executor's time
// per dispatch). A node's time is the device's when every node got one, else the host's; the
// profile's `clock` says which. On Metal and MetalSim each node becomes its own command buffer, so
// fusion and concurrency are off and the host time holds the commit and wait too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mb {

class Backend;
class Graph;
struct Tensor;

struct NodeProfile {
    Tensor* node;
    double start_us;  // when its first run began, from the profile's start
    double time_us;   // mean over the repeats, on the profile's clock
    double host_us;   // mean over the repeats, host wall time of the node's compute (commit and wait too)
    uint64_t bytes;   // bytes of the node's sources and result (0: none)
    uint64_t flops;   // floating-point operations where known (0: unknown)
};

struct GraphProfile {
    std::string backend;
    std::string clock;  // what time_us measures: the device clock's name, or "host wall time"
    double wall_us = 0;  // the whole profiled run, all repeats
    std::vector<NodeProfile> nodes;
    bool aborted = false;  // the abort callback stopped it: `nodes` are those that ran
};

// FLOPs of one node where the op makes it clear (matrix products, attention, element-wise ops), else 0.
uint64_t node_flops(const Tensor& node);
uint64_t node_bytes(const Tensor& node);

// Runs graph's computing nodes one at a time, in order, `repeat` times (>= 1), and times each. The
// graph's tensors must be allocated; results equal a normal compute's. Throws what graph_compute throws,
// InvalidArgumentError for repeat < 1, and stops (returning what was timed) when a compute is aborted.
GraphProfile profile_graph(Backend& backend, Graph& graph, int repeat);

}  // namespace mb
