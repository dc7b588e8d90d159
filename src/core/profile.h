// Per-node profile of a graph on a backend (ggml's perf print, as data): each computing node is run
// alone, as a one-node graph computed and waited for, and timed on the host clock. That works the same
// on every backend without hooks in their compute loops: on the CPU it is the node's wall time; on
// Metal and MetalSim each node becomes its own command buffer (so the time is one dispatch plus its
// commit and wait, and fusion and concurrency are off). GPU-side time per dispatch would come from
// Metal counter sample buffers at dispatch boundaries (or GPUStartTime/GPUEndTime per command buffer);
// that is not measured here, and the profile's `clock` says what was.
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
    double time_us;   // mean over the repeats
    uint64_t bytes;   // bytes of the node's sources and result (0: none)
    uint64_t flops;   // floating-point operations where known (0: unknown)
};

struct GraphProfile {
    std::string backend;
    std::string clock;
    double wall_us = 0;  // the whole profiled run, all repeats
    std::vector<NodeProfile> nodes;
};

// FLOPs of one node where the op makes it clear (matrix products, attention, element-wise ops), else 0.
uint64_t node_flops(const Tensor& node);
uint64_t node_bytes(const Tensor& node);

// Runs graph's computing nodes one at a time, in order, `repeat` times (>= 1), and times each. The
// graph's tensors must be allocated; results equal a normal compute's. Throws what graph_compute throws,
// InvalidArgumentError for repeat < 1, and stops (returning what was timed) when a compute is aborted.
GraphProfile profile_graph(Backend& backend, Graph& graph, int repeat);

}  // namespace mb
