// Placing tensors in buffers: all of a context's tensors at once (weights, inputs), or a graph's
// intermediates in one buffer whose memory is reused once a tensor is no longer needed.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace mb {

class Buffer;
class BufferType;
class Context;
class Graph;
struct Tensor;

// Allocates one buffer of `buft` holding every tensor of `ctx` that has no memory yet (views excepted)
// and places them in it. Returns nullptr when there is nothing to place.
std::shared_ptr<Buffer> alloc_ctx_tensors(Context& ctx, const std::shared_ptr<BufferType>& buft);

// Places one tensor at `offset` in an existing buffer (ggml_backend_tensor_alloc), e.g. weights inside
// a mapped file. Throws InvalidArgumentError for views, tensors already placed, misaligned offsets, and
// OutOfRangeError when the tensor (with its op scratch) does not fit.
void place_tensor(Tensor& t, const std::shared_ptr<Buffer>& buffer, size_t offset);

// ggml_gallocr: places a graph's unplaced tensors in one buffer. Leafs, graph outputs and tensors
// flagged input/output keep their memory for the whole graph; every other tensor's memory is reused
// after its last consumer has run. The buffer is kept and grown across graphs.
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
