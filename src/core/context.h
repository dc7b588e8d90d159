// A Context owns tensor metadata (ggml_context's role). Tensors live as long as their context; the
// Python wrappers keep the context alive, so a tensor handle never dangles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace mb {

class Context : public std::enable_shared_from_this<Context> {
public:
    // A new tensor with contiguous strides. Throws InvalidArgumentError for negative dims, a first dim
    // that is not a multiple of the type's block size, or a size that overflows.
    Tensor* new_tensor(Type type, const int64_t ne[kMaxDims], int n_dims, const std::string& name = "");
    // A tensor aliasing `src`'s memory at byte `offset` with the given metadata (op = VIEW-like `op`).
    Tensor* new_view(Tensor* src, Op op, const int64_t ne[kMaxDims], const size_t nb[kMaxDims], int n_dims,
                     size_t offset);

    const std::deque<std::unique_ptr<Tensor>>& tensors() const { return tensors_; }
    size_t size() const { return tensors_.size(); }

private:
    std::deque<std::unique_ptr<Tensor>> tensors_;
};

}  // namespace mb
