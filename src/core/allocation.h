// Placing tensors in buffers: all of a context's tensors at once (weights, inputs), or a graph's
// intermediates in one buffer whose memory is reused once a tensor is no longer needed.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace mb {

class Buffer;
class BufferType;
class Context;
class Graph;
struct Tensor;

// Allocates one buffer of `buft` holding every tensor of `ctx` that has no memory yet (views and the
// intermediates a Scheduler has placed, kTensorScratch, excepted) and places them in it. Returns
// nullptr when there is nothing to place.
std::shared_ptr<Buffer> alloc_ctx_tensors(Context& ctx, const std::shared_ptr<BufferType>& buft);

// Places one tensor at `offset` in an existing buffer (ggml_backend_tensor_alloc), e.g. weights inside
// a mapped file. Throws InvalidArgumentError for views, tensors already placed, misaligned offsets, and
// OutOfRangeError when the tensor (with its op scratch) does not fit.
void place_tensor(Tensor& t, const std::shared_ptr<Buffer>& buffer, size_t offset);

// Where the unplaced tensors of a graph go in one arena: within the graph, a tensor's memory is reused
// after its last consumer has run, except for leafs, graph outputs and tensors flagged input/output,
// which keep theirs. Only tensors `select` accepts are planned (all when it is empty).
struct MemoryPlan {
    std::vector<std::pair<Tensor*, size_t>> offsets;
    size_t peak = 0;      // bytes the plan needs
    size_t unshared = 0;  // bytes without reuse
};
MemoryPlan plan_graph_memory(const Graph& graph, const BufferType& buft,
                             const std::function<bool(const Tensor&)>& select = {});

// ggml_gallocr: places a graph's unplaced tensors in one buffer, reusing memory within the graph
// (plan_graph_memory). The buffer belongs to the tensors placed in it: a later alloc_graph never
// reuses memory that a tensor of an earlier graph still occupies (it takes a new buffer unless no
// tensor is left in the previous one), so an earlier graph's outputs stay valid.
class GraphAllocator {
public:
    explicit GraphAllocator(std::shared_ptr<BufferType> buft) : buft_(std::move(buft)) {}

    // Plans and places; returns the bytes the plan needs (its peak).
    size_t alloc_graph(Graph& graph);

    const std::shared_ptr<BufferType>& buffer_type() const { return buft_; }
    const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
    size_t peak_bytes() const { return peak_; }
    // Bytes all placed tensors would need without reuse, for comparison with peak_bytes().
    size_t unshared_bytes() const { return unshared_; }

private:
    std::shared_ptr<BufferType> buft_;
    std::shared_ptr<Buffer> buffer_;
    size_t peak_ = 0;
    size_t unshared_ = 0;
};

}  // namespace mb
